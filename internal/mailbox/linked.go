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

// NewLinkedHeld returns a Linked mailbox that is held: it takes messages from the
// start, but hands no run to the dispatcher until Release gives its first run to
// its holder (or to the dispatcher). A job actor spawned by a Client's start on a
// caller whose ctx can never end has one (job.Spawner.Spawn given a Handoff): the
// Started that protoactor posts at the spawn, once the actor's PID is registered,
// waits for the start's caller, which runs it after its send returns instead of
// waking a worker for it; the job actor is then idle, so a producer that settles
// at once runs the settlement on its own goroutine (BySender).
func NewLinkedHeld() *Linked {
	m := &Linked{}
	m.status.Store(linkedRunning) // claimed: every poster finds a run scheduled
	return m
}

// Release ends the hold of a mailbox made by NewLinkedHeld (once, after the
// spawn): its first run is left in h for h's taker, or handed to the dispatcher
// when h is nil or already taken. That run is bounded as a BySender one with no
// message of its own: the system messages (the actor's Started, and any posted
// before or during the run) and a PoisonPill at the head of the queue; a user
// message, whoever posted it, is the dispatcher's, as the rest of the run.
func (m *Linked) Release(h *Handoff) { m.give(nil, false, h) }

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
	m.user.push(newQnode(message))
	m.userN.Add(1)
	if b, ok := message.(BySender); ok && m.sysN.Load() == 0 {
		if now, h := b.BySender(); now || h != nil {
			m.offer(message, now, h)
			return
		}
	}
	m.schedule()
}

// BySender is a user message that an idle Linked mailbox lets its sender run, in
// a run bounded to it (the bounded run, below), instead of handing the run to the
// dispatcher: one goroutine wake fewer, and none at all on a chain of such runs.
// PostUserMessage asks BySender only when no system message waits (a job actor's
// Started, say, whose handler may call producer code), and only a message it can
// claim the idle mailbox for is run so; otherwise, or when BySender answers
// (false, nil), the run is the dispatcher's. The answer says where it is run:
//   - now: on the sender's goroutine, before PostUserMessage returns — a
//     producer's settle (job's doneMsg, Hooks.SettleInline);
//   - h (not nil): left in the Handoff, which the sender takes after its send
//     returns and runs before it waits for its answer — a Client's kill routed by
//     the registry to an idle job actor (job.Kill.Handoff). A Handoff already
//     taken refuses it, and the run is the dispatcher's.
//
// The bounded run handles the sender's message and nothing posted by others: if
// the sender's message is not the first one queued (another poster's push took
// effect first) or a system message is waiting, it handles nothing and hands the
// run to the dispatcher. After the sender's message it handles the system
// messages posted meanwhile and a PoisonPill at the head of the queue (the
// actor's stop: a job actor is poisoned by its registry's commit, which its own
// settlement ran inline), and nothing else: whatever else waits, and what is
// posted later, is handed to the dispatcher as the rest of the run, in order.
// A panic is escalated as in any run, and the rest goes to the dispatcher.
//
// Only messages whose handling never blocks may be BySender, sent only to actors
// whose stop never blocks (job actors), and only where the sender's goroutine may
// run them (troupe's PoolDispatcher: registry Config.CallerRuns; a seeded schedule
// keeps every run on its worker).
type BySender interface {
	BySender() (now bool, h *Handoff)
}

// Handoff is where an idle Linked mailbox leaves the bounded run of a BySender
// message for its sender to take (Take) after its send returns, and where a held
// one (NewLinkedHeld) leaves its first run for its spawn's requester (Release).
// Its zero value is open. Take closes it: a run offered later (the message routed
// on a worker after the sender stopped looking) is refused, and goes to the
// dispatcher.
type Handoff struct{ run atomic.Pointer[linkedRun] }

// closedHandoff marks a taken Handoff.
var closedHandoff = &linkedRun{}

// Reset reopens h for the next send of the message holding it (a reused kill):
// call it only when nothing can offer to h any more.
func (h *Handoff) Reset() { h.run.Store(nil) }

// Take closes h and returns the run left in it, nil when none. The sender calls
// it once after its send returns and, given a run, calls it before waiting.
func (h *Handoff) Take() func() {
	r := h.run.Swap(closedHandoff)
	if r == nil || r == closedHandoff {
		return nil
	}
	return r.bounded
}

// offer claims the idle mailbox for the bounded run of own, its sender's message,
// and gives it to its sender: now, or through h; a refusal (h taken, or the
// mailbox not idle) leaves the run to the dispatcher.
func (m *Linked) offer(own any, now bool, h *Handoff) {
	if !m.status.CompareAndSwap(linkedIdle, linkedRunning) {
		return // a run is scheduled or running: it takes own up
	}
	m.give(own, now, h)
}

// give hands the bounded run of own (nil: no message of its own, Release) of the
// claimed mailbox to its sender: now, or through h; a refusal (h nil or taken)
// leaves the run to the dispatcher.
func (m *Linked) give(own any, now bool, h *Handoff) {
	r := linkedRuns.Get().(*linkedRun)
	r.m, r.own = m, own
	switch {
	case now:
		r.runBounded()
	case h != nil && h.run.CompareAndSwap(nil, r):
	default:
		r.m, r.own = nil, nil
		linkedRuns.Put(r)
		m.dispatch()
	}
}

// dispatch hands the claimed mailbox's run to the dispatcher.
func (m *Linked) dispatch() {
	r := linkedRuns.Get().(*linkedRun)
	r.m = m
	m.dispatcher.Schedule(r.fn)
}

// PostSystemMessage enqueues a system message and schedules a run.
func (m *Linked) PostSystemMessage(message any) {
	m.sys.push(newQnode(message))
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
		m.dispatch()
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
	m       *Linked
	own     any    // the bounded run's sender's message (BySender); nil for a dispatched run, and for a held mailbox's first (Release)
	fn      func() // run, as a value (made once per linkedRun)
	bounded func() // runBounded, as a value (made once per linkedRun)
}

var linkedRuns sync.Pool // of *linkedRun

func newLinkedRun() any {
	r := &linkedRun{}
	r.fn, r.bounded = r.run, r.runBounded
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

// runBounded is the bounded run of r.own's sender (BySender), or of a held
// mailbox's holder (Release, r.own nil); r goes back to the pool first. The rest
// of the run, if anything waits, is the dispatcher's.
func (r *linkedRun) runBounded() {
	m, own := r.m, r.own
	r.m, r.own = nil, nil
	linkedRuns.Put(r)
	m.run(own, true)
	m.status.Store(linkedIdle)
	if m.sysN.Load() == 0 && (m.suspended.Load() || m.userN.Load() == 0) {
		return
	}
	m.schedule() // unless a poster scheduled a run meanwhile
}

// system handles a system message: the mailbox's own suspension, or the invoker's.
func (m *Linked) system(msg any) {
	switch msg.(type) {
	case *actor.SuspendMailbox:
		m.suspended.Store(true)
	case *actor.ResumeMailbox:
		m.suspended.Store(false)
	default:
		m.invoker.InvokeSystemMessage(msg)
	}
}

// processMessages is one scheduled run: it runs until the queues are empty (or the
// mailbox is suspended), then goes idle, and runs again if a message was posted
// after its last pop (the poster saw it running and did not schedule).
func (m *Linked) processMessages() {
	for {
		m.run(nil, false)
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
//
// A bounded run (a sender's: BySender, Release) handles, given own (a BySender
// message), own only if own is the first message waiting and no system message
// waits, and after own (or with none) only the system messages and a head
// PoisonPill; the rest is the dispatcher's.
func (m *Linked) run(own any, bounded bool) {
	var msg any
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, msg)
		}
	}()
	if own != nil {
		if m.sysN.Load() != 0 || m.suspended.Load() || m.user.peek() != own {
			return
		}
		msg = m.user.pop()
		m.userN.Add(-1)
		m.invoker.InvokeUserMessage(msg)
	}
	i, t := 0, m.dispatcher.Throughput()
	for {
		if i > t {
			i = 0
			runtime.Gosched()
		}
		i++
		if msg = m.sys.pop(); msg != nil {
			m.sysN.Add(-1)
			m.system(msg)
			continue
		}
		if m.suspended.Load() {
			return
		}
		if bounded {
			if _, ok := m.user.peek().(*actor.PoisonPill); !ok {
				return
			}
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

// qnodes holds the nodes pop has let go of, for the next push: a job actor's
// kill took three (the Kill, the registry's PoisonPill, protoactor's Stop), each
// an allocation whose share of the kill's span refills and sweeps made its tail
// (README "Performance": BenchmarkKillToSettled's p99). A popped node is referenced by
// nothing (take's list has moved past it, and push never reads a published
// node's fields: its CAS only compares the head), so reusing it is safe.
var qnodes = sync.Pool{New: func() any { return new(qnode) }}

// newQnode returns a node holding v, from qnodes.
func newQnode(v any) *qnode {
	n := qnodes.Get().(*qnode)
	n.val = v
	return n
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

// take moves what was pushed onto the consumer's list when that list is empty.
func (q *queue) take() {
	if q.next == nil {
		var rev *qnode
		for n := q.head.Swap(nil); n != nil; {
			n.next, rev, n = rev, n, n.next
		}
		q.next = rev
	}
}

// peek returns the oldest value without removing it, nil when the queue is empty
// (consumer only).
func (q *queue) peek() any {
	q.take()
	if q.next == nil {
		return nil
	}
	return q.next.val
}

// pop removes and returns the oldest value, or nil when the queue is empty.
func (q *queue) pop() any {
	q.take()
	n := q.next
	if n == nil {
		return nil
	}
	q.next, n.next = n.next, nil
	v := n.val
	n.val = nil
	qnodes.Put(n)
	return v
}
