//go:build troupe_mutation

package settle

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/harness"
	"github.com/troupe-rt/troupe/test/mutation"
)

// The mutation checks of the bugs this suite catches (test/mutation's catalogue).
// A run is up to a fixed number of schedules, alternating deterministic and stress,
// that stops at the first one a named oracle fails (a schedule that fails
// otherwise, say by a lost reply after the same 30 s budget, is reported and is no
// catch); the run with nothing planted runs them all.

// TestMutation_CheckThenActSettle: job.PlantedCheckThenActSettle races a settlement
// decided outside the job actor against the actor's own; only some schedules
// interleave so that the two disagree (≈ 1 in 5, deterministic and stress
// together), so a run is 40 schedules.
func TestMutation_CheckThenActSettle(t *testing.T) {
	settleMutation(t, job.PlantedCheckThenActSettle, 3, 40)
}

// TestMutation_DoubleSlotRelease: registry.PlantedDoubleSlotRelease frees every
// settled job's slot twice; the admission probe sees it in each schedule that ends
// without a teardown (a torn-down owner starts nothing more), so a run is 20.
func TestMutation_DoubleSlotRelease(t *testing.T) {
	settleMutation(t, registry.PlantedDoubleSlotRelease, 3, 20)
}

func settleMutation(t *testing.T, bug string, defRuns, schedules int) {
	seed := harness.Seed(t)
	modes := []mode{deterministic, stress}
	planted := 0 // schedules run with the bug planted
	res := mutation.Check(t, bug, mutation.Runs(t, defRuns), func(tb testing.TB, run int, plant string) {
		first := baseMutation + uint64(run)<<20
		last := first + uint64(schedules)
		ran := runSchedules(tb, seed, modes, first, last, plant, 1)
		if plant != "" {
			planted += ran
		}
	})
	t.Logf("%s: %d schedules ran with it planted, %d caught it (a run stops at its first catch)", bug, planted, res.Caught)
	goleak.VerifyNone(t)
}
