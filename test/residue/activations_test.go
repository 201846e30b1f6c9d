package residue

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/troupetest"
)

const (
	// childChurnFull and childChurnSmall are the continuable-child churn sizes
	// (without and with -race / -short).
	childChurnFull  = 20_000
	childChurnSmall = 1_000
	childWarmup     = 500
)

// okRunner answers every turn "ok" and keeps nothing (subagent.Scripted records
// every turn, which a churn would count as residue).
type okRunner struct{}

func (okRunner) RunTurn(context.Context, subagent.Turn) (subagent.TurnResult, error) {
	return subagent.TurnResult{StopReason: subagent.StopCompleted, Messages: []subagent.Message{
		{Role: "assistant", Content: []subagent.Block{{Type: "text", Text: "ok"}}}}}, nil
}

type childEnv struct {
	sys    *troupe.System
	m      *activation.Manager
	store  *session.Memory
	parent *owner.Agent
	ends   chan string
}

func newChildEnv(t *testing.T) *childEnv {
	sys, _ := troupetest.Served(t)
	rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), nil)
	require.NoError(t, err)
	e := &childEnv{sys: sys, store: session.NewMemory(), ends: make(chan string, 1)}
	_, err = rt.RegisterProvider(t.Context(), sys.Scope(), subagent.NewSpawn(sys.Actors(), okRunner{}))
	require.NoError(t, err)
	_, err = rt.Listen(t.Context(), sys.Scope(), func(ev subagent.Event) {
		if ev.Type == subagent.EventEnd {
			e.ends <- ev.ID
		}
	})
	require.NoError(t, err)
	e.m, err = sys.StartContinuations(e.store, rt, okRunner{}, nil)
	require.NoError(t, err)
	e.parent = troupetest.Agent(t, sys, "parent")
	return e
}

// child runs one continuable child incarnation through its life: start, its one
// turn, settlement, disposal (its end event), then deletes its session so that the
// store's own (durable, by design) growth is not counted.
func (e *childEnv) child(tb testing.TB, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), stepBudget)
	defer cancel()
	id := "child-" + strconv.Itoa(n)
	if _, _, err := e.m.Start(ctx, e.parent, "spawn", "churn", id, subagent.Request{Prompt: "go"}); err != nil {
		tb.Fatal(err)
	}
	select {
	case got := <-e.ends:
		if got != id {
			tb.Fatalf("end of %s, want %s", got, id)
		}
	case <-ctx.Done():
		tb.Fatalf("%s: no end event", id)
	}
	if err := e.store.Delete(ctx, id); err != nil {
		tb.Fatal(err)
	}
}

// TestContinuableChildChurnLeavesNoResidue churns continuable children of one
// long-lived parent: each is a child agent incarnation (registered under its
// session) with an Activation. After they all settled and were disposed, the
// directory's tables are empty, the registry is back to the parent alone, and the
// retained heap did not grow with their number.
func TestContinuableChildChurnLeavesNoResidue(t *testing.T) {
	e := newChildEnv(t)
	warmProcessRegistry(e.sys)
	for i := range childWarmup {
		e.child(t, i)
	}
	quiesce(t, e.sys)
	base := liveHeap()
	n := childChurnFull
	if raceEnabled || testing.Short() {
		n = childChurnSmall
	}
	start := time.Now()
	for i := range n {
		e.child(t, childWarmup+i)
	}
	elapsed := time.Since(start)
	reg := quiesce(t, e.sys)
	ctx, cancel := context.WithTimeout(context.Background(), stepBudget)
	defer cancel()
	dir, err := e.m.Footprint(ctx)
	require.NoError(t, err)
	after := liveHeap()
	grew := int64(after) - int64(base)
	t.Logf("%d continuable children in %v (%v each): retained heap %+d B in total, %.2f B per child (target 0)",
		n, elapsed.Round(time.Millisecond), (elapsed / time.Duration(n)).Round(time.Microsecond), grew, float64(grew)/float64(n))

	withParent := idle
	withParent.Agents = 1
	withParent.Kinds = 0 // no job was started
	assert.Equal(t, withParent, reg, "registry tables after the churn")
	assert.Equal(t, activation.Footprint{}, dir, "directory tables after the churn")
	assert.Less(t, grew, int64(retainedBudget), "retained heap grew by %d B over %d children", grew, n)
}

// TestDrainBelowEndsWithItsParent: drainContinuableDescendants records its parent
// until that parent leaves the registry; once the parent is disposed, the record
// is gone too (the directory does not keep one per drained parent incarnation).
func TestDrainBelowEndsWithItsParent(t *testing.T) {
	e := newChildEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), stepBudget)
	defer cancel()
	for i := range 3 {
		p := troupetest.Agent(t, e.sys, "drained-"+strconv.Itoa(i))
		require.NoError(t, e.m.DrainContinuableDescendants(ctx, []*owner.Agent{p}))
		f, err := e.m.Footprint(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, f.Below, "the drain below a live parent is in force")
		require.NoError(t, p.Dispose(ctx))
		f, err = e.m.Footprint(ctx)
		require.NoError(t, err)
		require.Equal(t, activation.Footprint{}, f, "directory tables after the drained parent was disposed")
	}
}
