package mailbox

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// NewLinked is the producer (actor.WithMailbox) of the mailbox of troupe's mostly
// idle actors — job actors, owner actors, Activations: protoactor's lock-free
// unbounded mailbox (actor.UnboundedLockfree) with the same semantics (system
// messages first, SuspendMailbox/ResumeMailbox, the dispatcher's throughput, a
// panic escalated as a failure of the message being processed) in one 80-B
// allocation. protoactor's is a 96-B struct, two 16-B queues and, once the first
// system and the first user message are popped, the last popped node of each queue
// (24 B each, its stub): 176 B held by every idle actor. Here the two queues are
// two words each, fields of the mailbox, and an empty queue holds no node. It
// allocates a node per message (Mailbox does not): it is for actors that hold many
// instances and get few messages each. No middlewares: its actors have none.
func NewLinked() actor.Mailbox { return &Linked{} }

// Linked is the mailbox NewLinked makes. Any goroutine posts; one run at a time
// (status) pops and invokes, on the dispatcher.
type Linked struct {
	user, sys  queue
	status     atomic.Int32 // linkedIdle or linkedRunning: a run is scheduled or in progress
	userN      atomic.Int32 // user messages posted and not yet popped
	sysN       atomic.Int32 // system messages posted and not yet popped
	suspended  atomic.Bool  // a SuspendMailbox was processed and no ResumeMailbox since
	invoker    actor.MessageInvoker
	dispatcher actor.Dispatcher
}

const (
	linkedIdle int32 = iota
	linkedRunning
)

// PostUserMessage enqueues a user message (a batch's messages first, then the batch,
// as protoactor's mailbox does) and schedules a run.
func (m *Linked) PostUserMessage(message any) {
	if batch, ok := message.(actor.MessageBatch); ok {
		for _, msg := range batch.GetMessages() {
			m.PostUserMessage(msg)
		}
	}
	if env, ok := message.(*actor.MessageEnvelope); ok {
		if batch, ok := env.Message.(actor.MessageBatch); ok {
			for _, msg := range batch.GetMessages() {
				m.PostUserMessage(msg)
			}
		}
	}
	m.user.push(&qnode{val: message})
	m.userN.Add(1)
	m.schedule()
}

// PostSystemMessage enqueues a system message and schedules a run.
func (m *Linked) PostSystemMessage(message any) {
	m.sys.push(&qnode{val: message})
	m.sysN.Add(1)
	m.schedule()
}

// RegisterHandlers is called once by protoactor before any message is posted.
func (m *Linked) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	m.invoker = invoker
	m.dispatcher = dispatcher
}

// Start is called once when the actor is spawned: nothing to start.
func (m *Linked) Start() {}

// UserMessageCount returns the user messages waiting.
func (m *Linked) UserMessageCount() int { return int(m.userN.Load()) }

func (m *Linked) schedule() {
	if m.status.CompareAndSwap(linkedIdle, linkedRunning) {
		r := linkedRuns.Get().(*linkedRun)
		r.m = m
		m.dispatcher.Schedule(r.fn)
	}
}

// linkedRun is the function value a Linked mailbox hands the dispatcher for one
// run. The method value m.processMessages would be a 16-B allocation on every
// schedule from idle (a job actor's start, its stop, each message to an idle
// owner actor or Activation), and a field holding it made once would cost every
// idle mailbox 8 B more (80 → 96 B in its size class); so runs are taken from a
// pool of function values made once, each bound to the mailbox it runs for the
// time of one schedule.
type linkedRun struct {
	m  *Linked
	fn func() // run, as a value (made once per linkedRun)
}

var linkedRuns sync.Pool // of *linkedRun

func newLinkedRun() any {
	r := &linkedRun{}
	r.fn = r.run
	return r
}

func init() { linkedRuns.New = newLinkedRun }

// run is one scheduled run of r.m's mailbox; r goes back to the pool first (the
// dispatcher calls a scheduled function once).
func (r *linkedRun) run() {
	m := r.m
	r.m = nil
	linkedRuns.Put(r)
	m.processMessages()
}

// processMessages is one scheduled run: it runs until the queues are empty (or the
// mailbox is suspended), then goes idle, and runs again if a message was posted
// after its last pop (the poster saw it running and did not schedule).
func (m *Linked) processMessages() {
	for {
		m.run()
		m.status.Store(linkedIdle)
		sys, user := m.sysN.Load(), m.userN.Load()
		if sys == 0 && (m.suspended.Load() || user == 0) {
			return
		}
		if !m.status.CompareAndSwap(linkedIdle, linkedRunning) {
			return // a poster scheduled a new run
		}
	}
}

// run invokes system messages first, then user messages while not suspended,
// yielding the goroutine after each throughput's worth. A panic in a handler is
// escalated (protoactor's supervision of the job actor) with the message it came from.
func (m *Linked) run() {
	var msg any
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, msg)
		}
	}()
	i, t := 0, m.dispatcher.Throughput()
	for {
		if i > t {
			i = 0
			runtime.Gosched()
		}
		i++
		if msg = m.sys.pop(); msg != nil {
			m.sysN.Add(-1)
			switch msg.(type) {
			case *actor.SuspendMailbox:
				m.suspended.Store(true)
			case *actor.ResumeMailbox:
				m.suspended.Store(false)
			default:
				m.invoker.InvokeSystemMessage(msg)
			}
			continue
		}
		if m.suspended.Load() {
			return
		}
		if msg = m.user.pop(); msg == nil {
			return
		}
		m.userN.Add(-1)
		m.invoker.InvokeUserMessage(msg)
	}
}

// queue is a multi-producer, single-consumer FIFO in two words: producers push onto
// a lock-free stack (a CAS on head); the consumer takes the whole stack at once when
// its own list runs out and reverses it, so values come out in the order their
// pushes took effect. An empty queue holds no node (protoactor's mpsc keeps a stub
// node, and the last popped node in its place, 40 B with its header; with two per
// mailbox that was a third of it). push is safe from any goroutine; pop only from
// the one consumer (the mailbox's run).
type queue struct {
	head atomic.Pointer[qnode] // pushed and not yet taken, newest first
	next *qnode                // taken, oldest first (consumer only)
}

// qnode is one queued message.
type qnode struct {
	next *qnode // set before the node is published
	val  any
}

// push appends n.
func (q *queue) push(n *qnode) {
	for {
		old := q.head.Load()
		n.next = old
		if q.head.CompareAndSwap(old, n) {
			return
		}
	}
}

// pop removes and returns the oldest value, or nil when the queue is empty.
func (q *queue) pop() any {
	if q.next == nil {
		var rev *qnode
		for n := q.head.Swap(nil); n != nil; {
			n.next, rev, n = rev, n, n.next
		}
		q.next = rev
	}
	n := q.next
	if n == nil {
		return nil
	}
	q.next, n.next = n.next, nil
	v := n.val
	n.val = nil
	return v
}
