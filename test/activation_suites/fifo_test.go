package activationsuites

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/test/mutation"
)

// TestFIFO: senders (each with its own sequence numbers) race followups into one or
// two children; one message's turn may be held and interrupted — after the storm
// or while it is still going on. Oracle:
//   - porcupine FIFO model: acceptance (the inbox Seq) is linearizable with the
//     senders' real-time order, and turns take messages strictly in Seq order;
//   - exactly: the turn order equals the inbox order, each message ran once, each
//     sender's messages were accepted in its own order;
//   - the interrupt hit only its turn (the one turn cancelled and ended aborted;
//     every other ended completed);
//   - parked messages stay parked: after an interrupt issued once the storm was
//     accepted, no turn starts until a waking send, and then the parked ones run
//     first, in order, before it.
func TestFIFO(t *testing.T) {
	forSchedules(t, schedules(t, 150, 40), fifoSchedule)
}

type sent struct {
	session, text string
	sender, n     int
	msgID         string
	err           error
}

func fifoSchedule(t testing.TB, m mode, seed uint64, rng *rand.Rand) {
	w := newWorld(t, worldOpts{mode: m, seed: seed})
	p := w.parent("P")
	sessions := 1 + rng.IntN(2)
	senders := 2 + rng.IntN(3)
	perSender := 2 + rng.IntN(5)
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = fmt.Sprintf("c%d", i)
		w.start(p, ids[i], "start "+ids[i])
	}
	// One message of c0 may be held; it is interrupted after the storm was accepted
	// (then parking is observable) or as soon as its turn starts (racing the storm).
	holdSender, holdN := rng.IntN(senders), rng.IntN(perSender)
	hold := rng.IntN(4) != 0
	racing := hold && rng.IntN(2) == 0
	text := func(id string, k, n int) string { return fmt.Sprintf("%s s%d n%d", id, k, n) }
	held := text("c0", holdSender, holdN)
	if hold {
		w.runner.gate(held) // never closed: only the interrupt ends it
	}
	t.Logf("%d sessions × %d senders × %d messages; hold %v (%q), racing interrupt %v",
		sessions, senders, perSender, hold, held, racing)

	interrupt := func() error {
		return w.m.Interrupt(context.Background(), "c0", activation.Authority{ParentSession: "P"})
	}
	var interrupter sync.WaitGroup
	defer interrupter.Wait()
	racingErr := make(chan error, 1)
	if racing {
		interrupter.Go(func() {
			select {
			case <-w.runner.started:
			case <-time.After(budget):
				racingErr <- fmt.Errorf("the held turn did not start")
				return
			}
			w.noise()
			racingErr <- interrupt()
		})
	}

	barrier := make(chan struct{})
	var wg sync.WaitGroup
	out := make([][]sent, sessions*senders)
	for i := range out {
		id, k := ids[i/senders], i%senders
		out[i] = make([]sent, perSender)
		wg.Go(func() {
			<-barrier
			for n := range perSender {
				w.noise()
				s := sent{session: id, text: text(id, k, n), sender: k, n: n}
				s.msgID, s.err = w.followup(p, id, s.text, coordinator("P"))
				out[i][n] = s
			}
		})
	}
	close(barrier)
	wg.Wait()
	for _, ss := range out {
		for _, s := range ss {
			require.NoError(t, s.err, "followup %q", s.text)
		}
	}

	perSession := 1 + senders*perSender
	if hold && !racing {
		w.runner.awaitStarted(1)
		require.NoError(t, interrupt())
		// The held turn ends (cancelled); the parked queue then waits for a waking
		// send: the Activation is not running (or, if the held message was the last
		// one, it settled).
		eventually(t, func() bool { return ran(w, held) == 1 }, func() string { return "the held turn did not end" })
		eventually(t, func() bool {
			st, ok := w.m.Status(context.Background(), "c0")
			return !ok || st.Residency != activation.Running
		}, func() string { return "the interrupted child kept running" })
		inbox := inboxTexts(w.load("c0"))
		h := slices.Index(inbox, held)
		require.GreaterOrEqual(t, h, 0)
		require.Equal(mutation.TurnOrder.TB(t), inbox[:h+1], textsOf(w.runner.bySession("c0")),
			"turns that ran before the waking send: exactly those accepted up to the interrupted one")
		if rest := len(inbox) - h - 1; rest > 0 {
			// Messages wait behind the interrupted turn: the Activation stays
			// resident, idle, with them parked. (With none, it settles.)
			st, ok := w.m.Status(context.Background(), "c0")
			require.True(t, ok, "the interrupted child with parked messages is not resident")
			require.True(t, st.Parked, "the queue is not parked")
			require.Equal(t, activation.Waiting, st.Residency)
			require.Equal(t, rest, st.Queued, "parked messages")
		}
	}
	if hold {
		// A racing interrupt may have landed after the last send: the queue is then
		// parked too. Either way a waking send runs what is left.
		interrupter.Wait()
		if racing {
			require.NoError(t, <-racingErr, "racing interrupt")
		}
		_, err := w.followup(p, "c0", "wake c0", coordinator("P"))
		require.NoError(t, err)
		perSession++
	}
	awaitAllEnded(t, w, ids[:1], perSession)
	if sessions > 1 {
		awaitAllEnded(t, w, ids[1:], 1+senders*perSender)
	}
	w.drain()

	// Acceptance order: each sender's messages in its own order.
	seq := map[string]uint64{}
	for _, id := range ids {
		for _, im := range w.load(id).Inbox {
			seq[im.ID] = im.Seq
		}
	}
	for _, ss := range out {
		for n := 1; n < len(ss); n++ {
			require.Less(t, seq[ss[n-1].msgID], seq[ss[n].msgID], "sender %d of %s: %q accepted after %q",
				ss[n].sender, ss[n].session, ss[n-1].text, ss[n].text)
		}
	}
	// Turns in acceptance order, each once; only the held one cancelled and aborted.
	for _, id := range ids {
		snap := w.load(id)
		turns := w.runner.bySession(id)
		require.Equal(mutation.TurnOrder.TB(t), inboxTexts(snap), textsOf(turns), "%s: turn order vs acceptance order", id)
		reasons := stopReasons(snap)
		for _, tr := range turns {
			want := subagent.StopCompleted
			if hold && tr.text == held {
				want = subagent.StopAborted
				require.True(t, tr.cancelled, "the interrupted turn was not cancelled")
			} else {
				require.False(t, tr.cancelled, "%s: turn %q was cancelled by an interrupt of another turn", id, tr.text)
			}
			require.Equal(t, want, reasons[tr.text], "%s: turn %q ended", id, tr.text)
		}
	}
	// The same, as a linearizability check of the whole history.
	ops := w.ops()
	for i := range ops {
		if ops[i].kind == opEnqueue {
			ops[i].seq = seq[ops[i].msgID]
		}
	}
	require.NoError(mutation.FIFOModel.TB(t), check(t.Name(), fifoModel(), ops, true, opEnqueue, opTurn))
}

func ran(w *world, text string) int {
	n := 0
	for _, tr := range w.runner.all() {
		if tr.text == text {
			n++
		}
	}
	return n
}

func textsOf(ts []turnRec) []string {
	out := make([]string, len(ts))
	for i, tr := range ts {
		out[i] = tr.text
	}
	return out
}
