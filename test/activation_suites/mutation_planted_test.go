//go:build troupe_mutation

package activationsuites

import (
	"math/rand/v2"
	"testing"

	"go.uber.org/goleak"

	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/harness"
	"github.com/troupe-rt/troupe/internal/fault"
	"github.com/troupe-rt/troupe/test/mutation"
)

// The mutation checks of the bugs these suites catch (test/mutation's catalogue).
// A run is up to a fixed number of the suite's schedules, their modes
// (deterministic, stress) in turn, that stops at the first failing one; the same
// schedules run without the bug first and must all pass.

// TestMutation_ActivationWithoutClaim: with
// activation.PlantedActivationWithoutClaim, a followup to a resident child
// materializes another Activation of it beside the claimed one. A run is one storm
// (TestActivationStormCold's or TestActivationStormResident's schedule, in turn):
// every child gets several followups while resident.
func TestMutation_ActivationWithoutClaim(t *testing.T) {
	activationMutation(t, activation.PlantedActivationWithoutClaim, 1, func(tb testing.TB, i int, m mode, seed uint64, rng *rand.Rand) {
		activationStorm(tb, m, seed, rng, i/2%2 == 1, noCrashes)
	})
}

// TestMutation_AuthzBySender: with activation.PlantedAuthzBySender, every live
// agent whose message claims the parent of record is let through. A run is one
// generated tree (TestAuthzResident's or TestAuthzCold's schedule, in turn), whose
// every ordered pair sends with that claim; a live stranger is always among them.
func TestMutation_AuthzBySender(t *testing.T) {
	activationMutation(t, activation.PlantedAuthzBySender, 1, func(tb testing.TB, i int, m mode, seed uint64, rng *rand.Rand) {
		authzSchedule(tb, m, seed, rng, i/2%2 == 0)
	})
}

// TestMutation_FIFOByMapIteration: with activation.PlantedFIFOByMapIteration, a
// turn takes any queued message. A TestFIFO schedule catches it when some turn
// starts with two or more messages queued and the map's order does not happen to
// agree with the queue's: ≈ 4 schedules in 5 (32 of 40 measured), so a run is up
// to 8 schedules.
func TestMutation_FIFOByMapIteration(t *testing.T) {
	activationMutation(t, activation.PlantedFIFOByMapIteration, 8, func(tb testing.TB, i int, m mode, seed uint64, rng *rand.Rand) {
		fifoSchedule(tb, m, seed, rng)
	})
}

// activationMutation checks bug against runs of up to n schedules each, schedule
// i of the test being of mode i%2 and seeded (as forSchedules seeds its subtests)
// from the run's seed and i.
func activationMutation(t *testing.T, bug string, n int, schedule func(tb testing.TB, i int, m mode, seed uint64, rng *rand.Rand)) {
	seed := harness.Seed(t)
	planted := 0 // schedules run with the bug planted
	res := mutation.Check(t, bug, mutation.Runs(t, 4), func(tb testing.TB, run int, plant string) {
		for i := run * n; i < (run+1)*n && !tb.Failed(); i++ {
			m := mode(i % 2)
			s := fault.Mix(seed, uint64(m)<<32|uint64(i))
			if plant != "" {
				planted++
			}
			schedule(tb, i, m, s, rand.New(rand.NewPCG(s, s^0x5eed)))
		}
	})
	t.Logf("%s: %d schedules ran with it planted, %d caught it (a run stops at its first catch)", bug, planted, res.Caught)
	goleak.VerifyNone(t)
}
