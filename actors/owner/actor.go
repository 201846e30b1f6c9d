package owner

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/internal/deliver"
	"github.com/troupe-rt/troupe/internal/fault"
	"github.com/troupe-rt/troupe/internal/mailbox"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/scope"
	"github.com/troupe-rt/troupe/supervision"
)

// Stopped is sent to the owner's watcher (the job registry) when the owner actor
// stops for any reason, so the jobs of that incarnation are torn down. It is sent
// from the actor's Stopped handler: its PID is already out of protoactor's process
// registry, so the watcher can tell a stopped incarnation by lookup alone.
// Session is the incarnation's session ("" if it stopped before its ownerInit: no
// handle of it was ever used), so the watcher keeps no index from PID to session.
type Stopped struct {
	PID     *actor.PID
	Session string
}

// EffectLabel is the label of the Scope effect that stops the owner actor.
const EffectLabel = "owner.stop()"

var incarnations atomic.Uint64

// guardian is every owner actor's guardian strategy. One value for all: protoactor
// registers a guardian process per strategy value, and never removes it.
var guardian = supervision.OwnerStrategy()

// Agent is a handle to one live agent incarnation. It is a value the embedder holds;
// the state lives in the owner actor.
//
// Every idle resident Activation's agent has one, so it is kept to 24 B (README
// "Performance": memory per idle resident activation): its session is read off its
// scope's label (scopeLabelPrefix + session) and its incarnation number off its
// owner actor's name (actorNamePrefix + the number), not copies of them.
type Agent struct {
	pid   *actor.PID
	scope *scope.Scope
	root  *actor.RootContext
}

// An agent's scope is labelled scopeLabelPrefix + its session, and its owner actor
// named actorNamePrefix + its incarnation number (Spawn).
const (
	scopeLabelPrefix = "agent:"
	actorNamePrefix  = "owner-"
)

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

// SetBusy tells the owner actor whether the agent is running a turn (with one of
// two shared messages, which the actor only reads: no allocation per turn).
func (a *Agent) SetBusy(busy bool) {
	m := idleMsg
	if busy {
		m = busyMsg
	}
	a.root.Send(a.pid, m)
}

var busyMsg, idleMsg = &setBusy{Busy: true}, &setBusy{Busy: false}

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
// The zero Agent (not Spawn's) has none: "".
func (a *Agent) Session() string {
	if a.scope == nil {
		return ""
	}
	return a.scope.Label()[len(scopeLabelPrefix):]
}

// PID returns the owner actor's PID: the identity of this incarnation.
func (a *Agent) PID() *actor.PID { return a.pid }

// Scope returns the agent's own scope (a child of the scope it was composed under).
func (a *Agent) Scope() *scope.Scope { return a.scope }

// Incarnation returns the process-unique incarnation number.
// The zero Agent (not Spawn's) has none: 0.
func (a *Agent) Incarnation() uint64 {
	if a.pid == nil {
		return 0
	}
	n, _ := strconv.ParseUint(a.pid.Id[len(actorNamePrefix):], 10, 64) // Spawn named it
	return n
}

// Dispose ends the incarnation: it disposes the agent's scope, which tears down the
// jobs it owns and then stops the owner actor. ctx stops the waiting only.
func (a *Agent) Dispose(ctx context.Context) error { return a.scope.Dispose(ctx) }

func (a *Agent) String() string { return fmt.Sprintf("agent %q (%s)", a.Session(), a.pid.Id) }

// Spawn starts the owner actor of a new incarnation of session, composed under parent.
// watcher, if non-nil, receives Stopped when the actor stops.
//
// session must not be empty ("" is the access calls' "no agent" caller): an empty
// one is refused with messages.CodeInvalidSession and nothing is spawned.
//
// Spawn builds a Spawner for this one call; a caller that spawns many agents of one
// configuration keeps a Spawner (NewSpawner), whose actors share one Props.
func Spawn(root *actor.RootContext, parent *scope.Scope, session string, watcher *actor.PID, opts Options) (*Agent, error) {
	return NewSpawner(root, watcher, opts).Spawn(parent, session, opts.Surface, opts.Logger)
}

// Spawner spawns owner actors of one configuration: the root context, the watcher,
// the inspector and the props adjustment of opts, shared by every actor it spawns
// (one Props for all, not one per incarnation). Each incarnation's own data (its
// scope, session, surface and logger) reaches its actor as the first message of its
// mailbox (ownerInit), sent by Spawn before the Agent handle exists, so before any
// other message can be addressed to it. A Spawner is safe for concurrent use: it is
// never written after NewSpawner.
type Spawner struct {
	root      *actor.RootContext
	watcher   *actor.PID
	inspector *actor.PID
	logger    *slog.Logger
	props     *actor.Props // an owner's whose surface is not an InlineSurface
	inline    *actor.Props // an InlineSurface's owner's (inlineMailbox)
}

// NewSpawner returns a Spawner of owner actors configured by opts (its Logger is
// the default of Spawn's, nil meaning slog.Default(); its Surface is not used).
func NewSpawner(root *actor.RootContext, watcher *actor.PID, opts Options) *Spawner {
	sp := &Spawner{root: root, watcher: watcher, inspector: opts.Inspector, logger: opts.Logger}
	if sp.logger == nil {
		sp.logger = slog.Default()
	}
	// The mailbox is mailbox.NewLinked: an agent incarnation is mostly idle, and
	// that one holds 80 B and no node when empty (protoactor's lock-free one 176 B,
	// its default ring buffer ~240 B); FIFO per sender is the same.
	// The producer makes an empty actor: protoactor calls it on the spawning
	// goroutine and passes it nothing, and an owner actor is never restarted (its
	// guardian stops it), so it is called once per incarnation, filled by ownerInit.
	// An owner whose surface is an InlineSurface has the Mailbox instead of the
	// Linked one (176 B idle instead of 80 B): a job notice (deliver.Notice, an
	// internal/mailbox Inline) to it when it is idle runs on the registry's
	// goroutine and reaches the surface within the registry's settlement commit,
	// without waking a worker for the owner. Any other surface may block, so its
	// owner's notices are queued on the Linked mailbox and handed to a worker.
	producer := func() actor.Actor { return &ownerActor{sp: sp} }
	sp.props = actor.PropsFromProducer(producer, actor.WithGuardian(guardian), actor.WithMailbox(mailbox.NewLinked))
	sp.inline = actor.PropsFromProducer(producer, actor.WithGuardian(guardian), actor.WithMailbox(mailbox.Producer))
	if opts.Props != nil {
		sp.props, sp.inline = opts.Props(sp.props), opts.Props(sp.inline)
	}
	return sp
}

// ownerInit is an owner actor's own data, the first message of its mailbox: the
// Agent handle of its incarnation (its session and scope; immutable) and where its
// notices go.
type ownerInit struct {
	agent   *Agent
	surface Surface
	logger  *slog.Logger
}

// Spawn starts the owner actor of a new incarnation of session, composed under
// parent, delivering to surface (nil drops the notices, after counting); logger nil
// means the Spawner's. See the package function Spawn.
func (sp *Spawner) Spawn(parent *scope.Scope, session string, surface Surface, logger *slog.Logger) (*Agent, error) {
	if session == "" {
		return nil, ErrEmptySession()
	}
	inc := incarnations.Add(1)
	sc, err := parent.Child(scopeLabelPrefix + session)
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = sp.logger
	}
	root, props := sp.root, sp.props
	if _, ok := surface.(InlineSurface); ok {
		props = sp.inline
	}
	// One allocation, the name itself (a prefix + FormatUint was two past 99).
	var name [len(actorNamePrefix) + 20]byte
	pid, err := root.SpawnNamed(props, string(strconv.AppendUint(append(name[:0], actorNamePrefix...), inc, 10)))
	if err != nil {
		return nil, err
	}
	a := &Agent{pid: pid, scope: sc, root: root}
	// First in the mailbox: no one else has the PID yet.
	root.Send(pid, &ownerInit{agent: a, surface: surface, logger: logger})
	if _, err := sc.AddDisposer((*stopping)(a)); err != nil {
		// Poison, not Stop: the actor takes its ownerInit first, so its spawn and
		// stop are reported as any incarnation's are.
		root.Poison(pid)
		return nil, err
	}
	return a, nil
}

// stopping is an Agent as the Scope effect that stops its owner actor
// (EffectLabel): a conversion of its handle, no closure. Poison, not Stop: a
// notice sent before the jobs' teardown finished (an unclaimed settlement) is
// already queued and must be delivered first; Stop, a system message, would
// overtake it and drop it.
type stopping Agent

func (s *stopping) Dispose(context.Context) error { return s.root.PoisonFuture(s.pid).Wait() }

func (*stopping) Label() string { return EffectLabel }

// ErrEmptySession is the refusal of an agent with the empty session id.
func ErrEmptySession() error {
	return messages.Errorf(messages.CodeInvalidSession,
		`invalid session id: expected a non-empty string ("" means no agent)`)
}

// counts are an owner's delivery counters (Stats without the state read at the
// time of asking). 32 bits each, so that an owner actor fits 80 B: they wrap past
// 2³²−1 notices in one incarnation.
type counts struct{ Delivered, Failed, Duplicates uint32 }

// ownerActor is one incarnation: its identity (its PID), the agent's busy/idle
// status, its wake budget and the notices it has delivered. Its stop tears its
// jobs down (through the registry, its watcher).
type ownerActor struct {
	sp *Spawner // the watcher and the inspector (the supervision tree's, or nil)
	// agent is the incarnation's handle (ownerInit; nil before it): its session, and
	// its own scope, whose disposal is its teardown. Not copies of them: 16 B less.
	agent   *Agent
	surface Surface
	logger  *slog.Logger
	// noticed is the job last noticed: one notice per job, whatever mounts fire.
	// Every mount's notice of a job is sent within the one registry message that
	// commits its settlement, from the registry's goroutine, so a job's duplicates
	// reach this mailbox before any later job's notice: remembering the last job is
	// enough, and nothing accumulates per job over a long incarnation.
	noticed string
	stats   counts
	spent   uint32 // wakes spent since the last claimed user message (below a notice's MaxWakes)
	busy    bool
	crashed bool // a panic escaped Receive: the guardian stops the actor
}

func (o *ownerActor) Receive(c actor.Context) {
	defer o.noteCrash()
	switch m := c.Message().(type) {
	case *ownerInit:
		o.agent, o.surface, o.logger = m.agent, m.surface, m.logger
		o.reportLifecycle(c)
	case *deliver.Notice:
		o.deliver(m)
	case *deliver.ChildNotice:
		fault.Yield(PointChildNoticeDeliver)
		verb := o.steer
		switch {
		case m.LineageClosing, o.agent.scope.Disposed():
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
		s := Stats{Delivered: int(o.stats.Delivered), Failed: int(o.stats.Failed), Duplicates: int(o.stats.Duplicates)}
		s.Busy, s.SpentWakes = o.busy, int(o.spent)
		m.reply <- s
	case *actor.Stopped:
		if o.agent != nil { // stopped before its ownerInit: its spawn was never reported
			o.reportLifecycle(c)
		}
		// Sent once the actor is out of protoactor's process registry (Stopped, not
		// Stopping), so the watcher, when it takes this, already sees the PID dead
		// and keeps nothing to refuse a later registration of it.
		if o.sp.watcher != nil {
			m := &Stopped{PID: c.Self()}
			if o.agent != nil {
				m.Session = o.agent.Session()
			}
			c.Send(o.sp.watcher, m)
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
	if _, started := c.Message().(*ownerInit); started {
		supervision.Emit(c, o.sp.inspector, supervision.Event{Kind: supervision.Spawned, Node: self,
			Actor: c.Self().Id, Session: o.agent.Session()})
		return
	}
	cause := supervision.CauseTeardown
	if o.crashed {
		cause = supervision.CausePanic
	}
	supervision.Emit(c, o.sp.inspector, supervision.Event{Kind: supervision.Stopped, Node: self, Cause: cause})
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
	if n.Delivery == DeliveryWakeup && !o.busy && int64(o.spent) < int64(n.MaxWakes) {
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
