package spec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/scope"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/tools/jobtools"
	"github.com/troupe-rt/troupe/tools/subagenttool"
	"github.com/troupe-rt/troupe/troupetest"
)

// SPEC §5: the subagent seam and the subagent tool (cases 126–145).

// subEnv is a System with the agent registry mounted globally, a subagent Runtime,
// a plugin scope (where the job tools, when wanted, and the subagent tool are
// mounted) and a registered parent agent composed under it.
type subEnv struct {
	sys    *troupe.System
	rt     *subagent.Runtime
	sc     *scope.Scope
	jobs   *jobtools.Mount // nil: no job tools (and so no job controller)
	parent *owner.Agent
	calls  atomic.Uint64
}

func newSubEnv(t *testing.T, withJobTools bool) *subEnv {
	t.Helper()
	sys, logs := troupetest.NewSystem(t)
	_, err := sys.Jobs().MountAgents(context.Background(), sys.Scope())
	require.NoError(t, err)
	rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), slog.New(logs))
	require.NoError(t, err)
	e := &subEnv{sys: sys, rt: rt, sc: childScope(t, sys.Scope(), "plugins")}
	if withJobTools {
		e.jobs, err = jobtools.MountIn(t.Context(), sys.Jobs(), e.sc, jobtools.Config{})
		require.NoError(t, err)
	}
	e.parent = agentUnder(t, sys, e.sc, "parent")
	return e
}

// register registers p in the global scope.
func (e *subEnv) register(t *testing.T, p subagent.Provider) {
	t.Helper()
	_, err := e.rt.RegisterProvider(t.Context(), e.sys.Scope(), p)
	require.NoError(t, err)
}

// spawn registers the spawn provider over runner.
func (e *subEnv) spawn(t *testing.T, runner subagent.TurnRunner) *subagent.Local {
	t.Helper()
	p := subagent.NewSpawn(e.sys.Actors(), runner)
	e.register(t, p)
	return p
}

// deps are the tool's usual dependencies: the runtime and the job registry.
func (e *subEnv) deps() subagenttool.Deps {
	return subagenttool.Deps{Subagents: e.rt, Jobs: e.sys.Jobs()}
}

// mount mounts the subagent tool in the plugin scope.
func (e *subEnv) mount(t *testing.T, cfg subagenttool.Config, deps subagenttool.Deps) *subagenttool.Mount {
	t.Helper()
	m, err := subagenttool.MountIn(t.Context(), e.sc, cfg, deps)
	require.NoError(t, err)
	return m
}

// pipeline is the job tools' pipeline when they are mounted (so job_output and
// job_kill get §3.6's final step), a bare one otherwise.
func (e *subEnv) pipeline() *tools.Pipeline {
	if e.jobs != nil {
		return e.jobs.Pipeline()
	}
	return &tools.Pipeline{}
}

// run calls tool as the parent agent.
func (e *subEnv) run(c context.Context, tool tools.Tool, args string) tools.Result {
	call := tools.Call{ID: fmt.Sprintf("call-%d", e.calls.Add(1)), Name: tool.Name, Args: json.RawMessage(args),
		Caller: tools.AsAgent(e.parent)}
	return e.pipeline().Run(c, tool, call)
}

// jobTool returns the mounted job tool name.
func (e *subEnv) jobTool(t *testing.T, name string) tools.Tool {
	t.Helper()
	require.NotNil(t, e.jobs, "job tools are not mounted")
	for _, tl := range e.jobs.All() {
		if tl.Name == name {
			return tl
		}
	}
	t.Fatalf("no job tool %s", name)
	return tools.Tool{}
}

// funcProvider is a provider whose Start is a test function; it counts its starts.
type funcProvider struct {
	name   string
	caps   subagent.Capabilities
	start  func(ctx context.Context, req subagent.ResolvedRequest) (*subagent.Run, error)
	starts atomic.Int32
}

func (p *funcProvider) Name() string                        { return p.name }
func (p *funcProvider) Capabilities() subagent.Capabilities { return p.caps }
func (p *funcProvider) InheritsParentContext() bool         { return false }
func (p *funcProvider) Start(ctx context.Context, req subagent.ResolvedRequest) (*subagent.Run, error) {
	p.starts.Add(1)
	return p.start(ctx, req)
}

// settledRun returns a run whose result has settled with res.
func settledRun(id string, res subagent.Result, dispose func(context.Context) error) *subagent.Run {
	run, settle := subagent.NewRun(id, false, dispose)
	settle(res, nil)
	return run
}

// ctxSpy wraps a provider and hands over the context each Start was given.
type ctxSpy struct {
	subagent.Provider
	ctxs chan context.Context
}

func (s *ctxSpy) Start(ctx context.Context, req subagent.ResolvedRequest) (*subagent.Run, error) {
	s.ctxs <- ctx
	return s.Provider.Start(ctx, req)
}

// events records the runtime's start/end events (a listener never blocks).
type events struct {
	mu  sync.Mutex
	evs []subagent.Event
	ch  chan subagent.Event
}

func listen(t *testing.T, e *subEnv) *events {
	t.Helper()
	r := &events{ch: make(chan subagent.Event, 64)}
	_, err := e.rt.Listen(t.Context(), e.sys.Scope(), func(ev subagent.Event) {
		if ev.Type != subagent.EventStart && ev.Type != subagent.EventEnd {
			return
		}
		r.mu.Lock()
		r.evs = append(r.evs, ev)
		r.mu.Unlock()
		select {
		case r.ch <- ev:
		default:
		}
	})
	require.NoError(t, err)
	return r
}

func (r *events) all() []subagent.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]subagent.Event(nil), r.evs...)
}

// runtimeBarrier returns once every message already sent to the runtime actor has
// been processed (a round trip through its mailbox).
func runtimeBarrier(e *subEnv) { e.rt.List(context.Background()) }

func i64p(v int64) *int64 { return &v }

func TestSpec126_DuplicateProviderName(t *testing.T) {
	e := newSubEnv(t, false)
	e.spawn(t, subagent.NewScripted())
	_, err := e.rt.RegisterProvider(t.Context(), e.sys.Scope(), subagent.NewSpawn(e.sys.Actors(), subagent.NewScripted()))
	requireCode(t, err, subagent.ErrDuplicateProvider, `a subagent provider named "spawn" is already registered`)
	require.Equal(t, []string{"spawn"}, e.rt.List(t.Context()))
}

func TestSpec127_NoProvider(t *testing.T) {
	e := newSubEnv(t, false)
	_, err := e.rt.Start(ctx(t), "x", subagent.Request{Prompt: "p"}, e.parent)
	requireCode(t, err, subagent.ErrNoProvider, `no subagent provider registered for "x"`)
}

func TestSpec128_FirstMissingCapabilityInFixedOrder(t *testing.T) {
	e := newSubEnv(t, false)
	runner := subagent.NewScripted(subagent.Reply{Text: "never"})
	p := &subagent.ScriptedProvider{ProviderName: "plain", Runner: runner}
	require.Equal(t, subagent.Capabilities{}, p.Capabilities())
	e.register(t, p)
	_, err := e.rt.Start(ctx(t), "plain", subagent.Request{Prompt: "p",
		OutputSchema: json.RawMessage(`{"type":"object"}`), Persona: "terse"}, e.parent)
	requireCode(t, err, subagent.ErrUnsupportedCapability,
		`subagent provider "plain" does not support the "outputSchema" capability`)
	require.Empty(t, runner.Turns(), "a refused start never reaches the provider")
}

func TestSpec129_MaxDepthMustBeANonNegativeSafeInteger(t *testing.T) {
	// 1.5 cannot be expressed in an *int64 (SPEC §1.3 rule 17); 2^53 stands in for
	// the other unsafe integers.
	e := newSubEnv(t, false)
	runner := subagent.NewScripted(subagent.Reply{Text: "never"})
	e.spawn(t, runner)
	for _, d := range []int64{-1, 1 << 53} {
		_, err := e.rt.Start(ctx(t), "spawn", subagent.Request{Prompt: "p", MaxDepth: i64p(d)}, e.parent)
		require.ErrorIs(t, err, subagent.ErrInvalidMaxDepth, "maxDepth %d", d)
		require.EqualError(t, err, "subagent maxDepth must be a non-negative safe integer")
		var coded *messages.Error
		require.False(t, errors.As(err, &coded), "a plain error, without a SubagentError code (rule 42)")
	}
	require.Empty(t, runner.Turns())
}

func TestSpec130_DepthCapEnforcedByTheInProcessProvider(t *testing.T) {
	e := newSubEnv(t, true)
	runner := subagent.NewScripted(subagent.Reply{Text: "never"})
	e.spawn(t, runner)
	for _, parent := range []subagent.Parent{
		{Session: "parent", Depth: 3},
		{Session: "parent", Depth: 1, SubagentDepth: 3}, // runtime options deepen the depth
	} {
		_, err := e.rt.Start(ctx(t), "spawn", subagent.Request{Prompt: "p", MaxDepth: i64p(3), Parent: parent}, e.parent)
		require.EqualError(t, err, "subagent depth 4 exceeds maxDepth 3")
		var de *subagent.DepthError
		require.ErrorAs(t, err, &de)
		require.Equal(t, subagent.DepthError{AttemptedDepth: 4, MaxDepth: 3}, *de)
		var coded *messages.Error
		require.False(t, errors.As(err, &coded), "SubagentDepthError carries no code (rule 42)")
	}

	// The same through the tool, whose default maxDepth is 3.
	m := e.mount(t, subagenttool.Config{Provider: "spawn"}, subagenttool.Deps{Subagents: e.rt,
		ParentOf: func(tools.Call) subagent.Parent { return subagent.Parent{Depth: 3} }})
	res := e.run(ctx(t), m.Tool(), `{"description":"too deep","prompt":"p"}`)
	require.Equal(t, "Error: subagent depth 4 exceeds maxDepth 3", errText(t, res))
	require.Empty(t, runner.Turns())
}

func TestSpec131_ProviderStartRejectsWithoutLifecycleEvents(t *testing.T) {
	e := newSubEnv(t, false)
	evs := listen(t, e)
	boom := errors.New("provider exploded")
	e.register(t, &funcProvider{name: "broken", start: func(context.Context, subagent.ResolvedRequest) (*subagent.Run, error) {
		return nil, boom
	}})
	_, err := e.rt.Start(ctx(t), "broken", subagent.Request{Prompt: "p"}, e.parent)
	require.Same(t, boom, err, "the provider's own error")
	runtimeBarrier(e)
	require.Empty(t, evs.all(), "no subagent/start or subagent/end")
}

func TestSpec132_StartPrecedesEndForAnAlreadySettledRun(t *testing.T) {
	e := newSubEnv(t, false)
	evs := listen(t, e)
	e.register(t, &funcProvider{name: "instant", start: func(context.Context, subagent.ResolvedRequest) (*subagent.Run, error) {
		return settledRun("instant-run-1", subagent.Result{StopReason: subagent.StopCompleted,
			Output: []subagent.Block{{Type: "text", Text: "done"}}}, nil), nil
	}})
	run, err := e.rt.Start(ctx(t), "instant", subagent.Request{Prompt: "p"}, e.parent)
	require.NoError(t, err)
	t.Cleanup(func() { _ = run.Dispose(context.Background()) })
	first, second := recv(t, evs.ch), recv(t, evs.ch)
	require.Equal(t, subagent.EventStart, first.Type)
	require.Equal(t, subagent.EventEnd, second.Type)
	require.NotEmpty(t, first.RunID)
	require.Equal(t, first.RunID, second.RunID)
	for _, ev := range []subagent.Event{first, second} {
		require.Equal(t, "instant", ev.Provider)
		require.Equal(t, "instant-run-1", ev.ID)
		require.False(t, ev.Local)
		require.True(t, ev.Parent.Is(e.parent), "%v", ev.Parent)
	}
	require.Equal(t, subagent.StopCompleted, second.StopReason)
	require.Equal(t, "done", second.LastAssistantMessage)
}

func TestSpec133_ForegroundTokenLimitWithDiagnosticAndPartialOutput(t *testing.T) {
	e := newSubEnv(t, false)
	e.spawn(t, subagent.NewScripted(subagent.Reply{Partial: "P", StopReason: subagent.StopMaxTokens, Diagnostic: "D"}))
	m := e.mount(t, subagenttool.Config{Provider: "spawn"}, e.deps())
	res := e.run(ctx(t), m.Tool(), `{"description":"summarise the logs","prompt":"summarise"}`)
	require.Equal(t, "Error: subagent run hit its token limit before finishing\nDiagnostic: D\nPartial output before the run ended:\nP",
		errText(t, res))
	require.Nil(t, res.Value)
}

func TestSpec134_ForegroundUnknownStopReasonAwaitsDispose(t *testing.T) {
	e := newSubEnv(t, false)
	var disposed atomic.Bool
	e.register(t, &funcProvider{name: "odd", start: func(context.Context, subagent.ResolvedRequest) (*subagent.Run, error) {
		return settledRun("odd-1", subagent.Result{StopReason: "plugin-reason"}, func(context.Context) error {
			disposed.Store(true) // the last thing dispose does
			return nil
		}), nil
	}})
	m := e.mount(t, subagenttool.Config{Provider: "odd", ProviderManagedDepth: true}, e.deps())
	res := e.run(ctx(t), m.Tool(), `{"description":"odd task","prompt":"p"}`)
	require.Equal(t, "Error: subagent run ended abnormally (plugin-reason)", errText(t, res))
	require.True(t, disposed.Load(), "the run's dispose had finished when the tool returned")
}

func TestSpec135_BackgroundOneShotCollectedWithJobOutput(t *testing.T) {
	e := newSubEnv(t, true)
	e.spawn(t, subagent.NewScripted(subagent.Reply{Text: "background answer"}))
	m := e.mount(t, subagenttool.Config{Provider: "spawn"}, e.deps())
	res := e.run(ctx(t), m.Tool(), `{"description":"research topic","prompt":"go","run_in_background":true}`)
	require.Equal(t, "started background subagent job subagent-1", okText(t, res))
	require.Equal(t, subagenttool.BackgroundValue{Kind: "background", JobID: "subagent-1"}, res.Value)

	out := e.jobTool(t, jobtools.NameOutput)
	require.Equal(t, "background answer\n[status: completed]",
		okText(t, e.run(ctx(t), out, `{"job_id":"subagent-1","wait":true}`)))
	require.Equal(t, "background answer\n[status: completed]",
		okText(t, e.run(ctx(t), out, `{"job_id":"subagent-1"}`)))
	snap := get(t, e.sys, "subagent-1", "parent")
	require.Equal(t, "research topic", snap.Label)
	require.Equal(t, "subagent", snap.Kind)
}

func TestSpec136_BackgroundErrorWithDiagnostic(t *testing.T) {
	e := newSubEnv(t, true)
	e.spawn(t, subagent.NewScripted(subagent.Reply{StopReason: subagent.StopError,
		Diagnostic: "Claude Code cancelled an unattended dialog"}))
	m := e.mount(t, subagenttool.Config{Provider: "spawn"}, e.deps())
	res := e.run(ctx(t), m.Tool(), `{"description":"fix the bug","prompt":"go","run_in_background":true}`)
	require.Equal(t, "started background subagent job subagent-1", okText(t, res))
	require.Equal(t, "(no new output)\n[status: failed, error; diagnostic: Claude Code cancelled an unattended dialog]",
		okText(t, e.run(ctx(t), e.jobTool(t, jobtools.NameOutput), `{"job_id":"subagent-1","wait":true}`)))
}

func TestSpec137_BackgroundWithoutAJobRegistry(t *testing.T) {
	e := newSubEnv(t, false)
	runner := subagent.NewScripted(subagent.Reply{Text: "never"})
	e.spawn(t, runner)
	m := e.mount(t, subagenttool.Config{Provider: "spawn"}, subagenttool.Deps{Subagents: e.rt})
	msg := errText(t, e.run(ctx(t), m.Tool(), `{"description":"in background","prompt":"p","run_in_background":true}`))
	require.True(t, strings.HasPrefix(msg, "Error: "), msg)
	requireHinted(t, errors.New(strings.TrimPrefix(msg, "Error: ")), "background jobs unavailable: ")
	require.Empty(t, runner.Turns())
}

func TestSpec138_AsyncProviderStartRejectionFailsTheJob(t *testing.T) {
	e := newSubEnv(t, true)
	release := make(chan struct{})
	e.register(t, &funcProvider{name: "slow", start: func(ctx context.Context, _ subagent.ResolvedRequest) (*subagent.Run, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil, errors.New("setup failed")
	}})
	m := e.mount(t, subagenttool.Config{Provider: "slow", ProviderManagedDepth: true}, e.deps())
	res := e.run(ctx(t), m.Tool(), `{"description":"slow setup","prompt":"p","run_in_background":true}`)
	require.Equal(t, "started background subagent job subagent-1", okText(t, res))
	close(release) // the provider rejects after the tool has returned
	collected := okText(t, e.run(ctx(t), e.jobTool(t, jobtools.NameOutput), `{"job_id":"subagent-1","wait":true}`))
	require.Contains(t, collected, "[status: failed, Error: setup failed]")
}

func TestSpec140_JobKillReasonIsTheRunsCancelCause(t *testing.T) {
	for _, tc := range []struct {
		name, args, cause, status string
	}{
		{"reason", `{"job_id":"subagent-1","reason":"no longer needed"}`, "no longer needed", "[status: killed, no longer needed]"},
		{"no reason", `{"job_id":"subagent-1"}`, "background subagent task killed", "[status: killed]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newSubEnv(t, true)
			spy := &ctxSpy{Provider: subagent.NewSpawn(e.sys.Actors(), subagent.NewScripted(subagent.Reply{Block: true})),
				ctxs: make(chan context.Context, 1)}
			e.register(t, spy)
			m := e.mount(t, subagenttool.Config{Provider: "spawn"}, e.deps())
			res := e.run(ctx(t), m.Tool(), `{"description":"long task","prompt":"p","run_in_background":true}`)
			require.Equal(t, "started background subagent job subagent-1", okText(t, res))
			runCtx := recv(t, spy.ctxs)

			kill := e.run(ctx(t), e.jobTool(t, jobtools.NameKill), tc.args)
			require.Equal(t, "requested cancellation of job subagent-1", okText(t, kill))
			recv(t, runCtx.Done())
			require.Equal(t, tc.cause, context.Cause(runCtx).Error())
			snap := troupetest.Settled(t, e.sys, "subagent-1", asSession("parent"))
			require.Equal(t, tc.status, jobtools.StatusLine(snap))
		})
	}
}

func TestSpec142_BackgroundDisabled(t *testing.T) {
	e := newSubEnv(t, true)
	runner := subagent.NewScripted(subagent.Reply{Text: "foreground answer"})
	e.spawn(t, runner)
	props := func(m *subagenttool.Mount) []string {
		var s struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		require.NoError(t, json.Unmarshal(m.Tool().Parameters, &s))
		return mapKeysRaw(s.Properties)
	}
	enabled := e.mount(t, subagenttool.Config{Provider: "spawn"}, e.deps())
	require.ElementsMatch(t, []string{"description", "prompt", "run_in_background"}, props(enabled))

	disabled := e.mount(t, subagenttool.Config{Provider: "spawn", ToolName: strp("subagent_fg"),
		EnableRunInBackground: boolp(false)}, e.deps())
	require.ElementsMatch(t, []string{"description", "prompt"}, props(disabled))
	res := e.run(ctx(t), disabled.Tool(), `{"description":"forced","prompt":"p","run_in_background":true}`)
	require.Equal(t, "Error: run_in_background is disabled for this tool instance (enableRunInBackground: false)", errText(t, res))
	require.Empty(t, runner.Turns())
	require.Empty(t, list(t, e.sys, "parent"), "no job was started")
}

func mapKeysRaw(m map[string]json.RawMessage) []string {
	out := []string{}
	for k := range m {
		out = append(out, k)
	}
	return out
}

func strp(s string) *string { return &s }
func boolp(b bool) *bool    { return &b }

func TestSpec143_JobPreflightFailureNeverStartsTheProvider(t *testing.T) {
	e := newSubEnv(t, false) // no job tools: no controller serves the parent
	p := &funcProvider{name: "counted", start: func(context.Context, subagent.ResolvedRequest) (*subagent.Run, error) {
		return settledRun("counted-1", subagent.Result{StopReason: subagent.StopCompleted}, nil), nil
	}}
	e.register(t, p)
	m := e.mount(t, subagenttool.Config{Provider: "counted", ProviderManagedDepth: true}, e.deps())
	for range 10 {
		msg := errText(t, e.run(ctx(t), m.Tool(), `{"description":"never runs","prompt":"p","run_in_background":true}`))
		requireHinted(t, errors.New(strings.TrimPrefix(msg, "Error: ")), prefixNoController)
		require.Zero(t, p.starts.Load(), "the provider's start was never called")
	}
	require.Empty(t, list(t, e.sys, "parent"))
	// A foreground round trip later, the only start is the foreground one: a start
	// that a refused call had set off asynchronously would most likely show by now.
	res := e.run(ctx(t), m.Tool(), `{"description":"runs now","prompt":"p"}`)
	require.False(t, res.IsError, "%#v", res.Content)
	require.Equal(t, int32(1), p.starts.Load())
}

func TestSpec144_ContinuableModeNeedsAContinuableProvider(t *testing.T) {
	const want = "tool-subagent: provider \"plain\" does not support `backgroundMode: continuable`"
	continuable := subagenttool.Continuable
	cfg := subagenttool.Config{Provider: "plain", BackgroundMode: &continuable, ProviderManagedDepth: true}
	plain := func() subagent.Provider {
		return &subagent.ScriptedProvider{ProviderName: "plain", Runner: subagent.NewScripted()}
	}

	t.Run("provider registered first", func(t *testing.T) {
		e := newSubEnv(t, false)
		e.register(t, plain())
		_, err := subagenttool.MountIn(t.Context(), e.sc, cfg, e.deps())
		require.EqualError(t, err, want)
	})
	t.Run("tool mounted first", func(t *testing.T) {
		e := newSubEnv(t, false)
		m := e.mount(t, cfg, e.deps())
		require.False(t, m.Available())
		_, err := e.rt.RegisterProvider(t.Context(), e.sys.Scope(), plain())
		require.EqualError(t, err, want)
		require.Empty(t, e.rt.List(t.Context()), "the provider's registration was rolled back")
		require.False(t, m.Available())
		require.Empty(t, m.Tools())
	})
}

// fakeContinuations stands in for the continuation manager (a later issue): it
// records each start and answers with a fixed child id.
type fakeContinuations struct {
	mu     sync.Mutex
	starts []fakeStart
}

type fakeStart struct {
	provider, label string
	req             subagent.Request
	parent          *owner.Agent
}

func (f *fakeContinuations) StartContinuable(_ context.Context, provider, label string, req subagent.Request, parent *owner.Agent) (string, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts = append(f.starts, fakeStart{provider, label, req, parent})
	return "parent/spawn-child-" + fmt.Sprint(len(f.starts)), "msg-1", nil
}

func (f *fakeContinuations) all() []fakeStart {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeStart(nil), f.starts...)
}

func TestSpec145_ContinuableDefaultRouteAndForegroundOverride(t *testing.T) {
	e := newSubEnv(t, true)
	runner := subagent.NewScripted(subagent.Reply{Text: "foreground answer"})
	e.spawn(t, runner)
	fake := &fakeContinuations{}
	continuable := subagenttool.Continuable
	deps := e.deps()
	deps.Continuations = fake
	m := e.mount(t, subagenttool.Config{Provider: "spawn", BackgroundMode: &continuable}, deps)
	require.True(t, m.Available())

	res := e.run(ctx(t), m.Tool(), `{"description":"child task","prompt":"explore"}`)
	require.Equal(t, "started subagent parent/spawn-child-1", okText(t, res))
	require.Equal(t, subagenttool.ContinuableValue{Kind: "continuable", SubagentID: "parent/spawn-child-1"}, res.Value)
	starts := fake.all()
	require.Len(t, starts, 1)
	require.Equal(t, "spawn", starts[0].provider)
	require.Equal(t, "child task", starts[0].label)
	require.Equal(t, "explore", starts[0].req.Prompt)
	require.Same(t, e.parent, starts[0].parent)
	require.Empty(t, runner.Turns(), "a continuable start runs no one-shot turn")
	require.Empty(t, list(t, e.sys, "parent"), "continuable children are not jobs")

	res = e.run(ctx(t), m.Tool(), `{"description":"child task","prompt":"answer now","run_in_background":false}`)
	require.Equal(t, "foreground answer", okText(t, res))
	v, ok := res.Value.(subagenttool.ForegroundValue)
	require.True(t, ok, "value %T", res.Value)
	require.Equal(t, "foreground", v.Kind)
	require.Equal(t, []subagent.Block{{Type: "text", Text: "foreground answer"}}, v.Output)
	require.NotEmpty(t, v.RunID)
	require.Len(t, fake.all(), 1, "the foreground call did not go to the continuation manager")
}
