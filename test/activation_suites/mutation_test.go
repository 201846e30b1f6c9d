package activationsuites

import (
	"context"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/session"
)

// TestModelsRejectViolations: each oracle model accepts a correct history and
// rejects the violations the suites exist to catch.
func TestModelsRejectViolations(t *testing.T) {
	op := func(kind opKind, epoch uint64, call, ret int64) opRec {
		return opRec{session: "c", kind: kind, epoch: epoch, call: call, ret: ret}
	}
	restart := func(epoch uint64, call, ret int64) opRec {
		o := op(opAcquire, epoch, call, ret)
		o.restart = true
		return o
	}
	dir := func(ops ...opRec) bool {
		return check("", directoryModel(), splitTurns(ops), false, opAcquire, opRelease, opTurn, opTurnEnd) == nil
	}
	require.True(t, dir(op(opAcquire, 1, 1, 2), op(opTurn, 1, 3, 4), op(opRelease, 1, 5, 5),
		op(opAcquire, 2, 6, 7), restart(3, 8, 9), op(opTurn, 3, 10, 11), op(opRelease, 2, 12, 12)), "a legal history")
	require.False(t, dir(op(opAcquire, 1, 1, 2), op(opAcquire, 2, 3, 4)), "a second activation while one is live")
	require.False(t, dir(op(opAcquire, 1, 1, 2), op(opTurn, 1, 3, 6), op(opRelease, 1, 4, 4), op(opAcquire, 2, 5, 5)),
		"a turn still running after its activation was released and another acquired")
	require.False(t, dir(op(opAcquire, 1, 1, 2), op(opRelease, 1, 3, 3), op(opAcquire, 1, 4, 5)), "an epoch reused")
	require.False(t, dir(op(opAcquire, 1, 1, 2), op(opRelease, 1, 3, 3), op(opTurn, 1, 4, 5)), "a turn with no live activation")
	require.False(t, dir(op(opAcquire, 1, 1, 2), restart(2, 3, 4), op(opTurn, 1, 5, 6)), "a turn at the epoch a restart fenced")
	require.False(t, dir(restart(1, 1, 2)), "a restart of nothing")

	enq := func(text string, seq uint64, call, ret int64) opRec {
		return opRec{session: "c", kind: opEnqueue, text: text, seq: seq, call: call, ret: ret}
	}
	deq := func(text string, at int64) opRec {
		return opRec{session: "c", kind: opTurn, text: text, call: at, ret: at}
	}
	fifo := func(ops ...opRec) bool { return check("", fifoModel(), ops, true, opEnqueue, opTurn) == nil }
	require.True(t, fifo(enq("a", 1, 1, 4), enq("b", 2, 2, 3), deq("a", 5), deq("b", 6)), "concurrent sends, FIFO turns")
	require.False(t, fifo(enq("a", 1, 1, 2), enq("b", 2, 3, 4), deq("b", 5), deq("a", 6)), "turns out of acceptance order")
	require.False(t, fifo(enq("a", 2, 1, 2), enq("b", 1, 3, 4), deq("b", 5), deq("a", 6)),
		"acceptance order against the sender's real-time order")
	require.False(t, fifo(enq("a", 1, 1, 2), deq("a", 3), deq("a", 4)), "a message run twice")
	require.False(t, fifo(deq("a", 1), enq("a", 1, 2, 3)), "a turn before its message was sent")
	_ = porcupine.Ok
}

// TestActivationOracleCatchesSecondDirectory is the suite's mutation check for
// "an activation without a directory claim": two continuation managers (two
// Systems, as two processes would be) share one store, so each materializes the
// session on its own. The directory model and the stale-write counter must see the
// second live Activation.
func TestActivationOracleCatchesSecondDirectory(t *testing.T) {
	seed := uint64(1)
	inner := session.NewMemory()
	hist := &history{}
	a := newWorld(t, worldOpts{mode: stress, seed: seed, inner: inner, hist: hist})
	b := newWorld(t, worldOpts{mode: stress, seed: seed + 1, inner: inner, hist: hist})
	pa, pb := a.parent("P"), b.parent("P")
	hold := a.runner.holdAll()
	a.start(pa, "c", holdPrefix+"start c") // resident in A: its first turn is held
	a.runner.awaitStarted(1)
	_, err := b.followup(pb, "c", "from B", coordinator("P")) // B cold-resumes it too
	require.NoError(t, err)
	b.runner.awaitTurns(1)
	close(hold)
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	require.NoError(t, a.m.Drain(ctx))
	require.NoError(t, b.m.Drain(ctx))

	ops := classifyAcquires(a.ops())
	err = check(t.Name(), directoryModel(), splitTurns(ops), false, opAcquire, opRelease, opTurn, opTurnEnd)
	require.Error(t, err, "the directory model accepted two live Activations of one session")
	t.Logf("caught: %v", err)
	require.Positive(t, a.store.stale.Load()+b.store.stale.Load(), "the fenced Activation never hit its stale epoch")
}

// TestBugRestartOverlapsCancelledTurn is the exact reproduction of the bug behind
// TestActivationStormCrashesMidTurn: child c runs a held turn whose runner takes a
// while to honour cancellation; followup A is queued behind it; followup B's Accept
// panics inside the Activation's Receive, which restarts it. The restarted
// Activation records the held turn aborted and starts A at once — while the held
// turn's RunTurn has not returned. Two turns of one session then run together.
func TestRestartWaitsForTheCancelledTurn(t *testing.T) {
	w := newWorld(t, worldOpts{mode: stress, seed: 1})
	p := w.parent("P")
	w.runner.gate("held")
	linger := w.runner.lingerOnCancel("held")
	w.start(p, "c", "held")
	w.runner.awaitStarted(1)
	_, err := w.followup(p, "c", "A", coordinator("P"))
	require.NoError(t, err)
	w.store.setFault(func(op, id string, written bool) error {
		if op == "accept" && !written {
			w.store.setFault(nil)
			panic("injected crash in Accept")
		}
		return nil
	})
	_, err = w.followup(p, "c", "B", coordinator("P"))
	require.Error(t, err, "B's handling crashed")
	// The restarted Activation waits for the cancelled turn to return before it takes
	// the session (a new epoch) or handles anything: C waits with it.
	accepted := make(chan error, 1)
	go func() {
		_, err := w.followup(p, "c", "C", coordinator("P"))
		accepted <- err
	}()
	require.Zero(t, ran(w, "held"), "the held turn returned early")
	close(linger) // the cancelled turn returns
	require.NoError(t, <-accepted)
	// In the log, the held turn's end precedes A's start: no overlap.
	heldEnd, aStart := -1, -1
	for i, e := range w.load("c").Log {
		switch {
		case e.Kind == session.EntryTurnAborted && heldEnd < 0:
			heldEnd = i
		case e.Kind == session.EntryMessage && e.Role == "user" && e.Content[0].Text == "A":
			aStart = i
		}
	}
	if aStart >= 0 {
		require.Greater(t, aStart, heldEnd, "A's turn started before the cancelled turn was recorded as ended")
	}
}
