package workflow_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
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
	"github.com/troupe-rt/troupe/workflow/workflowtest"
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
	events *workflowtest.Recorder
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
	jobs, err := jobtools.MountIn(t.Context(), sys.Jobs(), sc, jobtools.Config{})
	require.NoError(t, err)
	ctl, err := sys.StartController(controller.Config{})
	require.NoError(t, err)
	in := newInbox()
	parent, err := sys.NewAgent(sc, "A", owner.Options{Surface: in})
	require.NoError(t, err)
	require.NoError(t, sys.Jobs().RegisterAgent(context.Background(), parent))
	e := &env{t: t, sys: sys, logs: logs, rt: rt, eng: eng, stub: st, sc: sc, jobs: jobs, ctl: ctl, parent: parent, inbox: in, events: newRecorder()}
	_, err = eng.Listen(sys.Scope(), e.events.Hear)
	require.NoError(t, err)
	t.Cleanup(func() { require.Empty(t, e.events.Violations(), "event invariant (W45) violations") })
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

// The stub provider and the event recorder live in workflow/workflowtest.
type (
	stub    = workflowtest.Stub
	stubRun = workflowtest.StubRun
)

const (
	auto   = workflowtest.Auto
	manual = workflowtest.Manual
)

var (
	newStub     = workflowtest.NewStub
	newRecorder = workflowtest.NewRecorder
	text        = workflowtest.Text
	types       = workflowtest.Types
	filter      = workflowtest.Filter
)

func ownerOptions() owner.Options { return owner.Options{Surface: newInbox()} }

func noticeText(m owner.Message) string { return m.Text }
