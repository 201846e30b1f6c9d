package activationsuites

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/internal/fault"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/test/mutation"
)

// TestActivationStormCold: barrier-released followup storms at settled children.
// The first followup of each child cold-resumes it; with a runner that returns at
// once, the activation settles between followups, so the storm races cold resumes
// against disposals and re-activations.
func TestActivationStormCold(t *testing.T) {
	forSchedules(t, schedules(t, 150, 40), func(t testing.TB, m mode, seed uint64, rng *rand.Rand) {
		activationStorm(t, m, seed, rng, false, noCrashes)
	})
}

// TestActivationStormResident: the same storms at resident children (each child's
// first turn is held until the storm has been accepted): every followup must go to
// the one live activation — no second activation, no re-activation.
func TestActivationStormResident(t *testing.T) {
	forSchedules(t, schedules(t, 150, 40), func(t testing.TB, m mode, seed uint64, rng *rand.Rand) {
		activationStorm(t, m, seed, rng, true, noCrashes)
	})
}

// TestActivationStormCrashes: the storms again, with Activations crashing (a panic
// inside Receive, from the store) at seeded turn starts and ends — before a write,
// or after it was committed. A crashed Activation restarts from its persisted
// session with a new epoch: the turn it had started is recorded aborted and not
// re-run, messages that never started run in order, and there is still never a
// second Activation or an overlapping turn.
//
// Here the crashes come at turn boundaries (turn starts, before the write; turn
// ends, before or after it), when no turn is in flight.
func TestActivationStormCrashes(t *testing.T) {
	forSchedules(t, schedules(t, 80, 20), func(t testing.TB, m mode, seed uint64, rng *rand.Rand) {
		activationStorm(t, m, seed, rng, rng.IntN(2) == 0, crashAtTurnBoundaries)
	})
}

// TestActivationStormCrashesMidTurn: the crashes come while a turn is in flight
// (a followup's Accept, before or after its write, while the held or another turn
// runs). The restarted Activation must not take its new epoch, nor start a turn,
// while its predecessor's cancelled turn is still running: the directory cancels
// that turn and restarts the crashed actor only once it has returned (it stays
// suspended meanwhile, its mailbox keeping what arrives). Until that fix the
// directory model saw a turn of the fenced epoch outlive its activation.
func TestActivationStormCrashesMidTurn(t *testing.T) {
	forSchedules(t, schedules(t, 20, 6), func(t testing.TB, m mode, seed uint64, rng *rand.Rand) {
		activationStorm(t, m, seed, rng, rng.IntN(2) == 0, crashMidTurn)
	})
}

// crashes is where a storm injects Activation crashes.
type crashes int

const (
	noCrashes             crashes = iota
	crashAtTurnBoundaries         // turn starts (before the write) and ends (before or after it)
	crashMidTurn                  // accepts (before or after the write), while turns run
)

// maxCrashes is how many crashes a schedule injects per session: below the
// Activation's restart intensity (more than 3 within 10 s stop it).
const maxCrashes = 2

func activationStorm(t testing.TB, m mode, seed uint64, rng *rand.Rand, resident bool, crashAt crashes) {
	crash := crashAt != noCrashes
	w := newWorld(t, worldOpts{mode: m, seed: seed})
	p := w.parent("P")
	sessions := 2 + rng.IntN(3)
	perSession := 3 + rng.IntN(10)
	t.Logf("%d sessions, %d followups each, resident=%v, crashes=%v", sessions, perSession, resident, crash)
	var crashed map[string]int
	var stormOn atomic.Bool
	if crash {
		crashed = map[string]int{}
		var mu sync.Mutex
		pct := 10 + rng.IntN(30)
		n := uint64(0)
		w.store.setFault(func(kind, id string, written bool) error {
			// Accepts and turn ends crash before or after their write, turn starts
			// before it (a turn start written and crashed is a cut-off turn: the
			// turn-end crash before the write covers that restore path).
			switch {
			case crashAt == crashMidTurn && kind == "accept" && stormOn.Load():
			case crashAt == crashAtTurnBoundaries && (kind == session.EntryTurnEnd || kind == session.EntryTurnStart && !written):
			default:
				return nil
			}
			mu.Lock()
			n++
			fire := crashed[id] < maxCrashes && fault.Mix(seed, n)%100 < uint64(pct)
			if fire {
				crashed[id]++
			}
			mu.Unlock()
			if fire {
				panic(fmt.Sprintf("injected crash: %s of %s (written %v)", kind, id, written))
			}
			return nil
		})
	}

	var hold chan struct{}
	if resident {
		hold = w.runner.holdAll()
	}
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = fmt.Sprintf("c%d", i)
		w.start(p, ids[i], fmt.Sprintf("%sstart %s", holdPrefix, ids[i]))
	}
	if resident {
		w.runner.awaitStarted(sessions) // every child runs its held first turn
	} else {
		w.runner.awaitTurns(sessions)
		w.awaitNotices("P", sessions) // each first activation settled and was disposed
		w.awaitLive(0)
	}

	// The storm: every followup waits on the barrier, then races the others.
	barrier := make(chan struct{})
	var wg sync.WaitGroup
	type result struct {
		id, text, msgID string
		err             error
	}
	results := make([]result, sessions*perSession)
	for i := range results {
		r := &results[i]
		r.id, r.text = ids[i%sessions], fmt.Sprintf("storm %s #%d", ids[i%sessions], i/sessions)
		wg.Go(func() {
			<-barrier
			w.noise()
			r.msgID, r.err = w.followup(p, r.id, r.text, coordinator("P"))
		})
	}
	// The gauge, sampled throughout the storm.
	var maxLive atomic.Int64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	var stopOnce sync.Once
	stopSampler := func() { stopOnce.Do(func() { close(stop) }); sampler.Wait() }
	defer stopSampler() // also when a check fails: Live blocks once the System is down
	sampler.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if n := int64(w.m.Live(context.Background())); n > maxLive.Load() {
				maxLive.Store(n)
			}
		}
	})
	stormOn.Store(true)
	close(barrier)
	wg.Wait()
	if resident {
		close(hold)
	}
	accepted := map[string]int{}
	refused := map[string]string{} // text → session
	for _, r := range results {
		if crash && messages.CodeOf(r.err) == activation.CodeActivationFailed {
			refused[r.text] = r.id // a crash while handling it: it may or may not have been journaled
			continue
		}
		require.NoError(t, r.err, "followup %q", r.text)
		accepted[r.id]++
	}
	for _, id := range ids {
		// Every followup answered with an id is journaled; a refused one may be too
		// (a crash after the write) and then runs like any other.
		snap := w.load(id)
		require.GreaterOrEqual(t, len(snap.Inbox), 1+accepted[id], "%s: inbox", id)
		accepted[id] = len(snap.Inbox)
	}
	for _, id := range ids {
		awaitAllEnded(t, w, []string{id}, accepted[id])
	}
	stopSampler()
	w.awaitLive(0) // every activation settles once its queue is empty
	w.drain()

	require.LessOrEqual(mutation.LiveGauge.TB(t), maxLive.Load(), int64(sessions), "live activations above the number of sessions")
	require.Zero(mutation.StaleEpoch.TB(t), w.store.stale.Load(), "writes refused for a stale epoch: two activations of one session wrote")
	ops := classifyAcquires(w.ops())
	require.NoError(mutation.DirectoryModel.TB(t), check(t.Name(), directoryModel(), splitTurns(ops), false, opAcquire, opRelease, opTurn, opTurnEnd))
	requireDisjointTurns(t, w, ids)
	// Checked after the oracles: a planted bug that bypasses the directory also
	// skips its fault points, and must be caught by an oracle, not by this.
	requireStressed(t, w, resident)

	// Per session: materializations + restarts = the stored epoch; materializations
	// = releases; each message ran at most once, and exactly once unless a crash
	// cut its turn off (then it is recorded aborted and not re-run).
	materialized, restarted, released := map[string]int{}, map[string]int{}, map[string]int{}
	for _, o := range ops {
		switch {
		case o.kind == opAcquire && o.restart:
			restarted[o.session]++
		case o.kind == opAcquire:
			materialized[o.session]++
		case o.kind == opRelease:
			released[o.session]++
		}
	}
	if crash {
		t.Logf("crashes injected %v, restarts %v", crashed, restarted)
	}
	ran := map[string]int{}
	for _, tr := range w.runner.all() {
		ran[tr.text]++
	}
	for _, id := range ids {
		snap := w.load(id)
		require.Equal(t, int(snap.Header.Epoch), materialized[id]+restarted[id], "%s: epochs acquired vs the stored epoch", id)
		require.Equal(t, materialized[id], released[id], "%s: activations materialized vs released", id)
		if !crash {
			require.Zero(t, restarted[id], "%s: restarts without a crash", id)
		} else {
			require.LessOrEqual(t, restarted[id], crashed[id], "%s: more restarts than crashes", id)
		}
		switch {
		case resident && crashAt == crashMidTurn:
			// A crash cancels the turn in flight, the one keeping the child resident
			// too: it may settle, and a later followup cold-resumes it.
			require.GreaterOrEqual(t, materialized[id], 1, "%s: never activated", id)
		case resident:
			require.Equal(t, 1, materialized[id], "%s: a resident child was activated again", id)
		default:
			require.GreaterOrEqual(t, materialized[id], 2, "%s: the storm did not cold-resume", id)
		}
		require.Len(t, snap.Inbox, accepted[id], "%s: inbox", id)
		if !crash {
			require.Len(t, snap.Inbox, 1+perSession, "%s: inbox", id)
		}
		reasons := stopReasons(snap)
		for _, text := range inboxTexts(snap) {
			switch reasons[text] {
			case "":
				t.Fatalf("%s: %q never ended (no turn end, not recorded aborted)", id, text)
			case subagent.StopCompleted:
				require.Equal(t, 1, ran[text], "%s: completed turn %q ran %d times", id, text, ran[text])
			default:
				require.True(t, crash, "%s: turn %q ended %q without a crash", id, text, reasons[text])
				require.LessOrEqual(t, ran[text], 1, "%s: turn %q ran %d times", id, text, ran[text])
			}
		}
		inInbox := map[string]bool{}
		for _, text := range inboxTexts(snap) {
			inInbox[text] = true
		}
		for text, sid := range refused {
			if sid == id && !inInbox[text] {
				require.Zero(t, ran[text], "%s: %q was never journaled but ran", id, text)
			}
		}
		requireAcceptanceOrder(t, id, inboxTexts(snap), w.runner.bySession(id))
		var prev uint64
		for _, tr := range w.runner.bySession(id) {
			require.NotZero(t, tr.epoch, "%s: turn %q has no epoch", id, tr.text)
			require.GreaterOrEqual(t, tr.epoch, prev, "%s: turn %q ran at an older epoch", id, tr.text)
			prev = tr.epoch
		}
	}
}

// requireStressed: the storm went through the directory's and the Activations'
// fault points, where Chaos yields — every start and cold resume materializes,
// every message is accepted, every turn starts and ends, and every Activation is
// asked to dispose and released once it settles; followups reach resident
// children through the route point.
func requireStressed(t testing.TB, w *world, resident bool) {
	t.Helper()
	points := []string{activation.PointDirectoryMaterialize, activation.PointDirectorySettle,
		activation.PointDirectoryRelease, activation.PointActivationAccept, activation.PointActivationTurnStart,
		activation.PointActivationTurnEnd, activation.PointActivationDispose}
	if resident {
		points = append(points, activation.PointDirectoryRoute)
	}
	for _, p := range points {
		require.Positive(t, w.hits(p), "fault point %s was never reached", p)
	}
}

// requireAcceptanceOrder: the turns of a session ran in acceptance order — the
// order of its inbox journal — across every crash and restart. A message may be
// missing (a crash cut its turn off, and it is not re-run) but none runs before
// one accepted ahead of it, and none twice: after a restart, the restored
// messages run in the order they were accepted.
func requireAcceptanceOrder(t testing.TB, id string, accepted []string, turns []turnRec) {
	t.Helper()
	pos := make(map[string]int, len(accepted))
	for i, text := range accepted {
		pos[text] = i
	}
	last, lastText := -1, ""
	for _, tr := range turns {
		i, ok := pos[tr.text]
		require.True(t, ok, "%s: turn %q ran a message that is not in the inbox journal", id, tr.text)
		require.Greater(t, i, last, "%s: turn %q (accepted #%d, epoch %d) ran after %q (accepted #%d): not in acceptance order %q",
			id, tr.text, i, tr.epoch, lastText, last, accepted)
		last, lastText = i, tr.text
	}
}

// requireDisjointTurns: the RunTurn calls of one session never overlap — one turn
// at a time, whichever Activation (or incarnation of it) ran it.
func requireDisjointTurns(t testing.TB, w *world, ids []string) {
	t.Helper()
	for _, id := range ids {
		ts := w.runner.bySession(id)
		for i := 1; i < len(ts); i++ {
			require.Less(t, ts[i-1].ret, ts[i].call, "%s: turn %q (epoch %d) overlaps turn %q (epoch %d)",
				id, ts[i-1].text, ts[i-1].epoch, ts[i].text, ts[i].epoch)
		}
	}
}

// awaitAllEnded waits until each session's n accepted messages have all ended in
// the store (a turn end, or recorded aborted by a crash). Each check reads the
// store; turns end asynchronously, so it re-checks as the runner reports turns.
func awaitAllEnded(t testing.TB, w *world, ids []string, n int) {
	t.Helper()
	eventually(t, func() bool {
		for _, id := range ids {
			snap := w.load(id)
			if len(snap.Inbox) < n || len(stopReasons(snap)) < n {
				return false
			}
		}
		return true
	}, func() string {
		var b []string
		for _, id := range ids {
			snap := w.load(id)
			b = append(b, fmt.Sprintf("%s: %d accepted, %d ended", id, len(snap.Inbox), len(stopReasons(snap))))
		}
		return fmt.Sprintf("not every accepted message ended: %v", b)
	})
}
