package subagent_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/troupe-rt/troupe/scope"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/troupetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newRuntime(t *testing.T) (*subagent.Runtime, *scope.Scope, *troupetest.Logs) {
	t.Helper()
	sys, logs := troupetest.NewSystem(t)
	rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), slog.New(logs))
	require.NoError(t, err)
	return rt, sys.Scope(), logs
}

// provider is a test provider: its methods are functions.
type provider struct {
	name  string
	caps  func() subagent.Capabilities
	start func(context.Context, subagent.ResolvedRequest) (*subagent.Run, error)
}

func (p *provider) Name() string { return p.name }
func (p *provider) Capabilities() subagent.Capabilities {
	if p.caps == nil {
		return subagent.Capabilities{}
	}
	return p.caps()
}
func (p *provider) InheritsParentContext() bool { return false }
func (p *provider) Start(ctx context.Context, req subagent.ResolvedRequest) (*subagent.Run, error) {
	return p.start(ctx, req)
}

// recorder records every event a listener hears.
type recorder struct {
	mu  sync.Mutex
	evs []string
}

func (r *recorder) fn(ev subagent.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, ev.Type+" "+ev.Provider)
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string{}, r.evs...)
}

func TestDisposePanicIsAnError(t *testing.T) {
	run, settle := subagent.NewRun("r", false, func(context.Context) error { panic("dispose bug") })
	settle(subagent.Result{StopReason: subagent.StopCompleted}, nil)
	require.EqualError(t, run.Dispose(context.Background()), "dispose bug")
	require.EqualError(t, run.Dispose(context.Background()), "dispose bug", "the same error again")
}

func TestFinishedDisposalAndSettledResultWinOverADoneCtx(t *testing.T) {
	boom := errors.New("boom")
	run, settle := subagent.NewRun("r", false, func(context.Context) error { return boom })
	settle(subagent.Result{StopReason: subagent.StopCompleted}, nil)
	require.Same(t, boom, run.Dispose(context.Background()))
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for range 200 { // a select between two ready cases would pick ctx about half the time
		require.Same(t, boom, run.Dispose(done))
		res, err := run.Result(done)
		require.NoError(t, err)
		require.Equal(t, subagent.StopCompleted, res.StopReason)
	}
}

func TestProviderPanicsAreErrors(t *testing.T) {
	rt, global, _ := newRuntime(t)
	rec := &recorder{}
	_, err := rt.Listen(t.Context(), global, rec.fn)
	require.NoError(t, err)
	for _, p := range []*provider{
		{name: "panics", start: func(context.Context, subagent.ResolvedRequest) (*subagent.Run, error) { panic("start bug") }},
		{name: "norun", start: func(context.Context, subagent.ResolvedRequest) (*subagent.Run, error) { return nil, nil }},
		{name: "badcaps", caps: func() subagent.Capabilities { panic("caps bug") }},
	} {
		_, err := rt.RegisterProvider(t.Context(), global, p)
		require.NoError(t, err)
	}
	_, err = rt.Start(context.Background(), "panics", subagent.Request{Prompt: "p"}, nil)
	require.EqualError(t, err, "start bug")
	_, err = rt.Start(context.Background(), "norun", subagent.Request{Prompt: "p"}, nil)
	require.EqualError(t, err, `subagent provider "norun" returned no run`)
	_, err = rt.Start(context.Background(), "badcaps", subagent.Request{Prompt: "p"}, nil)
	require.EqualError(t, err, "caps bug")
	rt.List(t.Context()) // a barrier: any event sent before has been fired
	for _, ev := range rec.all() {
		require.NotContains(t, ev, subagent.EventStart)
		require.NotContains(t, ev, subagent.EventEnd)
	}
}

func TestProviderEventsReachListenersInEveryScope(t *testing.T) {
	rt, global, _ := newRuntime(t)
	child, err := global.Child("plugin")
	require.NoError(t, err)
	grandchild, err := child.Child("agent")
	require.NoError(t, err)
	rec := &recorder{}
	for _, sc := range []*scope.Scope{grandchild, global, child} {
		_, err := rt.Listen(t.Context(), sc, rec.fn)
		require.NoError(t, err)
	}
	eff, err := rt.RegisterProvider(t.Context(), global, &provider{name: "p"})
	require.NoError(t, err)
	require.NoError(t, eff.Run(context.Background()))
	rt.List(t.Context())
	added, removed := subagent.EventProviderAdded+" p", subagent.EventProviderRemoved+" p"
	require.Equal(t, []string{added, added, added, removed, removed, removed}, rec.all())
}

func TestRolledBackRegistrationAnnouncesRemoval(t *testing.T) {
	rt, global, _ := newRuntime(t)
	rec := &recorder{}
	_, err := rt.Listen(t.Context(), global, rec.fn)
	require.NoError(t, err)
	var registered subagent.Provider
	_, err = rt.Listen(t.Context(), global, func(ev subagent.Event) {
		if ev.Type == subagent.EventProviderAdded {
			registered = ev.Registered
			panic(errors.New("refused"))
		}
	})
	require.NoError(t, err)
	p := &provider{name: "p"}
	_, err = rt.RegisterProvider(t.Context(), global, p)
	require.EqualError(t, err, "refused")
	require.Same(t, p, registered, "provider-added carries the provider")
	require.Empty(t, rt.List(t.Context()))
	require.Equal(t, []string{subagent.EventProviderAdded + " p", subagent.EventProviderRemoved + " p"}, rec.all())
}

func TestLocalProvidersAreContinuable(t *testing.T) {
	sys, _ := troupetest.NewSystem(t)
	history := []subagent.Message{{Role: "user", Content: []subagent.Block{{Type: "text", Text: "hi"}}}}
	req := subagent.Request{Prompt: "p", Parent: subagent.Parent{Session: "s", History: history}}

	var spawn subagent.Provider = subagent.NewSpawn(sys.Actors(), subagent.NewScripted())
	c, ok := spawn.(subagent.Continuable)
	require.True(t, ok)
	seed, err := c.PrepareContinuable(context.Background(), req)
	require.NoError(t, err)
	require.Nil(t, seed.History, "a spawned child starts fresh")

	var fork subagent.Provider = subagent.NewFork(sys.Actors(), subagent.NewScripted())
	seed, err = fork.(subagent.Continuable).PrepareContinuable(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, history, seed.History)
	seed.History[0].Role = "changed"
	require.Equal(t, "user", history[0].Role, "the seed is a copy")

	var scripted subagent.Provider = &subagent.ScriptedProvider{ProviderName: "x"}
	_, ok = scripted.(subagent.Continuable)
	require.False(t, ok)
}
