package workflow_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/troupetest"
	"github.com/troupe-rt/troupe/workflow"
	"github.com/troupe-rt/troupe/workflow/workflowtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testMeta = `{"name":"test-flow","description":"a test workflow"}`

func i64(v int64) *int64   { return &v }
func str(v string) *string { return &v }

// env is one test's system: a subagent runtime with the stub provider, an engine
// (provider stub, MaxConcurrentAgents 8 unless changed), a live parent agent, and
// a global listener that records every event and checks W45's invariants.
type env struct {
	t      *testing.T
	sys    *troupe.System
	logs   *troupetest.Logs
	rt     *subagent.Runtime
	eng    *workflow.Engine
	stub   *stub
	parent *owner.Agent
	events *workflowtest.Recorder
}

func newEnv(t *testing.T, mutate ...func(*workflow.Config)) *env {
	t.Helper()
	sys, logs := troupetest.Served(t)
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
	e := &env{t: t, sys: sys, logs: logs, rt: rt, eng: eng, stub: st, parent: troupetest.Agent(t, sys, "parent-A"), events: newRecorder()}
	_, err = eng.Listen(sys.Scope(), e.events.Hear)
	require.NoError(t, err)
	t.Cleanup(func() { require.Empty(t, e.events.Violations(), "event invariant (W45) violations") })
	return e
}

func (e *env) request(script string) workflow.Request {
	return workflow.Request{Script: script, Meta: json.RawMessage(testMeta), Parent: e.parent}
}

// start starts a run and disposes it at cleanup.
func (e *env) start(req workflow.Request) *workflow.Run {
	e.t.Helper()
	run, err := e.eng.Start(context.Background(), req)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = run.Dispose(context.Background()) })
	return run
}

// result waits (bounded) for run's result.
func result(t *testing.T, run *workflow.Run) workflow.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := run.Result(ctx)
	require.NoError(t, err, "the run did not settle")
	return res
}

// runScript starts script, waits for its result and disposes it.
func (e *env) runScript(script string) workflow.Result {
	e.t.Helper()
	run := e.start(e.request(script))
	res := result(e.t, run)
	e.dispose(run)
	return res
}

func (e *env) dispose(run *workflow.Run) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(e.t, run.Dispose(ctx))
}

func codeOf(t *testing.T, err error) (messages.Code, string) {
	t.Helper()
	var me *messages.Error
	require.ErrorAs(t, err, &me)
	return me.Code, me.Message
}

// ---- the stub provider (WORKFLOW.md 6.0) ----

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
