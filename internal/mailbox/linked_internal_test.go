package mailbox

import (
	"sync"
	"testing"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
)

// TestQueueIsFIFOPerProducerAndLosesNothing pushes from several goroutines while
// the consumer pops: every value comes out exactly once, each producer's in its
// order, and the drained queue holds no node.
func TestQueueIsFIFOPerProducerAndLosesNothing(t *testing.T) {
	const producers, each = 4, 5000
	var q queue
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				q.push(&qnode{val: [2]int{p, i}})
			}
		}()
	}
	next := make([]int, producers)
	for got := 0; got < producers*each; {
		v := q.pop()
		if v == nil {
			continue
		}
		pi := v.([2]int)
		require.Equal(t, next[pi[0]], pi[1], "producer %d's values out of order", pi[0])
		next[pi[0]]++
		got++
	}
	wg.Wait()
	require.Nil(t, q.pop())
	require.Nil(t, q.head.Load(), "a drained queue holds no node")
	require.Nil(t, q.next)
}

// TestQueueEmptiesAndRefills pops one value at a time and in bursts, with pushes
// landing while the consumer holds a taken batch: FIFO throughout.
func TestQueueEmptiesAndRefills(t *testing.T) {
	var q queue
	require.Nil(t, q.pop())
	for round := range 3 {
		for i := range round + 1 {
			q.push(&qnode{val: i})
		}
		for i := range round + 1 {
			require.Equal(t, i, q.pop())
		}
		require.Nil(t, q.pop())
		require.Nil(t, q.head.Load())
		require.Nil(t, q.next)
	}
	q.push(&qnode{val: 1})
	q.push(&qnode{val: 2})
	require.Equal(t, 1, q.pop()) // takes 1, 2
	q.push(&qnode{val: 3})       // lands behind the taken batch
	require.Equal(t, 2, q.pop())
	q.push(&qnode{val: 4})
	require.Equal(t, 3, q.pop())
	require.Equal(t, 4, q.pop())
	require.Nil(t, q.pop())
}

// recordingInvoker records what a mailbox invokes; a user message "panic" panics.
type recordingInvoker struct {
	got       []any
	escalated []any
}

func (r *recordingInvoker) InvokeSystemMessage(m any) { r.got = append(r.got, m) }
func (r *recordingInvoker) InvokeUserMessage(m any) {
	if m == "panic" {
		panic("boom")
	}
	r.got = append(r.got, m)
}
func (r *recordingInvoker) EscalateFailure(reason, m any) {
	r.escalated = append(r.escalated, reason, m)
}

// heldDispatcher queues scheduled runs until the test runs them.
type heldDispatcher struct{ runs []func() }

func (d *heldDispatcher) Schedule(fn func()) { d.runs = append(d.runs, fn) }
func (d *heldDispatcher) Throughput() int    { return 2 }

func (d *heldDispatcher) runAll() {
	for len(d.runs) > 0 {
		fn := d.runs[0]
		d.runs = d.runs[1:]
		fn()
	}
}

// TestLinkedKeepsProtoactorsOrder: system messages before user messages, one run
// scheduled per busy period, suspension holds user messages (not system ones) until
// resumed, and a handler's panic is escalated with its message and the rest still run.
func TestLinkedKeepsProtoactorsOrder(t *testing.T) {
	inv, d := &recordingInvoker{}, &heldDispatcher{}
	m := NewLinked()
	m.RegisterHandlers(inv, d)
	m.Start()
	m.PostUserMessage("u1")
	m.PostUserMessage("u2")
	m.PostSystemMessage(&actor.Started{})
	require.Len(t, d.runs, 1, "one run per busy period")
	require.Equal(t, 2, m.UserMessageCount())
	d.runAll()
	require.Equal(t, []any{&actor.Started{}, "u1", "u2"}, inv.got)
	require.Zero(t, m.UserMessageCount())

	inv.got = nil
	m.PostSystemMessage(&actor.SuspendMailbox{})
	m.PostUserMessage("u3")
	m.PostSystemMessage(&actor.Stop{})
	d.runAll()
	require.Equal(t, []any{&actor.Stop{}}, inv.got, "suspended: system messages only")
	require.Equal(t, 1, m.UserMessageCount())
	m.PostSystemMessage(&actor.ResumeMailbox{})
	d.runAll()
	require.Equal(t, []any{&actor.Stop{}, "u3"}, inv.got)

	inv.got = nil
	m.PostUserMessage("panic")
	m.PostUserMessage("u4")
	m.PostUserMessage("u5")
	m.PostUserMessage("u6")
	d.runAll()
	require.Equal(t, []any{"boom", "panic"}, inv.escalated)
	require.Equal(t, []any{"u4", "u5", "u6"}, inv.got, "the run after a panic goes on with the rest")
	mb := m.(*Linked)
	for _, q := range []*queue{&mb.user, &mb.sys} {
		require.Nil(t, q.head.Load(), "an idle mailbox holds no node")
		require.Nil(t, q.next)
	}
}

// syncDispatcher runs a scheduled run at once, on the poster.
type syncDispatcher struct{}

func (syncDispatcher) Schedule(fn func()) { fn() }
func (syncDispatcher) Throughput() int    { return 300 }

// nopInvoker handles every message by doing nothing.
type nopInvoker struct{}

func (nopInvoker) InvokeSystemMessage(any)  {}
func (nopInvoker) InvokeUserMessage(any)    {}
func (nopInvoker) EscalateFailure(any, any) {}

// TestLinkedIdleSizeAndNoAllocationPerMessage: an idle Linked is 80 B (the
// size class it is allocated in), and a message to an idle one, run at once,
// allocates nothing: its queue node is the one the last pop let go of (qnodes),
// and scheduling the run allocates nothing (the run's function value is a pooled
// linkedRun, not the 16-B method value m.processMessages, which was a second
// allocation per schedule). A system message's node is reused too.
func TestLinkedIdleSizeAndNoAllocationPerMessage(t *testing.T) {
	require.Equal(t, uintptr(80), unsafe.Sizeof(Linked{}))
	m := NewLinked()
	m.RegisterHandlers(nopInvoker{}, syncDispatcher{})
	m.PostUserMessage("warm")
	if raceEnabled {
		t.Skip("sync.Pool drops nodes under the race detector")
	}
	allocs := testing.AllocsPerRun(100, func() { m.PostUserMessage("x") })
	require.Equal(t, 0.0, allocs, "a message to an idle Linked mailbox")
	stop := &actor.Stop{}
	allocs = testing.AllocsPerRun(100, func() { m.PostSystemMessage(stop) })
	require.Equal(t, 0.0, allocs, "a system message to an idle Linked mailbox")
}
