package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/controller"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/scope"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/tools/jobtools"
	"github.com/troupe-rt/troupe/tools/workflowtool"
	"github.com/troupe-rt/troupe/troupetest"
	"github.com/troupe-rt/troupe/workflow"
)

const (
	testMeta  = `{"name":"test-flow","description":"a test workflow"}`
	auditMeta = `{"name":"audit","description":"audit the repo"}`
	budget    = 10 * time.Second
)

func i64(v int64) *int64   { return &v }
func str(v string) *string { return &v }
func boolp(v bool) *bool   { return &v }

// inbox is a delivery surface recording what reaches the agent.
type inbox struct{ msgs chan owner.Message }

func newInbox() *inbox                          { return &inbox{msgs: make(chan owner.Message, 64)} }
func (i *inbox) Inject(m owner.Message) error   { i.msgs <- m; return nil }
func (i *inbox) Steer(m owner.Message) error    { i.msgs <- m; return nil }
func (i *inbox) Followup(m owner.Message) error { i.msgs <- m; return nil }

// env is one test's system (WORKFLOW.md 6.0 fixtures): the agent registry, a
// subagent runtime with the stub provider, an engine (provider stub,
// MaxConcurrentAgents 8 unless changed), the job tools and the job controller,
// agent A (registered, with a recording surface) in a plugin scope, and a global
// listener that records every event and checks W45's invariants.
type env struct {
	t      *testing.T
	sys    *troupe.System
	logs   *troupetest.Logs
	rt     *subagent.Runtime
	eng    *workflow.Engine
	stub   *stub
	sc     *scope.Scope
	jobs   *jobtools.Mount
	ctl    *controller.Controller
	parent *owner.Agent
	inbox  *inbox
	events *recorder
	calls  int
}

func newEnv(t *testing.T, mutate ...func(*workflow.Config)) *env {
	t.Helper()
	sys, logs := troupetest.NewSystem(t)
	_, err := sys.Jobs().MountAgents(context.Background(), sys.Scope())
	require.NoError(t, err)
	rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), slog.New(logs))
	require.NoError(t, err)
	st := newStub("stub")
	_, err = rt.RegisterProvider(t.Context(), sys.Scope(), st)
	require.NoError(t, err)
	cfg := workflow.Config{Provider: str("stub"), MaxConcurrentAgents: i64(8)}
	for _, m := range mutate {
		m(&cfg)
	}
	eng, err := workflow.NewEngine(workflow.Host{Actors: sys.Actors(), Scope: sys.Scope(), Inspector: sys.Tree().PID(), Logger: slog.New(logs)},
		sys.Scope(), rt, cfg)
	require.NoError(t, err)
	sc, err := sys.Scope().Child("plugins")
	require.NoError(t, err)
	jobs, err := jobtools.MountIn(sys.Jobs(), sc, jobtools.Config{})
	require.NoError(t, err)
	ctl, err := sys.StartController(controller.Config{})
	require.NoError(t, err)
	in := newInbox()
	parent, err := sys.NewAgent(sc, "A", owner.Options{Surface: in})
	require.NoError(t, err)
	require.NoError(t, sys.Jobs().RegisterAgent(context.Background(), parent))
	e := &env{t: t, sys: sys, logs: logs, rt: rt, eng: eng, stub: st, sc: sc, jobs: jobs, ctl: ctl, parent: parent, inbox: in, events: newRecorder()}
	_, err = eng.Listen(sys.Scope(), e.events.hear)
	require.NoError(t, err)
	t.Cleanup(func() { require.Empty(t, e.events.violations(), "event invariant (W45) violations") })
	return e
}

// mount mounts the workflow tool in the plugin scope; jobMode gives it the job
// registry.
func (e *env) mount(cfg workflowtool.Config, jobMode bool, mutate ...func(*workflowtool.Deps)) *workflowtool.Mount {
	e.t.Helper()
	deps := workflowtool.Deps{Engine: e.eng, Logger: slog.New(e.logs)}
	if jobMode {
		deps.Jobs = e.sys.Jobs()
	}
	for _, m := range mutate {
		m(&deps)
	}
	m, err := workflowtool.MountIn(e.sc, cfg, deps)
	require.NoError(e.t, err)
	return m
}

func toolArgs(script, meta string, extra ...string) string {
	b, _ := json.Marshal(script)
	s := `{"script":` + string(b) + `,"meta":` + meta
	for _, x := range extra {
		s += "," + x
	}
	return s + "}"
}

// call runs tool as agent A through the job tools' pipeline.
func (e *env) call(ctx context.Context, tool tools.Tool, args string) tools.Result {
	e.calls++
	call := tools.Call{ID: "call-" + strconv.Itoa(e.calls), Name: tool.Name, Args: json.RawMessage(args),
		Caller: tools.AsAgent(e.parent)}
	return e.jobs.Pipeline().Run(ctx, tool, call)
}

// callAsync runs call in a goroutine; the result arrives on the channel.
func (e *env) callAsync(ctx context.Context, tool tools.Tool, args string) <-chan tools.Result {
	out := make(chan tools.Result, 1)
	e.calls++
	call := tools.Call{ID: "call-" + strconv.Itoa(e.calls), Name: tool.Name, Args: json.RawMessage(args),
		Caller: tools.AsAgent(e.parent)}
	go func() { out <- e.jobs.Pipeline().Run(ctx, tool, call) }()
	return out
}

func testCtx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), budget)
	t.Cleanup(cancel)
	return c
}

func resultText(t *testing.T, res tools.Result, wantErr bool) string {
	t.Helper()
	require.Equal(t, wantErr, res.IsError, "result %#v", res.Content)
	s, ok := res.SingleText()
	require.True(t, ok, "not one text block: %#v", res.Content)
	return s
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(budget):
		t.Fatal("nothing arrived")
		var zero T
		return zero
	}
}

// noNotice checks that no notice reached A: a round trip through A's owner actor
// orders the check after every notice the registry sent before.
func (e *env) noNotice() {
	e.t.Helper()
	_, err := e.parent.Stats(testCtx(e.t))
	require.NoError(e.t, err)
	select {
	case m := <-e.inbox.msgs:
		e.t.Fatalf("a notice reached A: %#v", m)
	default:
	}
}

func (e *env) request(script string) workflow.Request {
	return workflow.Request{Script: script, Meta: json.RawMessage(testMeta), Parent: e.parent}
}

// ---- the stub provider (WORKFLOW.md 6.0) ----

type stubMode int

const (
	auto stubMode = iota
	manual
)

type stub struct {
	name string
	caps subagent.Capabilities

	mu struct {
		sync.Mutex
		mode         stubMode
		deferred     bool
		ctxDeaf      bool
		failsOnAbort bool
		reply        func(req subagent.ResolvedRequest, index int) subagent.Result
		disposeErr   error
		disposePanic bool
		neverSettle  bool
		onCtx        func()
		starts       []*stubRun
		order        []string // "start <id>" / "dispose <id>"
	}
	changed chan struct{} // closed and replaced on every recorded change
}

type stubRun struct {
	index    int
	req      subagent.ResolvedRequest
	ctx      context.Context
	id       string
	run      *subagent.Run
	settle   func(subagent.Result, error)
	publish  chan error // deferred: the test publishes (nil) or rejects
	returned chan struct{}
	disposes int

	ctxErrAtStart error
}

func newStub(name string) *stub {
	s := &stub{name: name, caps: subagent.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true}, changed: make(chan struct{})}
	s.mu.reply = func(subagent.ResolvedRequest, int) subagent.Result { return text("stub reply") }
	return s
}

func text(s string) subagent.Result {
	return subagent.Result{Output: []tools.Block{{Type: "text", Text: s}}, StopReason: subagent.StopCompleted}
}

func (s *stub) set(f func(s *stub)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

func (s *stub) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *stub) Name() string                        { return s.name }
func (s *stub) Capabilities() subagent.Capabilities { return s.caps }
func (s *stub) InheritsParentContext() bool         { return false }

func (s *stub) Start(ctx context.Context, req subagent.ResolvedRequest) (*subagent.Run, error) {
	s.mu.Lock()
	r := &stubRun{index: len(s.mu.starts), req: req, ctx: ctx, ctxErrAtStart: ctx.Err(), publish: make(chan error, 1), returned: make(chan struct{})}
	r.id = s.name + "-run-" + strconv.Itoa(r.index+1)
	s.mu.starts = append(s.mu.starts, r)
	s.mu.order = append(s.mu.order, "start "+r.id)
	deferred, deaf, failsOnAbort, mode, reply := s.mu.deferred, s.mu.ctxDeaf, s.mu.failsOnAbort, s.mu.mode, s.mu.reply
	disposeErr, disposePanic, never, onCtx := s.mu.disposeErr, s.mu.disposePanic, s.mu.neverSettle, s.mu.onCtx
	s.notify()
	s.mu.Unlock()
	defer close(r.returned)
	if deferred {
		var err error
		if deaf {
			err = <-r.publish
		} else {
			select {
			case err = <-r.publish:
			case <-ctx.Done():
				err = errors.New("child start aborted before publication")
			}
		}
		if err != nil {
			return nil, err
		}
	}
	var settleOnDispose func(subagent.Result, error)
	run, settle := subagent.NewRun(r.id, false, func(context.Context) error {
		// a disposed run settles (the seam's contract), even one that "never settles"
		defer settleOnDispose(subagent.Result{StopReason: subagent.StopAborted}, nil)
		s.mu.Lock()
		r.disposes++
		s.mu.order = append(s.mu.order, "dispose "+r.id)
		s.notify()
		s.mu.Unlock()
		if disposePanic {
			panic(disposeErr.Error())
		}
		return disposeErr
	})
	settleOnDispose = settle
	s.mu.Lock()
	r.run, r.settle = run, settle
	s.notify()
	s.mu.Unlock()
	if onCtx != nil {
		context.AfterFunc(ctx, onCtx)
	}
	if !deaf && !never {
		context.AfterFunc(ctx, func() {
			if failsOnAbort {
				settle(subagent.Result{}, errors.New("backend crashed on abort"))
				return
			}
			settle(subagent.Result{StopReason: subagent.StopAborted}, nil)
		})
	}
	if mode == auto && !never {
		settle(reply(req, r.index), nil)
	}
	return run, nil
}

// finish settles r's run (waiting for its publication) with res or err.
func (s *stub) finish(t *testing.T, r *stubRun, res subagent.Result, err error) {
	t.Helper()
	var settle func(subagent.Result, error)
	s.await(t, "the stub run's publication", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		settle = r.settle
		return settle != nil
	})
	settle(res, err)
}

// runs returns the starts so far.
func (s *stub) runs() []*stubRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*stubRun(nil), s.mu.starts...)
}

func (s *stub) order() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.mu.order...)
}

func (s *stub) disposes(r *stubRun) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return r.disposes
}

// await waits until cond holds over the stub's state (re-checked on every change).
func (s *stub) await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// awaitStarts waits for n starts and returns them.
func (s *stub) awaitStarts(t *testing.T, n int) []*stubRun {
	t.Helper()
	s.await(t, fmt.Sprintf("%d stub starts", n), func() bool { return len(s.runs()) >= n })
	return s.runs()[:n]
}

// ---- the event recorder and W45's checker ----

type recorder struct {
	mu struct {
		sync.Mutex
		events []workflow.Event
		errs   []string
		starts map[string]*runCheck
		ended  map[string]bool
	}
	changed chan struct{}
}

type runCheck struct {
	meta   workflow.Meta
	agents map[int]workflow.AgentInfo
	open   map[int]bool
	starts int
}

func newRecorder() *recorder {
	r := &recorder{changed: make(chan struct{})}
	r.mu.starts = map[string]*runCheck{}
	r.mu.ended = map[string]bool{}
	return r
}

func metaJSON(m workflow.Meta) string { b, _ := json.Marshal(m); return string(b) }

// hear records ev and checks W45's invariants with DSH's messages.
func (r *recorder) hear(ev workflow.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer func() { close(r.changed); r.changed = make(chan struct{}) }()
	r.mu.events = append(r.mu.events, ev)
	bad := func(s string) { r.mu.errs = append(r.mu.errs, s) }
	id := ev.Run.ID
	if ev.Type == workflow.EventStart {
		if id == "" || ev.Run.Meta.Name == "" || ev.Run.Meta.Description == "" {
			bad("workflow/start id, meta.name, and meta.description must be non-empty")
		}
		if r.mu.starts[id] != nil {
			bad(fmt.Sprintf("workflow/start repeated run id %q", id))
		}
		r.mu.starts[id] = &runCheck{meta: ev.Run.Meta, agents: map[int]workflow.AgentInfo{}, open: map[int]bool{}}
		return
	}
	rc := r.mu.starts[id]
	if rc == nil || r.mu.ended[id] {
		bad(fmt.Sprintf("workflow event has no matching workflow/start for run %q", id))
		return
	}
	if metaJSON(rc.meta) != metaJSON(ev.Run.Meta) {
		bad(fmt.Sprintf("workflow event meta diverges from workflow/start for run %q", id))
	}
	switch ev.Type {
	case workflow.EventAgentStart:
		if ev.Agent.Seq < 1 || ev.Agent.ChildID == "" {
			bad("workflow/agent-start seq must be positive and childId must be non-empty")
		}
		if _, dup := rc.agents[ev.Agent.Seq]; dup {
			bad(fmt.Sprintf("workflow/agent-start repeated seq %d", ev.Agent.Seq))
		}
		rc.agents[ev.Agent.Seq] = ev.Agent
		rc.open[ev.Agent.Seq] = true
		rc.starts++
	case workflow.EventAgentEnd:
		a, ok := rc.agents[ev.Agent.Seq]
		if !ok || !rc.open[ev.Agent.Seq] {
			bad(fmt.Sprintf("workflow/agent-end has no matching start for seq %d", ev.Agent.Seq))
			return
		}
		if a.Label != ev.Agent.Label || a.ChildID != ev.Agent.ChildID || (a.Phase == nil) != (ev.Agent.Phase == nil) ||
			(a.Phase != nil && *a.Phase != *ev.Agent.Phase) {
			bad(fmt.Sprintf("workflow/agent-end identity diverges from workflow/agent-start for seq %d", ev.Agent.Seq))
		}
		delete(rc.open, ev.Agent.Seq)
	case workflow.EventEnd:
		if n := len(rc.open); n > 0 {
			bad(fmt.Sprintf("workflow/end has %d agent call(s) without workflow/agent-end", n))
		}
		if ev.Result.AgentsStarted < rc.starts {
			bad("workflow/end agentsStarted must be a safe integer covering every observed agent start")
		}
		if (ev.Result.Error == "") != (ev.Result.StopReason == workflow.StopCompleted) {
			bad("workflow/end error must be absent exactly for completed runs")
		}
		r.mu.ended[id] = true
	}
}

func (r *recorder) violations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.mu.errs...)
}

// of returns the events of run id, in order.
func (r *recorder) of(id string) []workflow.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []workflow.Event
	for _, ev := range r.mu.events {
		if ev.Run.ID == id {
			out = append(out, ev)
		}
	}
	return out
}

func (r *recorder) all() []workflow.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]workflow.Event(nil), r.mu.events...)
}

// await waits until run id has an event of type typ.
func (r *recorder) await(t *testing.T, id, typ string) workflow.Event {
	t.Helper()
	return r.awaitN(t, id, typ, 1)
}

// awaitN waits until run id has n events of type typ and returns the n-th.
func (r *recorder) awaitN(t *testing.T, id, typ string, n int) workflow.Event {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		ch := r.changed
		r.mu.Unlock()
		if evs := filter(r.of(id), typ); len(evs) >= n {
			return evs[n-1]
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s of run %s", typ, id)
		}
	}
}

func types(evs []workflow.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

func filter(evs []workflow.Event, typ string) []workflow.Event {
	return slices.DeleteFunc(slices.Clone(evs), func(ev workflow.Event) bool { return ev.Type != typ })
}

func ownerOptions() owner.Options { return owner.Options{Surface: newInbox()} }

func noticeText(m owner.Message) string { return m.Text }

// awaitAny waits until some recorded event satisfies match.
func (r *recorder) awaitAny(t *testing.T, match func(workflow.Event) bool) workflow.Event {
	t.Helper()
	deadline := time.NewTimer(budget)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		ch := r.changed
		r.mu.Unlock()
		for _, ev := range r.all() {
			if match(ev) {
				return ev
			}
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatal("timed out waiting for an event")
		}
	}
}
