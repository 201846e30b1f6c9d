package supervision

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/internal/mailbox"
	"github.com/troupe-rt/troupe/messages"
)

// InspectorName is the name of the supervision actor (one per actor system).
const InspectorName = "supervision"

// maxRejections is how many refused events the inspector keeps for Stats.
const maxRejections = 64

// InspectorConfig configures the supervision actor. The zero value is valid.
type InspectorConfig struct {
	// Clock stamps each event's At. nil means time.Now.
	Clock func() time.Time
	// Logger receives a warning per refused event. nil means slog.Default().
	Logger *slog.Logger
	// Dispatcher runs the supervision actor's mailbox. nil means protoactor's default
	// (a fresh goroutine per mailbox run); troupe.New passes its pool. Either way an
	// event is only queued on the sender's goroutine (Emit is a Send): the inspector
	// applies and forwards it on its own run, never inside the sender's.
	Dispatcher actor.Dispatcher
}

// InspectorDecider decides for a failed supervision actor: resume. Its Tree applies
// each event whole (a refused event changes nothing), and a restart would forget
// the tree and every subscription.
func InspectorDecider(reason any) actor.Directive { return actor.ResumeDirective }

// Emit sends a lifecycle event to the inspector at to, from c (an actor's context,
// so the event is ordered after everything c sent before). A nil to means there is
// no inspector and nothing is sent. The inspector sets Seq and At.
//
// All events of one node must come from one sender, in the order they happened:
// protoactor keeps each sender's messages in order, not messages across senders.
func Emit(c actor.SenderContext, to *actor.PID, e Event) {
	if to != nil {
		c.Send(to, &e)
	}
}

// JobSpawned, JobSettled and JobStopped are the compact forms of a job node's
// (KindJob, under the registry node Registry) three lifecycle events, which the
// registry sends for every job: 24–64 B each where an Event is 176 B (a third of
// a short job's allocated bytes). The inspector applies each as the Event it
// stands for (its Event method): the tree, Stats and subscribers see no
// difference. Send them with EmitJob; Emit's ordering contract holds.
type (
	JobSpawned struct{ Registry, ID, Actor, Session string }
	JobSettled struct {
		ID, Status, Detail string
		Cause              Cause
	}
	JobStopped struct {
		ID    string
		Cause Cause
	}
)

// Event returns the Spawned event m stands for.
func (m *JobSpawned) Event() Event {
	return Event{Kind: Spawned, Node: Ref{Kind: KindJob, ID: m.ID}, Actor: m.Actor,
		Parent: Ref{Kind: KindRegistry, ID: m.Registry}, Session: m.Session}
}

// Event returns the Settled event m stands for.
func (m *JobSettled) Event() Event {
	return Event{Kind: Settled, Node: Ref{Kind: KindJob, ID: m.ID}, Status: m.Status, Cause: m.Cause, Detail: m.Detail}
}

// Event returns the Stopped event m stands for.
func (m *JobStopped) Event() Event {
	return Event{Kind: Stopped, Node: Ref{Kind: KindJob, ID: m.ID}, Cause: m.Cause}
}

// JobEnded is a job's Settled and Stopped events in one message: the registry
// holds a job's Settled event from its settlement commit until its actor has
// stopped (a few handler runs later: the commit poisons the actor) and sends both
// together, one message to the inspector where there were two (each message to an
// idle inspector is a worker's wake, which cost more CPU than applying the event).
// The inspector applies Settled, then Stopped, each exactly as if sent on its own.
type JobEnded struct {
	Settled JobSettled
	Stopped JobStopped
}

// EmitJob sends a job node's compact event (*JobSpawned, *JobSettled, *JobStopped
// or *JobEnded) to the inspector at to, as Emit does; a nil to sends nothing.
func EmitJob[E JobSpawned | JobSettled | JobStopped | JobEnded](c actor.SenderContext, to *actor.PID, e E) {
	if to != nil {
		c.Send(to, &e)
	}
}

// Rejection is an event the tree refused: a bug in its sender. It was not numbered
// and no subscriber saw it.
type Rejection struct {
	Event Event
	Err   error
}

// Stats is the inspector's account of the events it received.
type Stats struct {
	Applied     uint64      // events accepted: the Seq of the last one
	Rejected    uint64      // events refused
	Rejections  []Rejection // the first refused events (at most 64)
	Subscribers int         // live subscriptions, Go and wire
}

// Inspector is the handle to the supervision actor, which keeps troupe's own index
// of the live supervision tree (protoactor has no tree API). Troupe's actors send it
// their lifecycle events; it numbers them, applies them to its Tree and forwards
// each, in order, to every subscription. It is safe for concurrent use.
type Inspector struct {
	root *actor.RootContext
	pid  *actor.PID
	gone chan struct{} // closed once the actor has stopped
}

// StartInspector spawns the supervision actor of system, named InspectorName.
func StartInspector(system *actor.ActorSystem, cfg InspectorConfig) (*Inspector, error) {
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	in := &Inspector{root: system.Root, gone: make(chan struct{})}
	// The events wait while nobody subscribes (mailbox.NewDeferring): the tree is
	// then read only by a query (Snapshot, Stats, a wire snapshot), a message queued
	// behind every event sent before it, whose run applies them first. So an event
	// wakes no worker until eventBatch of them wait or a query or another message
	// comes: one wake per eventBatch kills or starts instead of one per event (the
	// registry's kill → settled p99 was 9× its mean with a wake each). A
	// subscription makes the mailbox eager again (subscribe): a follower gets each
	// event as soon as the inspector can apply it.
	mb := mailbox.NewDeferring(eventBatch, isEvent)
	a := &inspectorActor{cfg: cfg, tree: NewTree(), subs: map[string]*subscriber{}, gone: in.gone, mailbox: mb}
	// Never a synchronized dispatcher: that one runs the inspector's mailbox on the
	// goroutine of whoever sends to an idle inspector — the registry's run, a job's —
	// so every sender paid for applying and forwarding the event. The actor never
	// blocks: it only applies, copies and forwards.
	props := actor.PropsFromProducer(func() actor.Actor { return a },
		actor.WithGuardian(Restarting(InspectorDecider, Intensity{}, nil)),
		actor.WithMailbox(func() actor.Mailbox { return mb }))
	if cfg.Dispatcher != nil {
		props = props.Configure(actor.WithDispatcher(cfg.Dispatcher))
	}
	pid, err := system.Root.SpawnNamed(props, InspectorName)
	if err != nil {
		return nil, err
	}
	in.pid = pid
	return in, nil
}

// PID is the supervision actor's address: where lifecycle events go, and where a
// wire client sends TreeSnapshotRequest, TreeSubscribe and TreeUnsubscribe.
func (in *Inspector) PID() *actor.PID {
	if in == nil {
		return nil
	}
	return in.pid
}

// InspectorOf returns the PID of system's supervision actor if it has one running
// (a system made by troupe.New), else nil — for actors spawned with only the actor
// system at hand.
func InspectorOf(system *actor.ActorSystem) *actor.PID {
	if _, ok := system.ProcessRegistry.GetLocal(InspectorName); !ok {
		return nil
	}
	return actor.NewPID(system.Address(), InspectorName)
}

func errInspectorStopped() error {
	return &messages.Error{Code: messages.CodeStopped, Message: "the supervision inspector is stopped (the troupe system is shut down)"}
}

// ask sends msg and waits for its one reply, ctx's end or the actor's stop.
func ask[T any](ctx context.Context, in *Inspector, msg any, reply <-chan T) (T, error) {
	in.root.Send(in.pid, msg)
	select {
	case v := <-reply:
		return v, nil
	case <-in.gone:
		var zero T
		return zero, errInspectorStopped()
	case <-ctx.Done():
		var zero T
		return zero, context.Cause(ctx)
	}
}

// Snapshot returns the live tree. It includes every event sent to the inspector
// (Emit) before this call by the calling goroutine; events of other senders may
// still be on their way.
func (in *Inspector) Snapshot(ctx context.Context) (Snapshot, error) {
	reply := make(chan Snapshot, 1)
	return ask(ctx, in, &snapshotReq{reply: reply}, reply)
}

// Stats returns how many events were applied and refused, with the first refused.
func (in *Inspector) Stats(ctx context.Context) (Stats, error) {
	reply := make(chan Stats, 1)
	return ask(ctx, in, &statsReq{reply: reply}, reply)
}

// Subscribe follows the tree: it returns a snapshot at some Seq N and a
// subscription whose Events channel then delivers the events N+1, N+2… in order,
// none lost or skipped, however slowly they are read (the subscription queues them
// in its own actor's unbounded mailbox; neither the inspector nor any other actor
// waits for the reader). The channel is closed after the last event once the
// subscription ends: by Cancel (events not yet read are dropped) or by the
// inspector's stop (the events queued before it are still delivered). Cancel
// every subscription that is not read to its end.
func (in *Inspector) Subscribe(ctx context.Context) (*Subscription, Snapshot, error) {
	s := &Subscription{in: in, done: make(chan struct{})}
	out := make(chan Event)
	s.events = out
	props := actor.PropsFromProducer(func() actor.Actor { return &subscriptionActor{out: out, done: s.done} })
	pid := in.root.SpawnPrefix(props, InspectorName+"-sub-")
	s.pid = pid
	reply := make(chan Snapshot, 1)
	snap, err := ask(ctx, in, &subscribeReq{pid: pid, reply: reply}, reply)
	if err != nil {
		s.Cancel()
		return nil, Snapshot{}, err
	}
	return s, snap, nil
}

// Stop stops the supervision actor once the events already sent to it are applied
// and forwarded, and waits until it has stopped or ctx ends. Subscriptions deliver
// what they have queued, then close their channels. Idempotent.
func (in *Inspector) Stop(ctx context.Context) error {
	select {
	case <-in.gone:
		return nil
	default:
	}
	in.root.Poison(in.pid)
	select {
	case <-in.gone:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Subscription is one follower of the tree (see Inspector.Subscribe).
type Subscription struct {
	in     *Inspector
	pid    *actor.PID
	events <-chan Event
	done   chan struct{} // closed by Cancel: delivery stops
	once   sync.Once
}

// Events delivers the events after the subscription's snapshot, in order. It is
// closed once the subscription has ended.
func (s *Subscription) Events() <-chan Event { return s.events }

// Cancel ends the subscription: the inspector forgets it, events not yet received
// are dropped, and Events is closed before Cancel returns. Idempotent.
func (s *Subscription) Cancel() {
	s.once.Do(func() {
		reply := make(chan struct{}, 1)
		_, _ = ask(context.Background(), s.in, &unsubscribeReq{pid: s.pid, reply: reply}, reply)
		close(s.done)
		_ = s.in.root.StopFuture(s.pid).Wait()
	})
}

// The supervision actor's own messages (local values).
type (
	snapshotReq  struct{ reply chan<- Snapshot }
	statsReq     struct{ reply chan<- Stats }
	subscribeReq struct {
		pid   *actor.PID
		reply chan<- Snapshot
	}
	unsubscribeReq struct {
		pid   *actor.PID
		reply chan<- struct{}
	}
)

// eventBatch is how many lifecycle events wait, with nobody subscribed, before
// they wake the inspector (StartInspector): at most ~100 KB of events held, one
// wake per 1,024 events. With 256, the batch's wake and run beside the registry
// kept KillToSettled's p99 at 12–15 µs (idle, the benchmark's refill query not
// draining them); with 1,024, 9.3 µs, as with no inspector at all.
const eventBatch = 1024

// isEvent reports whether msg is a lifecycle event (Emit, EmitJob): the messages
// that may wait in the inspector's mailbox.
func isEvent(msg any) bool {
	switch msg.(type) {
	case *Event, *JobSpawned, *JobSettled, *JobStopped, *JobEnded:
		return true
	}
	return false
}

// subscriber is a follower: a Go subscription's actor (sent *Event) or a wire
// client (sent *messages.LifecycleEvent).
type subscriber struct {
	pid  *actor.PID
	wire bool
}

// inspectorActor owns the Tree, the subscribers and the refused events; everything
// here is touched only inside Receive.
type inspectorActor struct {
	cfg        InspectorConfig
	tree       *Tree
	subs       map[string]*subscriber // by PID id
	order      []*subscriber          // subscription order: fan-out order
	rejected   uint64
	rejections []Rejection
	gone       chan struct{}
	mailbox    *mailbox.Mailbox // its own: eager while anyone subscribes
}

func (a *inspectorActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *Event:
		a.apply(c, *m, m)
	case *JobSpawned:
		a.apply(c, m.Event(), nil)
	case *JobSettled:
		a.apply(c, m.Event(), nil)
	case *JobStopped:
		a.apply(c, m.Event(), nil)
	case *JobEnded:
		a.apply(c, m.Settled.Event(), nil)
		a.apply(c, m.Stopped.Event(), nil)
	case *snapshotReq:
		m.reply <- a.tree.Snapshot()
	case *statsReq:
		m.reply <- Stats{Applied: a.tree.Seq(), Rejected: a.rejected,
			Rejections: append([]Rejection(nil), a.rejections...), Subscribers: len(a.order)}
	case *subscribeReq:
		a.subscribe(c, m.pid, false)
		m.reply <- a.tree.Snapshot()
	case *unsubscribeReq:
		a.unsubscribe(c, m.pid)
		m.reply <- struct{}{}
	case *messages.TreeSnapshotRequest:
		c.Respond(a.tree.Snapshot().Proto())
	case *messages.TreeSubscribe:
		if s := c.Sender(); s != nil && a.subs[s.Id] == nil {
			a.subscribe(c, s, true)
			c.Send(s, a.tree.Snapshot().Proto())
		}
	case *messages.TreeUnsubscribe:
		if s := c.Sender(); s != nil {
			a.unsubscribe(c, s)
		}
	case *actor.Terminated:
		a.unsubscribe(c, m.Who)
	case *actor.Stopping:
		// Go subscriptions deliver what is queued, then stop (closing their channel).
		for _, s := range a.order {
			if !s.wire {
				c.Poison(s.pid)
			}
		}
	case *actor.Stopped:
		close(a.gone)
	}
}

// apply numbers e, applies it and forwards it to every subscriber; a refused event
// is logged and kept for Stats. msg, when not nil, is the sender's message e was
// read from, handed over: it is numbered in place and goes to every Go subscriber
// (read-only). A compact job event has none: one copy is made for the Go
// subscribers, only when there are some.
func (a *inspectorActor) apply(c actor.Context, e Event, msg *Event) {
	e.Seq = a.tree.Seq() + 1
	e.At = a.cfg.Clock()
	if err := a.tree.Apply(e); err != nil {
		e.Seq = 0
		a.rejected++
		if len(a.rejections) < maxRejections {
			a.rejections = append(a.rejections, Rejection{Event: e, Err: err})
		}
		a.cfg.Logger.Warn(fmt.Sprintf("supervision: lifecycle event refused: %s", err.Error()))
		return
	}
	var wire *messages.LifecycleEvent
	var shared *Event // written once, before the first subscriber may read it
	for _, s := range a.order {
		if !s.wire {
			if shared == nil {
				if msg != nil {
					*msg = e
					shared = msg
				} else {
					cp := e
					shared = &cp
				}
			}
			c.Send(s.pid, shared)
			continue
		}
		if wire == nil {
			wire = e.Proto()
		}
		c.Send(s.pid, wire)
	}
}

func (a *inspectorActor) subscribe(c actor.Context, pid *actor.PID, wire bool) {
	s := &subscriber{pid: pid, wire: wire}
	a.subs[pid.Id] = s
	a.order = append(a.order, s)
	a.mailbox.SetEager(true)
	c.Watch(pid)
}

func (a *inspectorActor) unsubscribe(c actor.Context, pid *actor.PID) {
	s := a.subs[pid.Id]
	if s == nil {
		return
	}
	delete(a.subs, pid.Id)
	for i, x := range a.order {
		if x == s {
			a.order = append(a.order[:i:i], a.order[i+1:]...)
			break
		}
	}
	a.mailbox.SetEager(len(a.order) > 0)
	c.Unwatch(pid)
}

// subscriptionActor hands the events of one Go subscription to its reader, one at
// a time: its mailbox (unbounded) is the queue. It blocks on the reader, so it runs
// on protoactor's goroutine-per-run dispatcher, never on a shared worker; done
// (Cancel) unblocks it. Only it sends on out, and it closes out when it stops.
type subscriptionActor struct {
	out  chan<- Event
	done <-chan struct{}
}

func (s *subscriptionActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *Event:
		select {
		case s.out <- *m:
		case <-s.done:
		}
	case *actor.Stopped:
		close(s.out)
	}
}
