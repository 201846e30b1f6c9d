package subagent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/scope"
	"github.com/troupe-rt/troupe/supervision"
)

// Event types (SPEC §5.1, §5.3).
const (
	EventProviderAdded   = "subagent/provider-added"
	EventProviderRemoved = "subagent/provider-removed"
	EventStart           = "subagent/start"
	EventEnd             = "subagent/end"
)

// Event is a lifecycle event of the seam.
type Event struct {
	Type       string
	Provider   string
	RunID      string // minted by the runtime
	ID         string // the run's id
	Local      bool
	StopReason string // end only
	// LastAssistantMessage is the run's output text (end only; "" when none).
	LastAssistantMessage string
	// Parent names the delegating agent (start/end); the zero AgentRef for provider
	// events. It is a name, not the agent's handle: a listener learns who delegated
	// and gains no authority to act as it (docs/THREAT-MODEL.md).
	Parent AgentRef
	// Registered is the provider itself (provider-added only), so a listener — which
	// runs on the runtime actor and must not ask it — can check its capabilities.
	Registered Provider
}

// AgentRef names an agent instance without granting anything: its session and its
// owner actor's PID (unique per incarnation), plus the scope chain the event is
// routed along to scoped listeners.
type AgentRef struct {
	Session string
	PID     *actor.PID
	chain   []scope.ID
}

// RefOf names a (nil: the zero AgentRef).
func RefOf(a *owner.Agent) AgentRef {
	if a == nil {
		return AgentRef{}
	}
	return AgentRef{Session: a.Session(), PID: a.PID(), chain: a.Scope().Chain()}
}

// Is reports whether r names a.
func (r AgentRef) Is(a *owner.Agent) bool {
	return a != nil && r.PID != nil && r.PID.Equal(a.PID())
}

func (r AgentRef) String() string {
	if r.PID == nil {
		return "no agent"
	}
	return fmt.Sprintf("agent %q (%s)", r.Session, r.PID.Id)
}

// Listener observes events. It runs on the runtime actor: it must not block and
// must not call the Runtime. A panic is contained and logged — except from a
// provider-added listener, whose panic rolls the registration back (and announces
// provider-removed, so listeners that heard it added do not keep a stale view).
type Listener func(Event)

const maxSafeInteger = 1<<53 - 1

// Runtime is the provider registry and the start path. Its state lives in the
// subagent-runtime actor; a Runtime is a handle to it, safe for concurrent use.
type Runtime struct {
	root   *actor.RootContext
	pid    *actor.PID
	global *scope.Scope
	runs   atomic.Uint64
	tokens atomic.Uint64
	gone   chan struct{} // closed once the actor has stopped
}

// NewRuntime spawns the runtime actor. global is the scope whose listeners hear
// every event (the system's global scope).
func NewRuntime(system *actor.ActorSystem, global *scope.Scope, logger *slog.Logger) (*Runtime, error) {
	if logger == nil {
		logger = slog.Default()
	}
	rt := &Runtime{root: system.Root, global: global, gone: make(chan struct{})}
	a := &runtimeActor{global: global.ID(), logger: logger, providers: map[string]*providerEntry{}, listeners: map[scope.ID][]*listenerEntry{},
		inspector: supervision.InspectorOf(system)}
	pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return a }), "subagent-runtime")
	if err != nil {
		return nil, err
	}
	rt.pid = pid
	if _, err := global.Add("subagent-runtime.stop()", func(ctx context.Context) error {
		defer close(rt.gone)
		return system.Root.StopFuture(pid).Wait()
	}); err != nil {
		_ = system.Root.StopFuture(pid).Wait()
		return nil, err
	}
	return rt, nil
}

// errStopped answers requests once the runtime has stopped.
var errStopped = &messages.Error{Code: messages.CodeStopped, Message: "subagent runtime is stopped"}

// ask sends msg and waits for its one reply: a reply already there wins over the
// runtime's stop and ctx's end; an ended ctx sends nothing and answers job/aborted
// (errors.Is ctx's error too).
func (rt *Runtime) ask(ctx context.Context, msg any, reply chan any) any {
	if ctx.Err() != nil {
		return job.Aborted(ctx)
	}
	rt.root.Send(rt.pid, msg)
	var err error
	select {
	case v := <-reply:
		return v
	case <-rt.gone:
		err = errStopped
	case <-ctx.Done():
		err = job.Aborted(ctx)
	}
	select {
	case v := <-reply:
		return v
	default:
		return err
	}
}

// RegisterProvider registers p in sc. A duplicate name fails with
// DUPLICATE_PROVIDER; a provider-added listener that panics rolls it back. The
// returned effect (or disposing sc) removes it; runs already started go on.
func (rt *Runtime) RegisterProvider(ctx context.Context, sc *scope.Scope, p Provider) (*scope.Effect, error) {
	token := rt.tokens.Add(1)
	reply := make(chan any, 1)
	if err, _ := rt.ask(ctx, &registerReq{p: p, token: token, reply: reply}, reply).(error); err != nil {
		if errors.Is(err, messages.ErrAborted) {
			// The request may have been taken up: undo it behind it (same sender,
			// so in order), without waiting on an actor that may be stuck.
			rt.root.Send(rt.pid, &unregisterReq{name: p.Name(), token: token, reply: make(chan any, 1)})
		}
		return nil, err
	}
	eff, err := sc.Add("subagent.provider("+p.Name()+")", func(dctx context.Context) error {
		reply := make(chan any, 1)
		rt.ask(dctx, &unregisterReq{name: p.Name(), token: token, reply: reply}, reply)
		return nil
	})
	if err != nil {
		reply := make(chan any, 1)
		rt.ask(context.WithoutCancel(ctx), &unregisterReq{name: p.Name(), token: token, reply: reply}, reply)
		return nil, err
	}
	return eff, nil
}

// Provider returns the provider registered under name, or nil.
func (rt *Runtime) Provider(ctx context.Context, name string) Provider {
	reply := make(chan any, 1)
	p, _ := rt.ask(ctx, &lookupReq{name: name, reply: reply}, reply).(Provider)
	return p
}

// List returns the registered provider names in insertion order.
func (rt *Runtime) List(ctx context.Context) []string {
	reply := make(chan any, 1)
	names, _ := rt.ask(ctx, &listReq{reply: reply}, reply).([]string)
	return names
}

// ListenerLayers returns how many scopes hold listeners: a diagnostic for leak
// checks (a disposed scope leaves none).
func (rt *Runtime) ListenerLayers(ctx context.Context) int {
	reply := make(chan any, 1)
	n, _ := rt.ask(ctx, &layersReq{reply: reply}, reply).(int)
	return n
}

type layersReq struct{ reply chan any }

// Listen registers a listener in sc. Every listener hears the provider events, in
// registration order; a global-scope listener hears every start/end event, one in
// another scope those of parents composed under it.
func (rt *Runtime) Listen(ctx context.Context, sc *scope.Scope, l Listener) (*scope.Effect, error) {
	token := rt.tokens.Add(1)
	reply := make(chan any, 1)
	if err, _ := rt.ask(ctx, &listenReq{scope: sc.ID(), token: token, fn: l, reply: reply}, reply).(error); err != nil {
		if errors.Is(err, messages.ErrAborted) {
			rt.root.Send(rt.pid, &unlistenReq{token: token, reply: make(chan any, 1)}) // as in RegisterProvider
		}
		return nil, err
	}
	eff, err := sc.Add("subagent.listen()", func(dctx context.Context) error {
		reply := make(chan any, 1)
		rt.ask(dctx, &unlistenReq{token: token, reply: reply}, reply)
		return nil
	})
	if err != nil {
		reply := make(chan any, 1)
		rt.ask(context.WithoutCancel(ctx), &unlistenReq{token: token, reply: reply}, reply)
		return nil, err
	}
	return eff, nil
}

// Resolve runs SPEC §5.2's checks 1–4 and computes the child depth and descriptor.
func (rt *Runtime) Resolve(ctx context.Context, name string, req Request) (Provider, ResolvedRequest, error) {
	if ctx.Err() != nil {
		return nil, ResolvedRequest{}, job.Aborted(ctx)
	}
	p := rt.Provider(ctx, name)
	if p == nil {
		if ctx.Err() != nil {
			return nil, ResolvedRequest{}, job.Aborted(ctx)
		}
		return nil, ResolvedRequest{}, messages.Errorf(CodeNoProvider, "no subagent provider registered for %q", name)
	}
	var caps Capabilities
	if err := protect(func() error { caps = p.Capabilities(); return nil }); err != nil {
		return nil, ResolvedRequest{}, err
	}
	for _, c := range []struct {
		name      string
		requested bool
		has       bool
	}{
		{"outputSchema", len(req.OutputSchema) > 0, caps.OutputSchema},
		{"depthLimit", req.MaxDepth != nil, caps.DepthLimit},
		{"toolFilter", req.ToolFilter != nil, caps.ToolFilter},
		{"persona", req.Persona != "", caps.Persona},
	} {
		if c.requested && !c.has {
			return nil, ResolvedRequest{}, messages.Errorf(CodeUnsupportedCapability,
				"subagent provider %q does not support the %q capability", name, c.name)
		}
	}
	if m := req.MaxDepth; m != nil && (*m < 0 || *m > maxSafeInteger) {
		return nil, ResolvedRequest{}, ErrInvalidMaxDepth
	}
	return p, ResolvedRequest{
		Request:    req,
		Depth:      max(req.Parent.Depth, req.Parent.SubagentDepth) + 1,
		Descriptor: Descriptor{Version: 2, Mode: "one-shot", Provider: name, Label: req.Label},
	}, nil
}

// Start is a one-shot delegation (SPEC §5.2): the checks, then the provider's
// start. On success the run is published: subagent/start is emitted, and
// subagent/end follows once its result settles. parent may be nil.
func (rt *Runtime) Start(ctx context.Context, name string, req Request, parent *owner.Agent) (*Run, error) {
	// The checks do not end with ctx: a cancelled start is the provider's to answer
	// (SPEC §5.2: CANCELLED, and a provider may still start and dispose a stray run).
	p, resolved, err := rt.Resolve(context.WithoutCancel(ctx), name, req)
	if err != nil {
		return nil, err
	}
	var run *Run
	if err := protect(func() (err error) { run, err = p.Start(ctx, resolved); return err }); err != nil {
		return nil, err
	}
	if run == nil {
		return nil, fmt.Errorf("subagent provider %q returned no run", name)
	}
	ev := Event{Provider: name, RunID: "run-" + strconv.FormatUint(rt.runs.Add(1), 10), ID: run.ID(), Local: run.Local(), Parent: RefOf(parent)}
	start := ev
	start.Type = EventStart
	rt.root.Send(rt.pid, &emit{ev: start})
	go func() {
		<-run.Done()
		res, _ := run.Result(context.Background())
		end := ev
		end.Type, end.StopReason, end.LastAssistantMessage = EventEnd, res.StopReason, res.Text()
		rt.root.Send(rt.pid, &emit{ev: end})
	}()
	return run, nil
}

// Emit publishes a start or end event for children that do not run through Start:
// the continuation manager's activations (SPEC §5.3, case 154). An event without a
// RunID gets one minted here; the event as published is returned, so the matching
// end can carry the same RunID. Listeners hear it as they hear Start's events.
func (rt *Runtime) Emit(ev Event) Event {
	if ev.RunID == "" {
		ev.RunID = "run-" + strconv.FormatUint(rt.runs.Add(1), 10)
	}
	rt.root.Send(rt.pid, &emit{ev: ev})
	return ev
}

type (
	registerReq struct {
		p     Provider
		token uint64
		reply chan any
	}
	unregisterReq struct {
		name  string
		token uint64
		reply chan any
	}
	lookupReq struct {
		name  string
		reply chan any
	}
	listReq   struct{ reply chan any }
	listenReq struct {
		scope scope.ID
		token uint64
		fn    Listener
		reply chan any
	}
	unlistenReq struct {
		token uint64
		reply chan any
	}
	emit struct{ ev Event }
)

type providerEntry struct {
	p     Provider
	token uint64
}

type listenerEntry struct {
	token uint64
	fn    Listener
}

// runtimeActor owns the provider table and the listener layers.
type runtimeActor struct {
	global    scope.ID
	logger    *slog.Logger
	providers map[string]*providerEntry
	order     []string
	listeners map[scope.ID][]*listenerEntry
	inspector *actor.PID // the supervision tree's, or nil
}

func (a *runtimeActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *registerReq:
		name := m.p.Name()
		if a.providers[name] != nil {
			m.reply <- messages.Errorf(CodeDuplicateProvider, "a subagent provider named %q is already registered", name)
			return
		}
		a.providers[name] = &providerEntry{p: m.p, token: m.token}
		a.order = append(a.order, name)
		if err := a.fire(Event{Type: EventProviderAdded, Provider: name, Registered: m.p}, true); err != nil {
			a.remove(name)
			_ = a.fire(Event{Type: EventProviderRemoved, Provider: name}, false)
			m.reply <- err
			return
		}
		m.reply <- nil
	case *unregisterReq:
		if e := a.providers[m.name]; e != nil && e.token == m.token {
			a.remove(m.name)
			_ = a.fire(Event{Type: EventProviderRemoved, Provider: m.name}, false)
		}
		m.reply <- nil
	case *lookupReq:
		if e := a.providers[m.name]; e != nil {
			m.reply <- e.p
			return
		}
		m.reply <- nil
	case *listReq:
		m.reply <- append([]string(nil), a.order...)
	case *layersReq:
		m.reply <- len(a.listeners)
	case *listenReq:
		a.listeners[m.scope] = append(a.listeners[m.scope], &listenerEntry{token: m.token, fn: m.fn})
		m.reply <- nil
	case *unlistenReq:
		for id, ls := range a.listeners {
			for i, l := range ls {
				if l.token == m.token {
					if len(ls) == 1 {
						delete(a.listeners, id) // nothing kept for a scope with no listener
					} else {
						a.listeners[id] = append(ls[:i:i], ls[i+1:]...)
					}
				}
			}
		}
		m.reply <- nil
	case *emit:
		_ = a.fire(m.ev, false)
	case *actor.Started:
		supervision.Emit(c, a.inspector, supervision.Event{Kind: supervision.Spawned,
			Node: supervision.Ref{Kind: supervision.KindSubagentRuntime, ID: c.Self().Id}, Actor: c.Self().Id})
	case *actor.Stopped:
		supervision.Emit(c, a.inspector, supervision.Event{Kind: supervision.Stopped,
			Node: supervision.Ref{Kind: supervision.KindSubagentRuntime, ID: c.Self().Id}, Cause: supervision.CauseTeardown})
	}
}

func (a *runtimeActor) remove(name string) {
	delete(a.providers, name)
	for i, n := range a.order {
		if n == name {
			a.order = append(a.order[:i:i], a.order[i+1:]...)
			break
		}
	}
}

// fire calls the listeners that hear ev: for a start/end event those of its layers
// (the global layer, then the parent's scope chain); for a provider event every
// listener, in registration order. With strict, the first panic stops and is
// returned.
func (a *runtimeActor) fire(ev Event, strict bool) error {
	var ls []*listenerEntry
	if ev.Type == EventProviderAdded || ev.Type == EventProviderRemoved {
		for _, layer := range a.listeners {
			ls = append(ls, layer...)
		}
		slices.SortFunc(ls, func(x, y *listenerEntry) int { return cmp.Compare(x.token, y.token) })
	} else {
		ls = append(ls, a.listeners[a.global]...)
		if ev.Parent.PID != nil {
			for _, id := range ev.Parent.chain {
				if id != a.global {
					ls = append(ls, a.listeners[id]...)
				}
			}
		}
	}
	for _, l := range ls {
		if err := call(l.fn, ev); err != nil {
			if strict {
				return err
			}
			a.logger.Warn(fmt.Sprintf("subagent: %s listener threw: %s", ev.Type, err.Error()))
		}
	}
	return nil
}

func call(fn Listener, ev Event) error {
	return protect(func() error { fn(ev); return nil })
}
