package exhaustion

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/harness"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/troupetest"
)

// floodSize is how many followups the parent sends at once into a held child.
const floodSize = 2000

// maxGoroutinesAfterFlood bounds the goroutines alive once every followup of the
// flood was answered, above those alive before it: troupe keeps queued messages in
// its Activation's FIFO, not in a goroutine each (its pool dispatcher's workers
// may be started meanwhile; they are not per message).
const maxGoroutinesAfterFlood = 8

// maxQueuedMessageHeap bounds the live heap per queued followup: the in-memory
// store's journaled copy, the Activation's queue entry and the test's record of it.
const maxQueuedMessageHeap = 8 * kib

// heldRunner is a TurnRunner whose turn on input held waits until release is
// closed; every turn's input is recorded, on the logical clock, in order of entry.
type heldRunner struct {
	held    string
	release chan struct{}
	started chan struct{} // closed when the held turn begins
	clock   *atomic.Int64

	mu    sync.Mutex
	turns []stamped
	count chan int // receives the number of turns entered, after each entry
}

type stamped struct {
	text string
	at   int64
}

func (r *heldRunner) RunTurn(ctx context.Context, turn subagent.Turn) (subagent.TurnResult, error) {
	in := turn.Input.Text()
	r.mu.Lock()
	r.turns = append(r.turns, stamped{text: in, at: r.clock.Add(1)})
	n := len(r.turns)
	r.mu.Unlock()
	select {
	case r.count <- n:
	default:
	}
	if in == r.held {
		close(r.started)
		select {
		case <-r.release:
		case <-ctx.Done():
			return subagent.TurnResult{}, context.Cause(ctx)
		}
	}
	return subagent.TurnResult{Messages: []subagent.Message{{Role: "assistant",
		Content: []subagent.Block{{Type: "text", Text: "re: " + in}}}}}, nil
}

func (r *heldRunner) entered() []stamped {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]stamped(nil), r.turns...)
}

// awaitEntered waits until n turns have entered the runner.
func (r *heldRunner) awaitEntered(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(budget)
	for len(r.entered()) < n {
		select {
		case <-r.count:
		case <-deadline:
			t.Fatalf("%d turns entered, want %d", len(r.entered()), n)
		}
	}
}

// sentFollowup is one followup of the flood, stamped on the logical clock.
type sentFollowup struct {
	text      string
	msgID     string
	err       error
	call, ret int64
}

// TestFollowupFlood: a continuable child whose first turn is held; its parent sends
// 2,000 followups at once (one goroutine each, released by a barrier). troupe has
// no admission bound on followups, so every one must be accepted. While they wait:
// no goroutine per queued message, and a bounded live heap per queued message.
// After the hold is released every accepted message runs exactly once, in
// acceptance order (the store's inbox Seq): checked exactly, and as a history
// against harness's FIFO model (acceptance linearizable with the senders'
// real-time order, turns in Seq order).
func TestFollowupFlood(t *testing.T) {
	sys, logs := troupetest.Served(t)
	clock := &atomic.Int64{}
	runner := &heldRunner{held: "first", release: make(chan struct{}), started: make(chan struct{}),
		clock: clock, count: make(chan int, 1)}
	var released sync.Once
	release := func() { released.Do(func() { close(runner.release) }) }
	t.Cleanup(release) // before the System's shutdown (cleanups run last-in first-out)
	rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), nil)
	require.NoError(t, err)
	_, err = rt.RegisterProvider(t.Context(), sys.Scope(), subagent.NewSpawn(sys.Actors(), runner))
	require.NoError(t, err)
	store := session.NewMemory()
	m, err := sys.StartContinuations(store, rt, runner, nil, activation.WithLogger(slog.New(logs)))
	require.NoError(t, err)
	parent, err := sys.NewAgent(nil, "parent", owner.Options{})
	require.NoError(t, err)
	require.NoError(t, sys.Jobs().RegisterAgent(context.Background(), parent))

	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	_, firstID, err := m.Start(ctx, parent, "spawn", "flooded", "child", subagent.Request{Prompt: "first"})
	require.NoError(t, err)
	select {
	case <-runner.started:
	case <-time.After(budget):
		t.Fatal("the held first turn did not start")
	}

	src := session.Source{Kind: "coordinator", Form: "relay", SenderSessionID: parent.Session()}
	sent := make([]sentFollowup, floodSize)
	for i := range sent {
		sent[i].text = fmt.Sprintf("followup %04d", i)
	}
	goroutinesBefore := runtime.NumGoroutine()
	base := liveHeap()
	watch := watchHeap()
	began := time.Now()
	barrier := make(chan struct{})
	var wg sync.WaitGroup
	for i := range sent {
		s := &sent[i]
		wg.Go(func() {
			<-barrier
			s.call = clock.Add(1)
			s.msgID, s.err = m.Followup(ctx, parent, "child", s.text, src)
			s.ret = clock.Add(1)
		})
	}
	close(barrier)
	wg.Wait()
	took := time.Since(began)
	sampled := watch.Stop()
	for _, s := range sent {
		require.NoError(t, s.err, "followup %q", s.text)
	}

	// Still held: the 2,000 messages wait in the Activation's queue.
	st, ok := m.Status(ctx, "child")
	require.True(t, ok, "the child is not resident")
	require.Equal(t, activation.Running, st.Residency)
	require.Equal(t, floodSize, st.Queued, "queued followups")
	require.Len(t, runner.entered(), 1, "turns entered while the first is held")
	live := liveHeap()
	goroutinesAfter := settledGoroutines(goroutinesBefore + maxGoroutinesAfterFlood)
	perMsg := float64(above(live, base)) / floodSize
	t.Logf("flood: %d followups accepted in %s; goroutines %d before, %d after; live heap per queued message %.0f B, "+
		"sampled high-water per message %.0f B", floodSize, took.Round(time.Millisecond), goroutinesBefore,
		goroutinesAfter, perMsg, float64(above(sampled, base))/floodSize)
	require.LessOrEqual(t, goroutinesAfter-goroutinesBefore, maxGoroutinesAfterFlood, "goroutines left by the flood")
	require.Less(t, perMsg, float64(maxQueuedMessageHeap), "live heap per queued message")

	began = time.Now()
	release()
	runner.awaitEntered(t, 1+floodSize)
	t.Logf("%d queued turns ran in %s", floodSize, time.Since(began).Round(time.Millisecond))
	drainCtx, cancelDrain := context.WithTimeout(context.Background(), budget)
	defer cancelDrain()
	require.NoError(t, m.Drain(drainCtx))

	began = time.Now()
	requireRanInAcceptanceOrder(t, store, runner.entered(), firstID, sent)
	t.Logf("order checked (exactly and with harness.CheckFIFO) in %s", time.Since(began).Round(time.Millisecond))
}

// settledGoroutines returns the goroutine count once it is at most want, or the
// last count seen when the budget ran out (the caller's assertion then fails).
// Goroutines of mailbox runs that have just answered exit on their own: it yields
// until they did.
func settledGoroutines(want int) int {
	deadline := time.Now().Add(budget)
	for {
		n := runtime.NumGoroutine()
		if n <= want || time.Now().After(deadline) {
			return n
		}
		runtime.Gosched()
	}
}

// requireRanInAcceptanceOrder checks that the turns that entered the runner are
// exactly the child's inbox in Seq order — the start's message first, then every
// followup once — and that the flood's history satisfies harness's FIFO model.
func requireRanInAcceptanceOrder(t *testing.T, store session.Store, turns []stamped, firstID string, sent []sentFollowup) {
	t.Helper()
	snap, err := store.Load(context.Background(), "child")
	require.NoError(t, err)
	require.Len(t, snap.Inbox, 1+len(sent), "accepted messages")
	require.Equal(t, firstID, snap.Inbox[0].ID)
	seq := map[string]uint64{}
	inboxTexts := make([]string, len(snap.Inbox))
	for i, im := range snap.Inbox {
		require.Equal(t, uint64(i+1), im.Seq, "inbox Seq")
		seq[im.ID] = im.Seq
		inboxTexts[i] = im.Content[0].Text
	}
	turnTexts := make([]string, len(turns))
	for i, tr := range turns {
		turnTexts[i] = tr.text
	}
	require.Equal(t, inboxTexts, turnTexts, "turn order vs acceptance order")

	ops := []porcupine.Operation{
		{ClientId: 0, Input: harness.FIFOOp{Session: "child", Kind: harness.Enqueue, Text: "first", Seq: 1}, Call: 0, Return: 0},
	}
	for i, s := range sent {
		require.Contains(t, seq, s.msgID, "followup %q: its id is not in the inbox", s.text)
		ops = append(ops, porcupine.Operation{ClientId: 1 + i, Call: s.call, Return: s.ret,
			Input: harness.FIFOOp{Session: "child", Kind: harness.Enqueue, Text: s.text, Seq: seq[s.msgID]}})
	}
	for _, tr := range turns {
		ops = append(ops, porcupine.Operation{ClientId: len(sent) + 1, Call: tr.at, Return: tr.at,
			Input: harness.FIFOOp{Session: "child", Kind: harness.Dequeue, Text: tr.text}})
	}
	require.NoError(t, harness.CheckFIFO(t.Name(), ops))
}
