package job

import (
	"runtime"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// newMailbox is the job actors' mailbox producer (actor.WithMailbox): protoactor's
// lock-free unbounded mailbox (actor.UnboundedLockfree) with the same semantics
// (system messages first, SuspendMailbox/ResumeMailbox, the dispatcher's throughput,
// a panic escalated as a failure of the message being processed) in one 128-B
// allocation. protoactor's is a 96-B struct, two 16-B queues and, once the first
// system and the first user message are popped, the last popped node of each queue
// (24 B each, its stub): 176 B held by every idle job. Here the two queues and their
// stubs are fields of the mailbox, and a queue that runs empty re-links its own stub,
// so an idle job's mailbox holds no node. No middlewares: job actors have none.
func newMailbox() actor.Mailbox {
	m := &mailbox{}
	m.user.init()
	m.sys.init()
	return m
}

// mailbox is a job actor's mailbox (newMailbox). Any goroutine posts; one run at a
// time (status) pops and invokes, on the dispatcher.
type mailbox struct {
	user, sys  queue
	status     atomic.Int32 // mailboxIdle or mailboxRunning: a run is scheduled or in progress
	userN      atomic.Int32 // user messages posted and not yet popped
	sysN       atomic.Int32 // system messages posted and not yet popped
	suspended  atomic.Bool  // a SuspendMailbox was processed and no ResumeMailbox since
	invoker    actor.MessageInvoker
	dispatcher actor.Dispatcher
}

const (
	mailboxIdle int32 = iota
	mailboxRunning
)

// PostUserMessage enqueues a user message (a batch's messages first, then the batch,
// as protoactor's mailbox does) and schedules a run.
func (m *mailbox) PostUserMessage(message any) {
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
func (m *mailbox) PostSystemMessage(message any) {
	m.sys.push(&qnode{val: message})
	m.sysN.Add(1)
	m.schedule()
}

// RegisterHandlers is called once by protoactor before any message is posted.
func (m *mailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	m.invoker = invoker
	m.dispatcher = dispatcher
}

// Start is called once when the actor is spawned: nothing to start.
func (m *mailbox) Start() {}

// UserMessageCount returns the user messages waiting.
func (m *mailbox) UserMessageCount() int { return int(m.userN.Load()) }

func (m *mailbox) schedule() {
	if m.status.CompareAndSwap(mailboxIdle, mailboxRunning) {
		m.dispatcher.Schedule(m.processMessages)
	}
}

// processMessages is one scheduled run: it runs until the queues are empty (or the
// mailbox is suspended), then goes idle, and runs again if a message was posted
// after its last pop (the poster saw it running and did not schedule).
func (m *mailbox) processMessages() {
	for {
		m.run()
		m.status.Store(mailboxIdle)
		sys, user := m.sysN.Load(), m.userN.Load()
		if sys == 0 && (m.suspended.Load() || user == 0) {
			return
		}
		if !m.status.CompareAndSwap(mailboxIdle, mailboxRunning) {
			return // a poster scheduled a new run
		}
	}
}

// run invokes system messages first, then user messages while not suspended,
// yielding the goroutine after each throughput's worth. A panic in a handler is
// escalated (protoactor's supervision of the job actor) with the message it came from.
func (m *mailbox) run() {
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

// queue is a multi-producer, single-consumer FIFO: Dmitry Vyukov's node-based
// queue (as protoactor's internal mpsc is), with its stub a field of the queue and
// put back whenever the queue runs empty, so an empty queue holds no node. push is
// safe from any goroutine; pop only from the one consumer (the mailbox's run).
type queue struct {
	head atomic.Pointer[qnode] // the last node pushed (producers swap it)
	tail *qnode                // the next node to pop, or the stub (consumer only)
	stub qnode
}

// qnode is one queued message.
type qnode struct {
	next atomic.Pointer[qnode]
	val  any
}

// init points head and tail at the stub (the queue must not move afterwards).
func (q *queue) init() {
	q.head.Store(&q.stub)
	q.tail = &q.stub
}

// push appends n (its next must be nil).
func (q *queue) push(n *qnode) {
	prev := q.head.Swap(n)
	prev.next.Store(n) // links n for the consumer; until then, pop sees the queue end at prev
}

// pop removes and returns the oldest value, or nil when the queue is empty or its
// next node is still being linked by a push (the mailbox's counters make its run
// come back for it).
func (q *queue) pop() any {
	tail := q.tail
	next := tail.next.Load()
	if tail == &q.stub {
		if next == nil {
			return nil
		}
		q.tail, tail = next, next
		next = next.next.Load()
	}
	if next != nil {
		q.tail = next
		return take(tail)
	}
	if tail != q.head.Load() {
		return nil // a push has swapped head but not linked its node yet
	}
	// tail is the last node: put the stub behind it, so that popping tail leaves the
	// queue at the stub and no node of it is held.
	q.stub.next.Store(nil)
	q.push(&q.stub)
	if next = tail.next.Load(); next != nil {
		q.tail = next
		return take(tail)
	}
	return nil // a push got in before the stub and is still linking (see above)
}

// take returns n's value and clears it (n is no longer in the queue).
func take(n *qnode) any {
	v := n.val
	n.val = nil
	return v
}
