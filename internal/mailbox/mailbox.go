// Package mailbox is troupe's protoactor mailboxes for its own actors. Mailbox
// (this file) is for the busy ones, the job registry and the supervision
// inspector, and for the owner actors whose surface takes notices inline: no
// allocation per message or per run, and its Inline messages are run by their
// sender when the mailbox is idle. Linked (linked.go) is for the many mostly idle
// ones, the job actors, the other owner actors and Activations: smallest when idle
// (80 B, no node held), a node per message, never running an Inline message on its
// sender (its own BySender messages are: a job actor's settle and kill; and a
// held one's first run, a job actor's Started, is its start's caller's).
//
// It keeps protoactor's default mailbox contract (actor.Mailbox): system messages
// before user messages, each queue FIFO, one run at a time on the dispatcher, at
// most Throughput messages between yields, SuspendMailbox / ResumeMailbox handled
// by the mailbox itself (a suspended mailbox runs system messages only), a panic
// in a handler escalated through the invoker (EscalateFailure) and the run going
// on with the next message, a MessageBatch posted as its messages and then itself.
//
// What it does not do is allocate per message or per run. protoactor's mailboxes
// allocate a queue node for every message of the lock-free queue (system messages
// always use one), two queues with their stub nodes per mailbox, and a closure of
// the run for every time an idle mailbox is scheduled. On the job lifecycle (a job
// actor gets about four messages in its life, the registry and the inspector wake
// several times per job) those were 14 of a job's 37 allocations. Here each queue
// is a ring whose first slot is inline, grown by doubling (and kept) when more
// messages wait at once, and the run's function value is made once. An idle
// mailbox is 176 B with that function value, as protoactor's lock-free one is with
// its two queues and stubs.
//
// The lock guards the two queues and the scheduled flag only; it is held for O(1)
// steps (a push, a pop) and never while a message is handled, so a handler that
// sends to its own mailbox never waits on it.
package mailbox

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// Producer is the actor.MailboxProducer of this mailbox (for actor.WithMailbox).
func Producer() actor.Mailbox { return New() }

// New returns an empty mailbox.
func New() *Mailbox {
	m := &Mailbox{}
	m.sys.buf = m.sysInline[:]
	m.user.buf = m.userInline[:]
	m.runFn = m.process
	return m
}

// ProducerTerminatedBySender is Producer for a mailbox whose actor's children run
// their own Terminated (NewTerminatedBySender).
func ProducerTerminatedBySender() actor.Mailbox { return NewTerminatedBySender() }

// NewTerminatedBySender returns an empty mailbox that lets the sender of a
// Terminated (a child actor's stop, or a watched actor's, sent from its last
// run) run it when the mailbox is idle: its run is bounded to that one system
// message, as an Inline sender's is to its user message (the rest, if anything
// was posted meanwhile, is the dispatcher's). The job registry's mailbox is one
// when it runs on troupe's PoolDispatcher (registry Config.CallerRuns): a job
// actor's stop then wakes no registry worker; the handler never blocks.
func NewTerminatedBySender() *Mailbox {
	m := New()
	m.terminatedBySender = true
	return m
}

// NewDeferring returns an empty mailbox whose actor need not run as soon as a
// message that may wait arrives: a user message for which may reports true, posted
// to an idle mailbox, is queued without scheduling a run, until a message that
// may not wait is posted (any system message, any other user message), limit
// messages are queued, or SetEager(true) was called. The run that follows then
// handles the queued ones first, in order: the FIFO is the same, a run is only
// made later and for several messages at once. The supervision inspector's mailbox
// is one (its lifecycle events wait while nobody subscribes: every query is a
// message behind them, so it sees them all), which saves one worker wake per event
// on the registry's path (a kill, a start). may must not block; limit ≥ 1.
func NewDeferring(limit int, may func(message any) bool) *Mailbox {
	m := New()
	m.deferring = &deferral{limit: uint32(max(limit, 1)), may: may}
	return m
}

// deferral is a NewDeferring mailbox's: a pointer, so that the mailboxes that
// defer nothing (the registry's, the owner actors') stay in their size class.
type deferral struct {
	limit uint32
	eager bool // under the mailbox's mu
	may   func(message any) bool
}

// SetEager turns a NewDeferring mailbox's deferral off (true: every message
// schedules a run, as in a New one) or back on; turned off, it schedules the run
// of what waits. A New mailbox ignores it.
func (m *Mailbox) SetEager(eager bool) {
	if m.deferring == nil {
		return
	}
	m.mu.Lock()
	m.deferring.eager = eager
	if eager && m.user.n > 0 {
		m.post()
		return
	}
	m.mu.Unlock()
}

// waits reports whether message, just queued, may wait for a later run
// (NewDeferring). Called under mu with no run scheduled.
func (m *Mailbox) waits(message any) bool {
	d := m.deferring
	return d != nil && !d.eager && m.user.n < d.limit && d.may(message)
}

// Mailbox is a protoactor mailbox (see the package doc). Its zero value is not
// usable: make it with New.
type Mailbox struct {
	mu        sync.Mutex
	sys, user ring
	scheduled bool // a run is scheduled or running (under mu)
	suspended bool // user messages wait until ResumeMailbox (under mu)
	// terminatedBySender: a Terminated posted to the idle mailbox is run by its
	// sender (NewTerminatedBySender).
	terminatedBySender bool
	userCount          atomic.Int32
	invoker            actor.MessageInvoker
	dispatcher         actor.Dispatcher
	runFn              func()    // process, as the value handed to the dispatcher
	deferring          *deferral // NewDeferring's deferral (nil: New's mailbox defers nothing)
	sysInline          [1]any
	userInline         [1]any
}

// PostUserMessage queues a user message and schedules a run if none is.
func (m *Mailbox) PostUserMessage(message any) {
	// protoactor's default mailbox posts a batch's messages and then the batch itself.
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
	m.userCount.Add(1)
	m.mu.Lock()
	m.user.push(message)
	if in, ok := message.(Inline); ok && !m.scheduled && (m.deferring == nil || m.user.n == 1) && in.HandledBySender() {
		// Idle: no run is scheduled, so this message is the only user message queued
		// (or, suspended, it waits with the others for ResumeMailbox).
		m.scheduled = true
		m.mu.Unlock()
		m.runInline()
		return
	}
	if !m.scheduled && m.waits(message) {
		m.mu.Unlock() // it waits for the next run (NewDeferring)
		return
	}
	m.post()
}

// Inline is a user message its sender's goroutine may handle itself when the
// mailbox is idle: if HandledBySender reports true, PostUserMessage makes that run
// there, before it returns, instead of handing it to the dispatcher — one
// goroutine wake fewer. The sender's run is bounded: it handles the system
// messages queued, then the sender's message (an idle mailbox holds no other user
// message), and nothing more; whatever was posted meanwhile (by other senders, or
// by the handler to its own actor) is handed to the dispatcher as the rest of the
// run, in order. So a sender is never held up by other senders' messages, however
// busy the mailbox gets while it runs: it pays for its own message only. A panic
// is escalated as in any run, and what remains goes to the dispatcher. Posted
// while a run is scheduled or running, the message is queued as any other (and a
// Linked mailbox never runs one inline).
//
// Only a message whose handling never blocks may be Inline: the sender waits for
// the run. They are a job actor's job.Settled and job.StopRequested to the
// registry, the registry's job notice to an owner actor (deliver.Notice) whose
// surface is an owner.InlineSurface (the other owner actors have a Linked
// mailbox), and the registry Client's requests when the registry runs on troupe's
// PoolDispatcher (actors/registry Config.CallerRuns: a caller's kill, wait, get,
// list, record, observation or read, and its start when its ctx can never end, is
// answered on the caller's goroutine; a read that would call a producer hook not
// declared non-blocking with a ctx that can end is handed on by the registry to
// its worker).
//
// PostUserMessage asks HandledBySender only when the mailbox is idle, once, under
// its lock, just before a true answer hands the sender the run: a message may
// note its answer, so that its handler knows it may be on the sender's goroutine
// (it is, unless a system message posted meanwhile suspends the mailbox first).
type Inline interface{ HandledBySender() bool }

// PostSystemMessage queues a system message and schedules a run if none is.
func (m *Mailbox) PostSystemMessage(message any) {
	m.mu.Lock()
	m.sys.push(message)
	if _, ok := message.(*actor.Terminated); ok && m.terminatedBySender && !m.scheduled {
		// Idle: this Terminated is the only system message queued.
		m.scheduled = true
		m.mu.Unlock()
		if !m.runSystemOwn() {
			m.dispatcher.Schedule(m.runFn)
		}
		return
	}
	m.post()
}

// runSystemOwn is the sender's run of its system message (NewTerminatedBySender):
// that message alone, then the run ends if nothing else waits (true), or is left
// to the dispatcher (false: messages posted meanwhile wait, or the handler
// panicked and the panic was escalated).
func (m *Mailbox) runSystemOwn() (ended bool) {
	var msg any
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, msg)
			ended = false
		}
	}()
	m.mu.Lock()
	msg, _ = m.sys.pop()
	m.mu.Unlock()
	m.system(msg)
	m.mu.Lock()
	if m.sys.n == 0 && (m.suspended || m.user.n == 0) {
		m.scheduled = false
		m.mu.Unlock()
		return true
	}
	m.mu.Unlock()
	return false
}

// post ends a push made under mu: it claims the run when none is scheduled, and
// unlocks before handing the run to the dispatcher.
func (m *Mailbox) post() {
	if m.scheduled {
		m.mu.Unlock()
		return
	}
	m.scheduled = true
	m.mu.Unlock()
	m.dispatcher.Schedule(m.runFn)
}

// RegisterHandlers sets who handles the messages and where the runs go.
func (m *Mailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	m.invoker = invoker
	m.dispatcher = dispatcher
}

// Start is called once the actor is spawned; this mailbox has nothing to start.
func (m *Mailbox) Start() {}

// UserMessageCount returns how many user messages are queued.
func (m *Mailbox) UserMessageCount() int { return int(m.userCount.Load()) }

// next pops the next message to handle: a system message first, then (unless
// suspended) a user message. With none, the run ends: scheduled is cleared under
// the same lock, so a message posted after it schedules a new run.
func (m *Mailbox) next() (msg any, system, ok bool) {
	m.mu.Lock()
	if msg, ok = m.sys.pop(); ok {
		m.mu.Unlock()
		return msg, true, true
	}
	if !m.suspended {
		if msg, ok = m.user.pop(); ok {
			m.mu.Unlock()
			return msg, false, true
		}
	}
	m.scheduled = false
	m.mu.Unlock()
	return nil, false, false
}

// process is one run: it handles messages until none is left (or, suspended,
// until no system message is), yielding every Throughput messages.
func (m *Mailbox) process() {
	for !m.runSome() {
	}
}

// runInline is the run an Inline message's sender makes (PostUserMessage): the
// system messages, then the sender's message, then the run ends if nothing else
// waits, or else is handed to the dispatcher for the rest, scheduled as it is (no
// poster meanwhile saw the mailbox idle, so none scheduled a run of its own).
func (m *Mailbox) runInline() {
	if !m.runOwn() {
		m.dispatcher.Schedule(m.runFn)
	}
}

// runOwn handles the system messages and then one user message (the sender's,
// unless suspended), and reports whether the run has ended: true when nothing
// waits (scheduled is cleared under the lock that saw the queues empty), false
// when messages wait or a handler panicked (the panic was escalated; the rest of
// the run is the dispatcher's).
func (m *Mailbox) runOwn() (ended bool) {
	var msg any
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, msg)
			ended = false
		}
	}()
	for {
		m.mu.Lock()
		var ok bool
		if msg, ok = m.sys.pop(); !ok {
			break // mu is held
		}
		m.mu.Unlock()
		m.system(msg)
	}
	if !m.suspended {
		var ok bool
		if msg, ok = m.user.pop(); ok {
			m.mu.Unlock()
			m.userCount.Add(-1)
			m.invoker.InvokeUserMessage(msg)
			m.mu.Lock()
		}
	}
	if m.sys.n == 0 && (m.suspended || m.user.n == 0) {
		m.scheduled = false
		m.mu.Unlock()
		return true
	}
	m.mu.Unlock()
	return false
}

// system handles a system message: the mailbox's own suspension, or the invoker's.
func (m *Mailbox) system(msg any) {
	switch msg.(type) {
	case *actor.SuspendMailbox:
		m.setSuspended(true)
	case *actor.ResumeMailbox:
		m.setSuspended(false)
	default:
		m.invoker.InvokeSystemMessage(msg)
	}
}

// runSome handles messages until the queues are empty (true), or until a handler
// panicked (false: the panic was escalated and the run goes on).
func (m *Mailbox) runSome() (done bool) {
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
		var system, ok bool
		if msg, system, ok = m.next(); !ok {
			return true
		}
		if system {
			m.system(msg)
			continue
		}
		m.userCount.Add(-1)
		m.invoker.InvokeUserMessage(msg)
	}
}

func (m *Mailbox) setSuspended(s bool) {
	m.mu.Lock()
	m.suspended = s
	m.mu.Unlock()
}

// ring is a FIFO of messages in a power-of-two buffer (its first one is the
// mailbox's inline array), grown by doubling when full and never shrunk.
type ring struct {
	buf  []any
	head uint32
	n    uint32
}

func (r *ring) push(v any) {
	if int(r.n) == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.n)&uint32(len(r.buf)-1)] = v
	r.n++
}

func (r *ring) pop() (any, bool) {
	if r.n == 0 {
		return nil, false
	}
	v := r.buf[r.head]
	r.buf[r.head] = nil // the ring holds no message it has handed out
	r.head = (r.head + 1) & uint32(len(r.buf)-1)
	r.n--
	return v, true
}

func (r *ring) grow() {
	next := make([]any, 2*len(r.buf))
	for i := range r.n {
		next[i] = r.buf[(r.head+i)&uint32(len(r.buf)-1)]
	}
	clear(r.buf)
	r.buf, r.head = next, 0
}
