package subagenttool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/scope"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/tools/jobtools"
	"github.com/troupe-rt/troupe/tools/subagenttool"
	"github.com/troupe-rt/troupe/troupetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// replyBudget bounds how long a test waits for something before failing.
const replyBudget = 10 * time.Second

// env is a System with the agent registry, a subagent Runtime, the job tools in a
// plugin scope and a registered parent agent composed under it.
type env struct {
	sys    *troupe.System
	rt     *subagent.Runtime
	sc     *scope.Scope
	jobs   *jobtools.Mount
	parent *owner.Agent
	calls  atomic.Uint64
}

func newEnv(tb testing.TB) *env {
	tb.Helper()
	sys, logs := troupetest.NewSystem(tb)
	_, err := sys.Jobs().MountAgents(context.Background(), sys.Scope())
	require.NoError(tb, err)
	rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), slog.New(logs))
	require.NoError(tb, err)
	sc, err := sys.Scope().Child("plugins")
	require.NoError(tb, err)
	jobs, err := jobtools.MountIn(context.Background(), sys.Jobs(), sc, jobtools.Config{})
	require.NoError(tb, err)
	parent, err := sys.NewAgent(sc, "parent")
	require.NoError(tb, err)
	require.NoError(tb, sys.Jobs().RegisterAgent(context.Background(), parent))
	return &env{sys: sys, rt: rt, sc: sc, jobs: jobs, parent: parent}
}

func (e *env) register(tb testing.TB, p subagent.Provider) *scope.Effect {
	tb.Helper()
	eff, err := e.rt.RegisterProvider(context.Background(), e.sys.Scope(), p)
	require.NoError(tb, err)
	return eff
}

func (e *env) deps() subagenttool.Deps { return subagenttool.Deps{Subagents: e.rt, Jobs: e.sys.Jobs()} }

func (e *env) mount(tb testing.TB, cfg subagenttool.Config) *subagenttool.Mount {
	tb.Helper()
	m, err := subagenttool.MountIn(context.Background(), e.sc, cfg, e.deps())
	require.NoError(tb, err)
	return m
}

// run calls tool as the parent agent, through the job tools' pipeline.
func (e *env) run(ctx context.Context, tool tools.Tool, args string) tools.Result {
	call := tools.Call{ID: fmt.Sprintf("call-%d", e.calls.Add(1)), Name: tool.Name, Args: json.RawMessage(args),
		Caller: tools.AsAgent(e.parent)}
	return e.jobs.Pipeline().Run(ctx, tool, call)
}

func testCtx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), replyBudget)
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
	case <-time.After(replyBudget):
		t.Fatal("nothing arrived")
		var zero T
		return zero
	}
}

// funcProvider is a provider whose Start is a test function.
type funcProvider struct {
	name  string
	caps  subagent.Capabilities
	start func(ctx context.Context, req subagent.ResolvedRequest) (*subagent.Run, error)
}

func (p *funcProvider) Name() string                        { return p.name }
func (p *funcProvider) Capabilities() subagent.Capabilities { return p.caps }
func (p *funcProvider) InheritsParentContext() bool         { return false }
func (p *funcProvider) Start(ctx context.Context, req subagent.ResolvedRequest) (*subagent.Run, error) {
	return p.start(ctx, req)
}

// gatedRunner blocks every turn until its ctx ends, announcing the turn's start on
// entered and its return on exited.
type gatedRunner struct {
	entered chan struct{}
	exited  chan struct{}
}

func newGated() *gatedRunner {
	return &gatedRunner{entered: make(chan struct{}, 16), exited: make(chan struct{}, 16)}
}

func (g *gatedRunner) RunTurn(ctx context.Context, _ subagent.Turn) (subagent.TurnResult, error) {
	defer func() { g.exited <- struct{}{} }()
	g.entered <- struct{}{}
	<-ctx.Done()
	return subagent.TurnResult{}, context.Cause(ctx)
}

func i64(v int64) *int64 { return &v }
func boolp(b bool) *bool { return &b }
