package subagenttool_test

import (
	"context"
	"errors"
	"github.com/troupe-rt/troupe/actors/registry"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/tools/jobtools"
	"github.com/troupe-rt/troupe/tools/subagenttool"
	"github.com/troupe-rt/troupe/troupetest"
)

func TestConfigDefaults(t *testing.T) {
	r, err := subagenttool.Config{Provider: "spawn"}.Resolve()
	require.NoError(t, err)
	require.Equal(t, subagenttool.Resolved{Provider: "spawn", ToolName: "subagent", EnableRunInBackground: true,
		BackgroundMode: subagenttool.OneShot, MaxDepth: i64(3)}, r)

	r, err = subagenttool.Config{Provider: "spawn", ProviderManagedDepth: true}.Resolve()
	require.NoError(t, err)
	require.Nil(t, r.MaxDepth, "provider-managed requests no cap")
}

func TestConfigRejections(t *testing.T) {
	bad := subagenttool.BackgroundMode("eventually")
	empty := ""
	for name, c := range map[string]subagenttool.Config{
		"no provider":      {},
		"empty toolName":   {Provider: "p", ToolName: &empty},
		"bad mode":         {Provider: "p", BackgroundMode: &bad},
		"maxTokens 0":      {Provider: "p", AgentOptions: &subagent.AgentOptions{MaxTokens: i64(0)}},
		"maxDepth and pm":  {Provider: "p", MaxDepth: i64(2), ProviderManagedDepth: true},
		"maxDepth -1":      {Provider: "p", MaxDepth: i64(-1)},
		"maxDepth 2^53":    {Provider: "p", MaxDepth: i64(1 << 53)},
		"empty toolFilter": {Provider: "p", ToolFilter: &subagent.ToolFilter{}},
	} {
		err := c.Validate()
		require.Error(t, err, name)
		require.ErrorIs(t, err, &messages.Error{Code: messages.CodeInvalidConfig}, name)
	}
	err := subagenttool.Config{Provider: "p", ToolFilter: &subagent.ToolFilter{}}.Validate()
	require.EqualError(t, err, "tool-subagent: `toolFilter` is configured but names neither `allow` nor `deny` — remove the key or fill the filter")
	require.ErrorIs(t, subagenttool.Config{Provider: "p", MaxDepth: i64(-1)}.Validate(), subagent.ErrInvalidMaxDepth)
	require.NoError(t, subagenttool.Config{Provider: "p", ToolFilter: &subagent.ToolFilter{Deny: []string{"bash"}}}.Validate())
}

func TestParseConfig(t *testing.T) {
	c, err := subagenttool.ParseConfig([]byte(`{"provider":"spawn","maxDepth":"provider-managed","backgroundMode":"continuable","agentOptions":{"model":"m","maxTokens":100},"persona":"terse","toolFilter":{"allow":[]}}`))
	require.NoError(t, err)
	require.True(t, c.ProviderManagedDepth)
	require.Nil(t, c.MaxDepth)
	require.Equal(t, subagenttool.Continuable, *c.BackgroundMode)
	require.Equal(t, "terse", c.Persona)
	require.Equal(t, int64(100), *c.AgentOptions.MaxTokens)
	require.NotNil(t, c.ToolFilter.Allow, "an empty allow list still names allow")

	c, err = subagenttool.ParseConfig([]byte(`{"provider":"spawn","maxDepth":2}`))
	require.NoError(t, err)
	require.Equal(t, int64(2), *c.MaxDepth)

	for _, raw := range []string{
		`{"provider":"spawn","maxDepth":1.5}`,
		`{"provider":"spawn","maxDepth":"unlimited"}`,
		`{"provider":"spawn","maxDepth":-1}`,
		`{"provider":"spawn","toolFilter":{}}`,
		`{"provider":"spawn","backgroundMode":"loud"}`,
		`{"provider":"spawn","extra":1}`,
		`{"maxDepth":2}`,
	} {
		_, err := subagenttool.ParseConfig([]byte(raw))
		require.Error(t, err, raw)
	}
}

func TestNumericMaxDepthNeedsDepthLimit(t *testing.T) {
	const want = `tool-subagent: provider "plain" cannot enforce maxDepth (no depthLimit capability) — set maxDepth: 'provider-managed' to leave the recursion budget to the provider`
	plain := func() subagent.Provider {
		return &subagent.ScriptedProvider{ProviderName: "plain", Runner: subagent.NewScripted()}
	}
	e := newEnv(t)
	e.register(t, plain())
	_, err := subagenttool.MountIn(t.Context(), e.sc, subagenttool.Config{Provider: "plain"}, e.deps())
	require.EqualError(t, err, want)
	_, err = subagenttool.MountIn(t.Context(), e.sc, subagenttool.Config{Provider: "plain", MaxDepth: i64(5)}, e.deps())
	require.EqualError(t, err, want)
	m := e.mount(t, subagenttool.Config{Provider: "plain", ProviderManagedDepth: true})
	require.True(t, m.Available())

	e2 := newEnv(t)
	m2 := e2.mount(t, subagenttool.Config{Provider: "plain"})
	_, err = e2.rt.RegisterProvider(t.Context(), e2.sys.Scope(), plain())
	require.EqualError(t, err, want)
	require.False(t, m2.Available())
}

func TestToolFollowsItsProvider(t *testing.T) {
	e := newEnv(t)
	m := e.mount(t, subagenttool.Config{Provider: "spawn"})
	require.False(t, m.Available())
	require.Empty(t, m.Tools())

	eff := e.register(t, subagent.NewSpawn(e.sys.Actors(), subagent.NewScripted()))
	require.True(t, m.Available())
	require.Len(t, m.Tools(), 1)
	require.Equal(t, "subagent", m.Tools()[0].Name)

	require.NoError(t, eff.Run(testCtx(t)))
	require.False(t, m.Available())

	e.register(t, subagent.NewFork(e.sys.Actors(), subagent.NewScripted()).Named("spawn"))
	require.True(t, m.Available())

	require.NoError(t, m.Dispose(testCtx(t)))
	require.False(t, m.Available())
	require.NoError(t, m.Dispose(testCtx(t)), "idempotent")
}

func TestToolFollowsOnlyItsOwnProviderName(t *testing.T) {
	e := newEnv(t)
	m := e.mount(t, subagenttool.Config{Provider: "fork"})
	e.register(t, subagent.NewSpawn(e.sys.Actors(), subagent.NewScripted()))
	require.False(t, m.Available())
}

func TestCallWithoutAnAgent(t *testing.T) {
	e := newEnv(t)
	runner := subagent.NewScripted(subagent.Reply{Text: "never"})
	e.register(t, subagent.NewSpawn(e.sys.Actors(), runner))
	m := e.mount(t, subagenttool.Config{Provider: "spawn"})
	res := m.Tool().Execute(testCtx(t), tools.Call{ID: "c", Name: "subagent", Args: []byte(`{"description":"d","prompt":"p"}`), Caller: tools.Caller{}})
	require.Equal(t, "Error: subagent tool requires a calling agent (exec.agent was undefined)", resultText(t, res, true))
	require.Empty(t, runner.Turns())
}

func TestForegroundCompletedValueAndRequest(t *testing.T) {
	e := newEnv(t)
	runner := subagent.NewScripted(subagent.Reply{Partial: "thinking", Text: "the answer"})
	e.register(t, subagent.NewSpawn(e.sys.Actors(), runner))
	m := e.mount(t, subagenttool.Config{Provider: "spawn", Persona: "terse",
		AgentOptions: &subagent.AgentOptions{Model: "small"}, ToolFilter: &subagent.ToolFilter{Deny: []string{"bash"}}})
	res := e.run(testCtx(t), m.Tool(), `{"description":"answer it","prompt":"what is it?"}`)
	require.Equal(t, "the answer", resultText(t, res, false))
	v := res.Value.(subagenttool.ForegroundValue)
	require.Equal(t, "foreground", v.Kind)
	require.Equal(t, "parent/spawn-1", v.RunID)
	require.Equal(t, []subagent.Block{{Type: "text", Text: "the answer"}}, v.Output)

	turns := runner.Turns()
	require.Len(t, turns, 1)
	require.Equal(t, 1, turns[0].Depth)
	require.Equal(t, "terse", turns[0].Persona)
	require.Equal(t, "small", turns[0].Options.Model)
	require.Equal(t, []string{"bash"}, turns[0].ToolFilter.Deny)
	require.Equal(t, "what is it?", turns[0].Input.Text())
}

// failingRun is a provider whose run's result rejects with resErr (when set) or
// settles with res, and whose dispose fails with disposeErr.
func failingRun(name string, res subagent.Result, resErr, disposeErr error) *funcProvider {
	return &funcProvider{name: name, start: func(context.Context, subagent.ResolvedRequest) (*subagent.Run, error) {
		run, settle := subagent.NewRun(name+"-1", false, func(context.Context) error { return disposeErr })
		settle(res, resErr)
		return run, nil
	}}
}

func TestForegroundDoubleFailureIsAnAggregate(t *testing.T) {
	e1, e2 := errors.New("transport lost"), errors.New("process would not stop")
	e := newEnv(t)
	e.register(t, failingRun("flaky", subagent.Result{}, e1, e2))
	m := e.mount(t, subagenttool.Config{Provider: "flaky", ProviderManagedDepth: true})
	res := e.run(testCtx(t), m.Tool(), `{"description":"d","prompt":"p"}`)
	require.Equal(t, "Error: subagent run failed: transport lost; dispose failed: process would not stop", resultText(t, res, true))

	err := error(&subagenttool.RunDisposeError{Run: e1, Dispose: e2})
	require.EqualError(t, err, "subagent run failed: transport lost; dispose failed: process would not stop")
	agg, ok := err.(interface{ Unwrap() []error })
	require.True(t, ok, "an AggregateError (SPEC §1.3 rule 16)")
	require.Equal(t, []error{e1, e2}, agg.Unwrap())
	require.ErrorIs(t, err, e1)
	require.ErrorIs(t, err, e2)
}

func TestForegroundSingleFailures(t *testing.T) {
	e := newEnv(t)
	e.register(t, failingRun("rejects", subagent.Result{}, errors.New("transport lost"), nil))
	e.register(t, failingRun("nodispose", subagent.Result{StopReason: subagent.StopCompleted}, nil, errors.New("stuck")))
	for provider, want := range map[string]string{
		"rejects":   "Error: transport lost",
		"nodispose": "Error: stuck",
	} {
		m := e.mount(t, subagenttool.Config{Provider: provider, ProviderManagedDepth: true})
		require.Equal(t, want, resultText(t, e.run(testCtx(t), m.Tool(), `{"description":"d","prompt":"p"}`), true))
	}
}

func TestForegroundHeadlines(t *testing.T) {
	for stop, want := range map[string]string{
		subagent.StopAborted:   "subagent run was cancelled",
		subagent.StopError:     "subagent run failed",
		subagent.StopMaxTokens: "subagent run hit its token limit before finishing",
		subagent.StopRefusal:   "subagent declined the task",
		"plugin-reason":        "subagent run ended abnormally (plugin-reason)",
	} {
		require.Equal(t, want, subagenttool.Headline(stop))
		require.Equal(t, want, subagenttool.FailureText(subagent.Result{StopReason: stop}))
	}
	require.Equal(t, "subagent declined the task\nDiagnostic: policy",
		subagenttool.FailureText(subagent.Result{StopReason: subagent.StopRefusal, Diagnostic: "policy"}))
	require.Equal(t, "subagent run failed\nPartial output before the run ended:\nhalf",
		subagenttool.FailureText(subagent.Result{StopReason: subagent.StopError, Output: []subagent.Block{{Type: "text", Text: "half"}}}))
}

func TestForegroundCallerCancelAbortsAndDisposes(t *testing.T) {
	e := newEnv(t)
	g := newGated()
	e.register(t, subagent.NewSpawn(e.sys.Actors(), g))
	m := e.mount(t, subagenttool.Config{Provider: "spawn"})
	c, cancel := context.WithCancel(testCtx(t))
	out := make(chan tools.Result, 1)
	go func() { out <- e.run(c, m.Tool(), `{"description":"d","prompt":"p"}`) }()
	recv(t, g.entered)
	cancel()
	res := recv(t, out)
	require.Equal(t, "Error: subagent run was cancelled", resultText(t, res, true))
	select {
	case <-g.exited:
	default:
		t.Fatal("the turn was still running when the tool returned: dispose was not awaited")
	}
}

func TestOutcomeMapping(t *testing.T) {
	text := []subagent.Block{{Type: "text", Text: "a"}, {Type: "reasoning", Text: "hidden"}, {Type: "text", Text: "b"}}
	boom, stuck := errors.New("boom"), errors.New("stuck")
	for _, tc := range []struct {
		name            string
		res             subagent.Result
		resErr, dispErr error
		want            job.Outcome
	}{
		{"completed", subagent.Result{StopReason: "completed", Output: text}, nil, nil, job.Outcome{Status: job.Completed, Output: "ab"}},
		{"aborted", subagent.Result{StopReason: "aborted", Output: text}, nil, nil, job.Outcome{Status: job.Killed}},
		{"error", subagent.Result{StopReason: "error"}, nil, nil, job.Outcome{Status: job.Failed, Detail: "error"}},
		{"max-tokens+d", subagent.Result{StopReason: "max-tokens", Diagnostic: "D"}, nil, nil, job.Outcome{Status: job.Failed, Detail: "max-tokens; diagnostic: D"}},
		{"refusal", subagent.Result{StopReason: "refusal"}, nil, nil, job.Outcome{Status: job.Failed, Detail: "refusal"}},
		{"unknown", subagent.Result{StopReason: "plugin-reason"}, nil, nil, job.Outcome{Status: job.Failed, Detail: "plugin-reason"}},
		{"rejected", subagent.Result{}, boom, nil, job.Outcome{Status: job.Failed, Detail: "Error: boom"}},
		{"completed+dispose", subagent.Result{StopReason: "completed", Output: text}, nil, stuck, job.Outcome{Status: job.Failed, Detail: "dispose failed: Error: stuck"}},
		{"aborted+dispose", subagent.Result{StopReason: "aborted"}, nil, stuck, job.Outcome{Status: job.Failed, Detail: "dispose failed: Error: stuck"}},
		{"error+dispose", subagent.Result{StopReason: "error", Diagnostic: "D"}, nil, stuck, job.Outcome{Status: job.Failed, Detail: "error; diagnostic: D; dispose failed: Error: stuck"}},
		{"rejected+dispose", subagent.Result{}, boom, stuck, job.Outcome{Status: job.Failed, Detail: "Error: boom; dispose failed: Error: stuck"}},
	} {
		require.Equal(t, tc.want, subagenttool.Outcome(tc.res, tc.resErr, tc.dispErr), tc.name)
	}

	require.Equal(t, job.Outcome{Status: job.Killed}, subagenttool.StartFailure(true, boom))
	require.Equal(t, job.Outcome{Status: job.Failed, Detail: "Error: boom"}, subagenttool.StartFailure(false, boom))
	agg := errors.Join(boom, stuck)
	require.Equal(t, job.Outcome{Status: job.Failed, Detail: "Error: " + agg.Error()}, subagenttool.StartFailure(true, agg),
		"a rollback failure after cancellation is a failure, not a clean kill")
}

func TestBackgroundDisposeFailureFailsTheJob(t *testing.T) {
	e := newEnv(t)
	e.register(t, failingRun("leaky", subagent.Result{StopReason: subagent.StopCompleted,
		Output: []subagent.Block{{Type: "text", Text: "x"}}}, nil, errors.New("stuck")))
	m := e.mount(t, subagenttool.Config{Provider: "leaky", ProviderManagedDepth: true})
	res := e.run(testCtx(t), m.Tool(), `{"description":"d","prompt":"p","run_in_background":true}`)
	require.Equal(t, "started background subagent job subagent-1", resultText(t, res, false))
	snap := troupetest.Settled(t, e.sys, "subagent-1", registry.AsAgent(e.parent))
	require.Equal(t, "[status: failed, dispose failed: Error: stuck]", jobtools.StatusLine(snap))
}

func TestBackgroundStartCancelledByKillIsKilled(t *testing.T) {
	e := newEnv(t)
	entered := make(chan struct{})
	e.register(t, &funcProvider{name: "slow", start: func(ctx context.Context, _ subagent.ResolvedRequest) (*subagent.Run, error) {
		close(entered)
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}})
	m := e.mount(t, subagenttool.Config{Provider: "slow", ProviderManagedDepth: true})
	resultText(t, e.run(testCtx(t), m.Tool(), `{"description":"d","prompt":"p","run_in_background":true}`), false)
	recv(t, entered)
	kill := e.run(testCtx(t), e.jobs.Kill(), `{"job_id":"subagent-1"}`)
	require.Equal(t, "requested cancellation of job subagent-1", resultText(t, kill, false))
	snap := troupetest.Settled(t, e.sys, "subagent-1", registry.AsAgent(e.parent))
	require.Equal(t, "[status: killed]", jobtools.StatusLine(snap))
}

func TestBackgroundRunIsDisposedWhenItsOwnerGoes(t *testing.T) {
	e := newEnv(t)
	g := newGated()
	e.register(t, subagent.NewSpawn(e.sys.Actors(), g))
	m := e.mount(t, subagenttool.Config{Provider: "spawn"})
	resultText(t, e.run(testCtx(t), m.Tool(), `{"description":"d","prompt":"p","run_in_background":true}`), false)
	recv(t, g.entered)
	require.NoError(t, e.parent.Dispose(testCtx(t)))
	recv(t, g.exited)
}

func TestContinuableWithoutAManagerIsUnavailable(t *testing.T) {
	e := newEnv(t)
	runner := subagent.NewScripted(subagent.Reply{Text: "never"})
	e.register(t, subagent.NewSpawn(e.sys.Actors(), runner))
	mode := subagenttool.Continuable
	m := e.mount(t, subagenttool.Config{Provider: "spawn", BackgroundMode: &mode})
	res := e.run(testCtx(t), m.Tool(), `{"description":"d","prompt":"p"}`)
	require.Equal(t, "Error: continuable subagents require the agents service", resultText(t, res, true))
	require.Empty(t, runner.Turns())

	off := false
	m = e.mount(t, subagenttool.Config{Provider: "spawn", BackgroundMode: &mode, EnableRunInBackground: &off})
	res = e.run(testCtx(t), m.Tool(), `{"description":"d","prompt":"p"}`)
	require.Equal(t, "never", resultText(t, res, false), "with background disabled the default route is foreground")
}

func TestParallelBackgroundCallsGetDistinctJobs(t *testing.T) {
	e := newEnv(t)
	e.register(t, subagent.NewSpawn(e.sys.Actors(), subagent.NewScripted(subagent.Reply{Text: "ok"})))
	m := e.mount(t, subagenttool.Config{Provider: "spawn"})
	const n = 8
	ids := make(chan string, n)
	for range n {
		go func() {
			res := e.run(testCtx(t), m.Tool(), `{"description":"d","prompt":"p","run_in_background":true}`)
			v, _ := res.Value.(subagenttool.BackgroundValue)
			ids <- v.JobID
		}()
	}
	seen := map[string]bool{}
	for range n {
		id := recv(t, ids)
		require.NotEmpty(t, id)
		seen[id] = true
		snap := troupetest.Settled(t, e.sys, id, registry.AsAgent(e.parent))
		require.Equal(t, "[status: completed]", jobtools.StatusLine(snap))
	}
	require.Len(t, seen, n)
}

// MountIn's ctx bounds its listener registration and provider lookup: with ctx
// ended it fails with ctx's error and leaves no listener layer behind.
func TestMountInWithAnEndedContextLeavesNoListener(t *testing.T) {
	e := newEnv(t)
	e.register(t, &subagent.ScriptedProvider{ProviderName: "plain", Runner: subagent.NewScripted()})
	before := e.rt.ListenerLayers(t.Context())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := subagenttool.MountIn(ctx, e.sc, subagenttool.Config{Provider: "plain", ProviderManagedDepth: true}, e.deps())
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, before, e.rt.ListenerLayers(t.Context()), "a failed mount left its listener")
	m := e.mount(t, subagenttool.Config{Provider: "plain", ProviderManagedDepth: true})
	require.True(t, m.Available())
	require.Equal(t, before+1, e.rt.ListenerLayers(t.Context()))
}
