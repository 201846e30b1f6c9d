package owner

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/internal/deliver"
	"github.com/troupe-rt/troupe/internal/fault"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/scope"
	"github.com/troupe-rt/troupe/supervision"
)

// Stopped is sent to the owner's watcher (the job registry) when the owner actor
// stops for any reason, so the jobs of that incarnation are torn down. It is sent
// from the actor's Stopped handler: its PID is already out of protoactor's process
// registry, so the watcher can tell a stopped incarnation by lookup alone.
type Stopped struct{ PID *actor.PID }

// EffectLabel is the label of the Scope effect that stops the owner actor.
const EffectLabel = "owner.stop()"

var incarnations atomic.Uint64

// guardian is every owner actor's guardian strategy. One value for all: protoactor
// registers a guardian process per strategy value, and never removes it.
var guardian = supervision.OwnerStrategy()

// mailbox is every owner actor's mailbox: protoactor's linked (lock-free) queue.
// An agent incarnation is mostly idle, and the default mailbox's ring buffer
// (goring: 10 slots, ~240 B with its headers) would be held by every live one for
// its whole life, where the linked queue holds one 24-B node. FIFO per sender is
// the same. One value for all (UnboundedLockfree allocates its closure per call).
var mailbox = actor.UnboundedLockfree()

// Agent is a handle to one live agent incarnation. It is a value the embedder holds;
// the state lives in the owner actor.
type Agent struct {
	session     string
	pid         *actor.PID
	scope       *scope.Scope
	incarnation uint64
	root        *actor.RootContext
}

// Options configure an owner actor.
type Options struct {
	// Surface receives the agent's notices; nil drops them (after counting).
	Surface Surface
	// Logger receives delivery failures; nil means slog.Default().
	Logger *slog.Logger
	// Props, if set, adjusts the owner actor's props (a test dispatcher, say).
	Props func(*actor.Props) *actor.Props
	// Inspector, if set, receives the owner actor's lifecycle events (spawned;
	// stopped with cause panic after a crash, teardown otherwise).
	Inspector *actor.PID
}

// SetBusy tells the owner actor whether the agent is running a turn.
func (a *Agent) SetBusy(busy bool) { a.root.Send(a.pid, &setBusy{Busy: busy}) }

// InboxClaimed tells the owner actor the agent claimed an inbox message whose
// source kind is kind ("user" resets the wake budget).
func (a *Agent) InboxClaimed(kind string) { a.root.Send(a.pid, &inboxClaimed{SourceKind: kind}) }

// Stats asks the owner actor for its delivery state.
func (a *Agent) Stats(ctx context.Context) (Stats, error) {
	reply := make(chan Stats, 1)
	a.root.Send(a.pid, &statsReq{reply: reply})
	select {
	case s := <-reply:
		return s, nil
	case <-ctx.Done():
		return Stats{}, context.Cause(ctx)
	}
}

// Session returns the agent's session id.
func (a *Agent) Session() string { return a.session }

// PID returns the owner actor's PID: the identity of this incarnation.
func (a *Agent) PID() *actor.PID { return a.pid }

// Scope returns the agent's own scope (a child of the scope it was composed under).
func (a *Agent) Scope() *scope.Scope { return a.scope }

// Incarnation returns the process-unique incarnation number.
func (a *Agent) Incarnation() uint64 { return a.incarnation }

// Dispose ends the incarnation: it disposes the agent's scope, which tears down the
// jobs it owns and then stops the owner actor. ctx stops the waiting only.
func (a *Agent) Dispose(ctx context.Context) error { return a.scope.Dispose(ctx) }

func (a *Agent) String() string { return fmt.Sprintf("agent %q (%s)", a.session, a.pid.Id) }

// Spawn starts the owner actor of a new incarnation of session, composed under parent.
// watcher, if non-nil, receives Stopped when the actor stops.
//
// session must not be empty ("" is the access calls' "no agent" caller): an empty
// one is refused with messages.CodeInvalidSession and nothing is spawned.
func Spawn(root *actor.RootContext, parent *scope.Scope, session string, watcher *actor.PID, opts Options) (*Agent, error) {
	if session == "" {
		return nil, ErrEmptySession()
	}
	inc := incarnations.Add(1)
	sc, err := parent.Child("agent:" + session)
	if err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	props := actor.PropsFromProducer(func() actor.Actor {
		return &ownerActor{watcher: watcher, surface: opts.Surface, logger: logger, scope: sc,
			inspector: opts.Inspector, session: session}
	}, actor.WithGuardian(guardian), actor.WithMailbox(mailbox))
	if opts.Props != nil {
		props = opts.Props(props)
	}
	pid, err := root.SpawnNamed(props, fmt.Sprintf("owner-%d", inc))
	if err != nil {
		return nil, err
	}
	a := &Agent{session: session, pid: pid, scope: sc, incarnation: inc, root: root}
	if _, err := sc.Add(EffectLabel, func(ctx context.Context) error {
		// Poison, not Stop: a notice sent before the jobs' teardown finished (an
		// unclaimed settlement) is already queued and must be delivered first;
		// Stop, a system message, would overtake it and drop it.
		return root.PoisonFuture(pid).Wait()
	}); err != nil {
		root.Stop(pid)
		return nil, err
	}
	return a, nil
}

// ErrEmptySession is the refusal of an agent with the empty session id.
func ErrEmptySession() error {
	return messages.Errorf(messages.CodeInvalidSession,
		`invalid session id: expected a non-empty string ("" means no agent)`)
}

// ownerActor is one incarnation: its identity (its PID), the agent's busy/idle
// status, its wake budget and the notices it has delivered. Its stop tears its
// jobs down (through the registry, its watcher).
type ownerActor struct {
	watcher *actor.PID
	surface Surface
	logger  *slog.Logger
	busy    bool
	spent   int // wakes spent since the last claimed user message
	// noticed is the job last noticed: one notice per job, whatever mounts fire.
	// Every mount's notice of a job is sent within the one registry message that
	// commits its settlement, from the registry's goroutine, so a job's duplicates
	// reach this mailbox before any later job's notice: remembering the last job is
	// enough, and nothing accumulates per job over a long incarnation.
	noticed string
	scope   *scope.Scope // the incarnation's own scope: its disposal is its teardown
	stats   Stats

	inspector *actor.PID // the supervision tree's, or nil
	session   string
	crashed   bool // a panic escaped Receive: the guardian stops the actor
}

func (o *ownerActor) Receive(c actor.Context) {
	defer o.noteCrash()
	switch m := c.Message().(type) {
	case *deliver.Notice:
		o.deliver(m)
	case *deliver.ChildNotice:
		fault.Yield(PointChildNoticeDeliver)
		verb := o.steer
		switch {
		case m.LineageClosing, o.scope.Disposed():
			// Its lineage tears down — the sender saw it, or this incarnation's own
			// scope disposal (its teardown, SPEC §1.3 rule 26) has begun: no new turn.
			verb = o.inject
		case !o.busy:
			verb = o.followup
		}
		if err := o.call(verb, m.Message); err != nil {
			o.stats.Failed++
			o.logger.Warn(fmt.Sprintf("subagent: settlement notice of %s to %s failed: %s", m.ChildID, c.Self().Id, err.Error()))
			return
		}
		o.stats.Delivered++
	case *deliver.Relay:
		fault.Yield(PointRelayDeliver)
		verb := o.steer
		if m.Quiet {
			verb = o.inject
		}
		err := o.call(verb, m.Message)
		if m.Reply != nil {
			m.Reply <- err
		}
	case *setBusy:
		o.busy = m.Busy
	case *inboxClaimed:
		if m.SourceKind == "user" {
			o.spent = 0
		}
	case *statsReq:
		s := o.stats
		s.Busy, s.SpentWakes = o.busy, o.spent
		m.reply <- s
	case *actor.Started:
		o.reportLifecycle(c)
	case *actor.Stopped:
		o.reportLifecycle(c)
		// Sent once the actor is out of protoactor's process registry (Stopped, not
		// Stopping), so the watcher, when it takes this, already sees the PID dead
		// and keeps nothing to refuse a later registration of it.
		if o.watcher != nil {
			c.Send(o.watcher, &Stopped{PID: c.Self()})
		}
	}
}

// noteCrash records a panic escaping Receive, then lets it go on to the guardian.
func (o *ownerActor) noteCrash() {
	if v := recover(); v != nil {
		o.crashed = true
		panic(v)
	}
}

// reportLifecycle tells the supervision tree of the owner's spawn and stop.
func (o *ownerActor) reportLifecycle(c actor.Context) {
	self := supervision.Ref{Kind: supervision.KindOwner, ID: c.Self().Id}
	if _, started := c.Message().(*actor.Started); started {
		supervision.Emit(c, o.inspector, supervision.Event{Kind: supervision.Spawned, Node: self,
			Actor: c.Self().Id, Session: o.session})
		return
	}
	cause := supervision.CauseTeardown
	if o.crashed {
		cause = supervision.CausePanic
	}
	supervision.Emit(c, o.inspector, supervision.Event{Kind: supervision.Stopped, Node: self, Cause: cause})
}

// deliver picks the lane (SPEC §3.8) and calls the surface.
func (o *ownerActor) deliver(n *deliver.Notice) {
	if n.JobID != "" && n.JobID == o.noticed {
		o.stats.Duplicates++
		return
	}
	o.noticed = n.JobID
	fault.Yield(PointNoticeDeliver)
	verb := o.inject
	if n.Delivery == DeliveryWakeup && !o.busy && o.spent < n.MaxWakes {
		o.spent++
		verb = o.followup
	}
	if err := o.call(verb, n.Message); err != nil {
		o.stats.Failed++
		o.logger.Warn(fmt.Sprintf("jobs: onJobDone listener threw for %s: %s", n.JobID, err.Error()))
		return
	}
	o.stats.Delivered++
}

func (o *ownerActor) inject(m Message) error {
	if o.surface == nil {
		return nil
	}
	return o.surface.Inject(m)
}

func (o *ownerActor) steer(m Message) error {
	if o.surface == nil {
		return nil
	}
	return o.surface.Steer(m)
}

func (o *ownerActor) followup(m Message) error {
	if o.surface == nil {
		return nil
	}
	return o.surface.Followup(m)
}

// call runs a surface verb, turning a panic into an error. What reaches the agent's
// inbox is valid UTF-8 (a child's closing message or report may not be).
func (o *ownerActor) call(verb func(Message) error, m Message) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%v", v)
		}
	}()
	return verb(validMessage(m))
}

// validMessage replaces invalid UTF-8 in m's texts and summary with U+FFFD.
func validMessage(m Message) Message {
	valid := func(s string) string {
		if utf8.ValidString(s) {
			return s
		}
		return strings.ToValidUTF8(s, "\uFFFD")
	}
	m.Text, m.Source.Summary = valid(m.Text), valid(m.Source.Summary)
	for i, t := range m.More {
		if !utf8.ValidString(t) {
			more := append([]string(nil), m.More...)
			for j := i; j < len(more); j++ {
				more[j] = valid(more[j])
			}
			m.More = more
			break
		}
	}
	return m
}
