// Package mutation is TESTING.md's mutation check: the catalogue of bugs planted in
// troupe's runtime (each behind a fault.Planted switch, inert outside tests) with
// the suite whose oracle must catch each, and Check, which a suite's mutation test
// calls to show that it does.
//
// The planted bugs, this package's code and every TestMutation_… test are compiled
// only with the build tag troupe_mutation (CI: go test -race -tags troupe_mutation
// -run 'TestMutation|TestCatalogue|TestCheck|TestRun|TestSummary|TestRace' ./test/... ./harness/);
// a default build has none of them, which this package's TestDefaultBuildHasNoPlantedCode checks.
//
// A mutation test runs its suite's own code — the function its ordinary test runs —
// in paired runs: run i with nothing planted must pass (so a catch is the bug's, not
// a flaky suite's), and the same run i (same seed) with the bug planted must fail.
// The suite reports through a testing.TB that records its failures instead of
// failing the mutation test. "Caught k of k" is the count of planted runs that
// failed; every one must.
//
// Knob: TROUPE_MUTATION_RUNS (paired runs per bug; each test has a small default).
package mutation
