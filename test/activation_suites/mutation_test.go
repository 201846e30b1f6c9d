package activationsuites

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/harness"
	"github.com/troupe-rt/troupe/internal/fault"
	"github.com/troupe-rt/troupe/session"
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
