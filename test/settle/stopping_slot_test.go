package settle

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/troupetest"
)

// A job that is stopping still holds its owner's admission slot (SPEC §2.9: the
// slot is freed by the settlement commit, not by the kill). An owner's bucket is
// filled with jobs whose producers settle only when the test says so; one is
// killed, and while it is stopping — its producer's Cancel returned, its Done not
// yet sent — a further start for that owner is refused with job/capacity and its
// producer is never run. Once the producer's killed outcome is committed, the same
// owner is admitted again, exactly once.
//
// Catches: freeing the slot when the kill lands (the job turns stopping) instead of
// at settlement.
func TestStoppingJobKeepsItsSlot(t *testing.T) {
	sys, _ := troupetest.Served(t)
	alice := troupetest.Agent(t, sys, "alice")
	limit := troupe.DefaultMaxConcurrentJobsPerOwner

	// Every producer but the victim settles killed when cancelled, so the system's
	// shutdown tears down whatever this test leaves live, also after a failure.
	settlesOnCancel := func() *troupetest.Producer {
		p := troupetest.NewProducer()
		p.OnCancel = &job.Outcome{Status: job.Killed}
		return p
	}
	prods := make([]*troupetest.Producer, limit)
	ids := make([]string, limit)
	for i := range prods {
		prods[i] = settlesOnCancel()
		if i == 0 {
			prods[i] = troupetest.NewProducer() // the victim: Cancel records; Done waits for Settle
		}
		id, err := sys.Jobs().Start(context.Background(), prods[i].Spec(alice))
		require.NoError(t, err)
		ids[i] = id
	}
	over := settlesOnCancel()
	_, err := sys.Jobs().Start(context.Background(), over.Spec(alice))
	require.ErrorIs(t, err, messages.ErrCapacity, "the bucket is full")

	victim := prods[0]
	t.Cleanup(func() { victim.Settle(job.Outcome{Status: job.Killed}) }) // before the shutdown; a no-op once settled
	res, snap, err := sys.Jobs().Kill(context.Background(), ids[0], registry.AsAgent(alice), registry.KillOptions{})
	require.NoError(t, err)
	require.Equal(t, messages.KillResult_KILL_RESULT_REQUESTED, res)
	require.Equal(t, messages.JobStatus_JOB_STATUS_STOPPING, snap.GetStatus())
	require.Len(t, victim.Cancels(), 1, "the kill ran the producer's Cancel once")

	// Stopping: still holding its slot, however often the owner asks.
	for range 3 {
		_, err = sys.Jobs().Start(context.Background(), over.Spec(alice))
		require.ErrorIs(t, err, messages.ErrCapacity, "a stopping job must keep its admission slot")
		require.Equal(t, messages.CodeCapacity, messages.CodeOf(err))
	}
	require.Zero(t, over.Runs(), "a refused start must not run its producer")
	got, err := sys.Jobs().Get(context.Background(), ids[0], registry.AsAgent(alice))
	require.NoError(t, err)
	require.Equal(t, messages.JobStatus_JOB_STATUS_STOPPING, got.GetStatus(), "the victim is still stopping")

	// Settled: the slot is free, once.
	victim.Settle(job.Outcome{Status: job.Killed, Detail: "signal: SIGTERM"})
	require.Equal(t, messages.JobStatus_JOB_STATUS_KILLED, troupetest.Settled(t, sys, ids[0], registry.AsAgent(alice)).GetStatus())
	_, err = sys.Jobs().Start(context.Background(), over.Spec(alice))
	require.NoError(t, err, "the settled job's slot is free again")
	require.Equal(t, 1, over.Runs())
	again := settlesOnCancel()
	_, err = sys.Jobs().Start(context.Background(), again.Spec(alice))
	require.ErrorIs(t, err, messages.ErrCapacity, "exactly one slot was freed")
	require.Zero(t, again.Runs())
}
