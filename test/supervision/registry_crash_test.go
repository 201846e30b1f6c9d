package supervisionsuite

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/harness"
	"github.com/troupe-rt/troupe/internal/fault"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/supervision"
)

// A registry that panics in the middle of an admission (TESTING.md's "registry
// restart mid-admission": the id and the slot are taken and the producer is running)
// loses nothing: the caller is answered with a coded error, the producer is
// cancelled, the slot is freed, no record or tree node is left, and the registry —
// resumed by its guardian, its index whole — goes on: its live jobs still answer,
// and no id is ever handed out twice.
func TestRegistryCrashMidAdmissionLosesNothing(t *testing.T) {
	seed := harness.Seed(t)
	w := newWorld(t, seed)
	a := w.agent("alice")
	ids := map[string]bool{}
	for range 9 {
		ids[w.start(killable(), a)] = true
	}

	crashed := killable()
	restore := fault.Install(fault.New(seed, fault.PointPercent(registry.PointStartCrash, 100)))
	_, err := w.sys.Jobs().Start(context.Background(), crashed.Spec(a))
	restore()
	require.ErrorIs(t, err, messages.ErrRegistryFailed)
	require.Equal(t, 1, crashed.Runs(), "the producer ran before the crash")
	require.Equal(t, []string{registry.ReasonRegistryFailed}, crashed.Cancels(), "and was cancelled after it")

	tenth := w.start(killable(), a) // the crashed start's slot was freed: alice has 9 live jobs
	_, err = w.sys.Jobs().Start(context.Background(), killable().Spec(a))
	require.ErrorIs(t, err, messages.ErrCapacity, "10 live jobs, no more")
	require.False(t, ids[tenth], "id %s handed out twice", tenth)
	ids[tenth] = true

	list, err := w.sys.Jobs().List(context.Background(), registry.AsAgent(a))
	require.NoError(t, err)
	require.Len(t, list, 10, "no record of the crashed start")
	for _, s := range list {
		require.True(t, ids[s.Id], "unexpected job %s", s.Id)
		require.Equal(t, "running", s.Status.Name(), "%s survived the registry's crash", s.Id)
	}
	res, snap, err := w.sys.Jobs().Kill(context.Background(), tenth, registry.AsAgent(a), registry.KillOptions{Reason: "after the crash"})
	require.NoError(t, err)
	require.Equal(t, messages.KillResult_KILL_RESULT_REQUESTED, res)
	require.NotNil(t, snap)
	settled, err := w.sys.Jobs().AwaitSettled(ctxT(t), tenth, registry.AsAgent(a))
	require.NoError(t, err)
	require.Equal(t, "killed", settled.Status.Name())

	tree := w.agree()
	jobs := 0
	for _, n := range filter(tree.Nodes, supervision.KindJob) {
		require.True(t, ids[n.ID], "tree node %s of no job", n.Ref)
		jobs++
	}
	require.LessOrEqual(t, jobs, 10)
	require.Equal(t, 10, len(ids), fmt.Sprint(ids))
	w.noRejections()
}
