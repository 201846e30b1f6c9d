// Package mutation is TESTING.md's mutation check: the catalogue of bugs planted in
// troupe's runtime (each behind a fault.Planted switch, inert outside tests) with
// the suite whose oracle must catch each, and Check, which a suite's mutation test
// calls to show that it does.
//
// The planted bugs, this package's code and every TestMutation_… test are compiled
// only with the build tag troupe_mutation (CI: go test -race -tags troupe_mutation
// -run 'TestMutation|TestCatalogue|TestCheck|TestOracle|TestRun|TestSummary|TestRace' ./test/... ./harness/,
// as .ci/run does);
// a default build has none of them, which this package's TestDefaultBuildHasNoPlantedCode checks.
//
// A mutation test runs its suite's own code — the function its ordinary test runs —
// in paired runs: run i with nothing planted must pass (so a catch is the bug's, not
// a flaky suite's), and the same run i (same seed) with the bug planted must fail.
// The suite reports through a testing.TB that records its failures instead of
// failing the mutation test, its oracles' violations through Oracle.TB (or
// Errorf), which names the oracle. A planted run is caught only if one of the
// oracles the catalogue names for its bug fired: a timeout, a setup error or
// another check failing is not a catch. Planted and clean runs have the same
// budgets. "Caught k of k" is the count of planted runs caught; every one must be.
//
// Knob: TROUPE_MUTATION_RUNS (paired runs per bug; each test has a small default).
package mutation
