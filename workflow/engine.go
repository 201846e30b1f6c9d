package workflow

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/dop251/goja"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/scope"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/supervision"
)

// Host is what the engine needs from the system it runs in: the pieces, not the
// system (the facade fills it; this package does not import the facade).
type Host struct {
	// Actors runs the engine actor and every run's actors.
	Actors *actor.ActorSystem
	// Scope is the global scope: the engine actor lives until it is disposed, and
	// disposing it cancels and disposes every live run first ("workflow engine
	// stopped"). A listener registered in it hears every run.
	Scope *scope.Scope
	// Inspector receives the engine's and the runs' lifecycle events (nil: none).
	Inspector *actor.PID
	// Logger receives the engine's warnings (nil: slog.Default()).
	Logger *slog.Logger
}

// Engine runs workflow scripts (WORKFLOW.md 3). Its state lives in the
// workflow-engine actor; an Engine is a handle to it, safe for concurrent use.
type Engine struct {
	root      *actor.RootContext
	pid       *actor.PID
	sc        *scope.Scope
	rt        *subagent.Runtime
	lim       limits
	logger    *slog.Logger
	inspector *actor.PID
	tokens    atomic.Uint64
	gone      chan struct{} // closed once the engine actor has stopped
}

// NewEngine starts an engine: children start through rt; disposing sc stops new
// starts (runs already returned go on, holder-owned); disposing h.Scope (the
// system's shutdown) cancels and disposes every live run, then stops the engine.
func NewEngine(h Host, sc *scope.Scope, rt *subagent.Runtime, cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if h.Actors == nil || h.Scope == nil || sc == nil || rt == nil {
		return nil, messages.Errorf(messages.CodeInvalidConfig, "workflow.NewEngine needs an actor system, the global scope, the engine's scope and a subagent runtime")
	}
	logger := h.Logger
	if logger == nil {
		logger = slog.Default()
	}
	e := &Engine{root: h.Actors.Root, sc: sc, rt: rt, lim: cfg.resolve(), logger: logger, inspector: h.Inspector, gone: make(chan struct{})}
	ea := &engineActor{e: e, global: h.Scope.ID(), listeners: map[scope.ID][]*listenerEntry{}, runs: map[string]*runEntry{}}
	// resume under its guardian: each message is applied whole (a listener's panic is
	// contained), and a restart would forget the live runs and every listener
	props := actor.PropsFromProducer(func() actor.Actor { return ea },
		actor.WithGuardian(actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.ResumeDirective })),
		actor.WithSupervisor(actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })))
	pid := h.Actors.Root.SpawnPrefix(props, "workflow-engine-")
	e.pid = pid
	if _, err := h.Scope.Add("workflow-engine.stop()", e.shutdown); err != nil {
		_ = h.Actors.Root.StopFuture(pid).Wait()
		close(e.gone)
		return nil, err
	}
	return e, nil
}

func (e *Engine) shutdown(ctx context.Context) error {
	reply := make(chan struct{})
	e.root.Send(e.pid, &shutdownReq{reply: reply})
	select {
	case <-reply:
	case <-ctx.Done():
	}
	err := e.root.StopFuture(e.pid).Wait()
	close(e.gone)
	return err
}

// Request is one run's request (WORKFLOW.md 3.2).
type Request struct {
	Script           string
	Meta             json.RawMessage // JSON data, validated (WORKFLOW.md 2.8)
	Args             json.RawMessage // nil: the script's args is undefined
	SubagentProvider *string         // nil: Config.Provider; invisible to the script
	MaxTotalAgents   *int64          // nil: the engine ceiling; may lower, never raise
	Parent           *owner.Agent    // required: every child is attributed to it
	ParentInfo       subagent.Parent // depth/history for child requests; empty Session: Parent.Session()
	Observe          func(Event)     // optional: this run's events, on the engine actor, before listeners
}

// Prepared is a request that passed every synchronous check; nothing is published
// until Launch.
type Prepared struct {
	e        *Engine
	req      Request
	meta     Meta
	prog     *goja.Program
	provider string
	maxTotal int64

	mu  sync.Mutex // guards run: the first Launch's result
	run *Run
}

// Meta is the normalized meta.
func (p *Prepared) Meta() Meta { return p.meta.clone() }

// Start is Prepare then Launch.
func (e *Engine) Start(ctx context.Context, req Request) (*Run, error) {
	p, err := e.Prepare(req)
	if err != nil {
		return nil, err
	}
	return p.Launch(ctx)
}

func isJSSpace(r rune) bool { return unicode.IsSpace(r) || r == '\uFEFF' }

// Prepare runs every synchronous check of WORKFLOW.md 3.3, in order, and publishes nothing.
func (e *Engine) Prepare(req Request) (*Prepared, error) {
	if e.sc.Disposed() || e.stopped() {
		return nil, errEngineStopped
	}
	if req.Parent == nil {
		return nil, newErr(CodeInvalidArgument, "workflow parent agent is required")
	}
	meta, err := validateMeta(req.Meta)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(strings.TrimLeftFunc(req.Script, isJSSpace), "export const meta") {
		return nil, newErr(CodeScriptParse, "workflow meta rides the `meta` request field, not the script: remove the `export const meta = {...}` statement from the body")
	}
	prog, err := goja.Compile("workflow:"+meta.Name, "(async () => {"+req.Script+"\n})()", false)
	if err != nil {
		return nil, newErr(CodeScriptParse, "workflow script does not parse: "+err.Error())
	}
	provider := e.lim.provider
	if req.SubagentProvider != nil {
		provider = *req.SubagentProvider
	}
	if provider == "" || strings.TrimFunc(provider, isJSSpace) != provider {
		return nil, newErr(CodeInvalidArgument, "workflow subagentProvider must be a non-empty normalized string")
	}
	if e.rt.Provider(context.Background(), provider) == nil {
		return nil, newErr(CodeAgentStart, "no subagent provider registered for \""+provider+"\"")
	}
	maxTotal := e.lim.maxTotal
	if m := req.MaxTotalAgents; m != nil {
		if *m < 1 || *m > maxSafeInteger {
			return nil, newErr(CodeInvalidArgument, "workflow maxTotalAgents must be a positive safe integer")
		}
		if *m > e.lim.maxTotal {
			return nil, newErr(CodeInvalidArgument, "workflow maxTotalAgents "+strconv.FormatInt(*m, 10)+" exceeds the engine ceiling "+strconv.FormatInt(e.lim.maxTotal, 10))
		}
		maxTotal = *m
	}
	if req.Args != nil {
		var v any
		if err := json.Unmarshal(req.Args, &v); err != nil {
			return nil, newErr(CodeInvalidArgument, "workflow args must be JSON data: "+err.Error())
		}
	}
	if req.ParentInfo.Session == "" {
		req.ParentInfo.Session = req.Parent.Session()
	}
	return &Prepared{e: e, req: req, meta: meta, prog: prog, provider: provider, maxTotal: maxTotal}, nil
}

func (e *Engine) stopped() bool {
	select {
	case <-e.gone:
		return true
	default:
		return false
	}
}

// Launch mints the run id, dispatches workflow/start, spawns the run and script
// actors and returns at once. It fails only with troupe/stopped; a second Launch
// returns the first run. ctx is the run's cancel signal (not stored): done already,
// the body never runs ("workflow start signal already aborted"); ending later,
// "workflow signal aborted".
func (p *Prepared) Launch(ctx context.Context) (*Run, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.run != nil {
		return p.run, nil
	}
	e := p.e
	if e.sc.Disposed() {
		return nil, errEngineStopped
	}
	aborted := ctx.Err() != nil
	reply := make(chan any, 1)
	e.root.Send(e.pid, &launchReq{p: p, aborted: aborted, reply: reply})
	var v any
	select {
	case v = <-reply:
	case <-e.gone:
		return nil, errEngineStopped
	}
	if err, ok := v.(error); ok {
		return nil, err
	}
	run := v.(*Run)
	if !aborted {
		pid, root := run.pid, e.root
		stop := context.AfterFunc(ctx, func() { root.Send(pid, &ctxEnded{}) })
		root.Send(pid, &watchStop{stop: stop})
	}
	p.run = run
	return run, nil
}

// Listen registers fn in sc (WORKFLOW.md 4.3): in the global scope it hears every
// run, in another scope the runs whose parent agent is composed under it. fn runs
// on the engine actor, one call at a time: it must not block or call the engine,
// and must not mutate the borrowed event. A panic is contained and logged.
func (e *Engine) Listen(sc *scope.Scope, fn func(Event)) (*scope.Effect, error) {
	token := e.tokens.Add(1)
	e.ask(&listenReq{scope: sc.ID(), token: token, fn: fn, reply: make(chan struct{})})
	eff, err := sc.Add("workflow.listen()", func(context.Context) error {
		e.ask(&unlistenReq{token: token, reply: make(chan struct{})})
		return nil
	})
	if err != nil {
		e.ask(&unlistenReq{token: token, reply: make(chan struct{})})
		return nil, err
	}
	return eff, nil
}

type replier interface{ replyTo() chan struct{} }

func (e *Engine) ask(m replier) {
	e.root.Send(e.pid, m)
	select {
	case <-m.replyTo():
	case <-e.gone:
	}
}

type (
	launchReq struct {
		p       *Prepared
		aborted bool
		reply   chan any
	}
	dispatchEv struct {
		h      *Run
		parent *owner.Agent
		ev     Event
	}
	listenReq struct {
		scope scope.ID
		token uint64
		fn    func(Event)
		reply chan struct{}
	}
	unlistenReq struct {
		token uint64
		reply chan struct{}
	}
	shutdownReq struct{ reply chan struct{} }
)

func (m *listenReq) replyTo() chan struct{}   { return m.reply }
func (m *unlistenReq) replyTo() chan struct{} { return m.reply }

type listenerEntry struct {
	token uint64
	fn    func(Event)
}

type runEntry struct {
	h          *Run
	observe    func(Event)
	info       RunInfo
	parent     *owner.Agent
	ended      bool // workflow/end was dispatched
	terminated bool // the run actor has stopped
}

// engineActor owns the listeners by scope layer, the live runs and the stopping
// flag. Its children are the run actors (stop directive).
type engineActor struct {
	e         *Engine
	global    scope.ID
	listeners map[scope.ID][]*listenerEntry
	runs      map[string]*runEntry
	byPID     map[string]string // run actor id → run id
	stopping  bool
	waiters   []chan struct{}
}

func (a *engineActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.byPID = map[string]string{}
		supervision.Emit(c, a.e.inspector, supervision.Event{Kind: supervision.Spawned,
			Node: supervision.Ref{Kind: KindEngine, ID: c.Self().Id}, Actor: c.Self().Id})
	case *actor.Stopped:
		supervision.Emit(c, a.e.inspector, supervision.Event{Kind: supervision.Stopped,
			Node: supervision.Ref{Kind: KindEngine, ID: c.Self().Id}, Cause: supervision.CauseTeardown})
	case *launchReq:
		m.reply <- a.launch(c, m)
	case *dispatchEv:
		r := a.runs[m.h.id]
		if r == nil || r.ended {
			return
		}
		a.dispatch(r, m.ev)
		if m.ev.Type == EventEnd {
			r.ended = true
			close(m.h.endDelivered)
			if r.terminated {
				delete(a.runs, m.h.id)
				a.checkStopped()
			}
		}
	case *listenReq:
		a.listeners[m.scope] = append(a.listeners[m.scope], &listenerEntry{token: m.token, fn: m.fn})
		close(m.reply)
	case *unlistenReq:
		for id, ls := range a.listeners {
			for i, l := range ls {
				if l.token == m.token {
					a.listeners[id] = append(ls[:i:i], ls[i+1:]...)
					break
				}
			}
		}
		close(m.reply)
	case *shutdownReq:
		a.stopping = true
		a.waiters = append(a.waiters, m.reply)
		for _, r := range a.runs {
			r.h.Cancel("workflow engine stopped")
			r.h.dispose.Do(func() { c.Send(r.h.pid, &disposeReq{}) })
		}
		a.checkStopped()
	case *actor.Terminated:
		if id, ok := a.byPID[m.Who.Id]; ok {
			delete(a.byPID, m.Who.Id)
			// its workflow/end may still be queued behind this system message
			if r := a.runs[id]; r != nil && !r.ended {
				r.terminated = true
				return
			}
			delete(a.runs, id)
			a.checkStopped()
		}
	}
}

func (a *engineActor) checkStopped() {
	if a.stopping && len(a.runs) == 0 {
		for _, w := range a.waiters {
			close(w)
		}
		a.waiters = nil
	}
}

func (a *engineActor) launch(c actor.Context, m *launchReq) any {
	p, e := m.p, a.e
	if a.stopping || e.sc.Disposed() {
		return errEngineStopped
	}
	id := newUUID()
	h := &Run{id: id, meta: p.meta, root: c.ActorSystem().Root, done: make(chan struct{}),
		disposed: make(chan struct{}), endDelivered: make(chan struct{}), engineGone: e.gone}
	info := RunInfo{ID: id, Meta: p.meta, Parent: p.req.Parent.Session()}
	r := &runEntry{h: h, observe: p.req.Observe, info: info, parent: p.req.Parent}
	a.runs[id] = r
	a.dispatch(r, Event{Type: EventStart})
	ra := newRunActor(runConfig{
		h: h, engine: c.Self(), rt: e.rt, provider: p.provider, parent: p.req.Parent, parentInfo: p.req.ParentInfo,
		grace: e.lim.grace, aborted: m.aborted, logger: e.logger, inspector: e.inspector,
		script: scriptConfig{runID: id, prog: p.prog, args: p.req.Args, maxTotal: p.maxTotal, maxItems: e.lim.maxItems,
			concurrency: e.lim.concurrency(), timeoutMs: e.lim.syncTimeoutMs, budget: &budget{limit: e.lim.syncTimeout},
			inspector: e.inspector, session: p.req.Parent.Session()},
	})
	props := actor.PropsFromProducer(func() actor.Actor { return ra }, actor.WithSupervisor(scriptSupervisor{ra}))
	pid, err := c.SpawnNamed(props, "workflow-run-"+id)
	if err != nil {
		delete(a.runs, id)
		return err
	}
	h.pid = pid
	a.byPID[pid.Id] = id
	return h
}

// dispatch calls the run's Observe, then the global listeners, then those of the
// parent's scope chain.
func (a *engineActor) dispatch(r *runEntry, ev Event) {
	ev.Run = r.info
	parent := r.parent
	fns := make([]func(Event), 0, 4)
	if r.observe != nil {
		fns = append(fns, r.observe)
	}
	for _, l := range a.listeners[a.global] {
		fns = append(fns, l.fn)
	}
	if parent != nil {
		for _, sid := range parent.Scope().Chain() {
			if sid != a.global {
				for _, l := range a.listeners[sid] {
					fns = append(fns, l.fn)
				}
			}
		}
	}
	for _, fn := range fns {
		if err := callListener(fn, ev); err != nil {
			a.e.logger.Warn("workflow: " + ev.Type + " listener threw: " + err.Error())
		}
	}
}

func callListener(fn func(Event), ev Event) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = errors.New(panicText(v))
		}
	}()
	fn(ev)
	return nil
}

// newUUID returns a random UUID v4 in lowercase canonical form.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
