//go:build troupe_mutation

package notices

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/harness"
	"github.com/troupe-rt/troupe/internal/fault"
	"github.com/troupe-rt/troupe/test/mutation"
	"github.com/troupe-rt/troupe/tools/jobtools"
)

// mutationRounds is the size of one mutation run: rounds of the randomized variant.
const mutationRounds = 20

// TestMutation_NoticeBeforeCommit is the mutation check of
// job.PlantedNoticeBeforeCommit (test/mutation's catalogue): a run is
// mutationRounds rounds of TestNoticesRandomized's variant, its mode (deterministic
// or stress) and delivery (wakeup or quiet) taken in turn by run. A notice made from
// the producer's outcome before the job settles lacks a human kill's reason, keeps
// a claim that a completion outran, and can outrun the claim of a teardown; the
// rounds' predictions of each settled snapshot and notice catch each of those.
func TestMutation_NoticeBeforeCommit(t *testing.T) {
	seed := harness.Seed(t)
	deliveries := []jobtools.Delivery{jobtools.Wakeup, jobtools.Quiet}
	mutation.Check(t, job.PlantedNoticeBeforeCommit, mutation.Runs(t, 4), func(tb testing.TB, run int, _ string) {
		s := fault.Mix(seed, uint64(run))
		delivery := deliveries[run%2]
		if run/2%2 == 0 {
			randomized(tb, s, mutationRounds, delivery, harness.NewDispatcher(s), nil)
			return
		}
		harness.Chaos(tb, s, 10)
		randomized(tb, s, mutationRounds, delivery, nil, harness.Noise(s, 20))
	})
	goleak.VerifyNone(t)
}
