// Package conformance is a reusable test suite for subagent providers: any
// provider driven by a subagent.TurnRunner runs it against itself with
// RunProviderSuite. It checks SPEC §5.2–§5.3's contract from the outside: a start
// resolves to a run whose result always settles (child failures included), a
// dispose mid-turn aborts the run and reaches quiescence, dispose is idempotent,
// capabilities the provider lacks are refused before it starts, and a provider
// that claims depthLimit enforces it.
package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/troupetest"
)

// Factory builds the provider under test on sys, running its turns with runner.
// It is called once per check, each time on a fresh System.
type Factory func(sys *troupe.System, runner subagent.TurnRunner) subagent.Provider

// budget bounds every wait of the suite; nothing waits for it to pass.
const budget = 10 * time.Second

// RunProviderSuite runs every check against the provider f builds. Checks that do
// not apply to it (no capability is lacking; no depthLimit) are skipped with the
// reason. It must not run in parallel with other tests: the cancel check verifies
// that no goroutine outlives the run.
func RunProviderSuite(t *testing.T, f Factory) {
	t.Run("StartResult", func(t *testing.T) { startResult(t, f) })
	t.Run("ChildFailureResolves", func(t *testing.T) { childFailureResolves(t, f) })
	t.Run("CancelMidTurn", func(t *testing.T) { cancelMidTurn(t, f) })
	t.Run("DisposeTwice", func(t *testing.T) { disposeTwice(t, f) })
	t.Run("CapabilityRefusal", func(t *testing.T) { capabilityRefusal(t, f) })
	t.Run("Depth", func(t *testing.T) { depth(t, f) })
}

// bench is one check's world: a System, a Runtime and the provider, registered.
type bench struct {
	rt   *subagent.Runtime
	p    subagent.Provider
	name string
}

func setup(t *testing.T, f Factory, runner subagent.TurnRunner) *bench {
	t.Helper()
	sys, logs := troupetest.NewSystem(t)
	rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), slog.New(logs))
	require.NoError(t, err)
	p := f(sys, runner)
	require.NotNil(t, p, "the factory built no provider")
	_, err = rt.RegisterProvider(t.Context(), sys.Scope(), p)
	require.NoError(t, err)
	return &bench{rt: rt, p: p, name: p.Name()}
}

func ctxFor(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), budget)
	t.Cleanup(cancel)
	return c
}

// start starts a run and makes sure it is disposed when the check ends.
func (b *bench) start(t *testing.T, req subagent.Request) *subagent.Run {
	t.Helper()
	run, err := b.rt.Start(ctxFor(t), b.name, req, nil)
	require.NoError(t, err)
	require.NotNil(t, run)
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), budget)
		defer cancel()
		_ = run.Dispose(c)
	})
	return run
}

func result(t *testing.T, run *subagent.Run) subagent.Result {
	t.Helper()
	res, err := run.Result(ctxFor(t))
	require.NoError(t, err, "a result rejects only on an infrastructure fault")
	return res
}

func parent() subagent.Parent {
	return subagent.Parent{Session: "suite-parent", History: []subagent.Message{
		{Role: "user", Content: []subagent.Block{{Type: "text", Text: "earlier question"}}},
		{Role: "assistant", Content: []subagent.Block{{Type: "text", Text: "earlier answer"}}},
	}}
}

func startResult(t *testing.T, f Factory) {
	runner := subagent.NewScripted(subagent.Reply{Partial: "thinking", Text: "hello"})
	b := setup(t, f, runner)
	run := b.start(t, subagent.Request{Prompt: "say hello", Label: "greet", Parent: parent()})
	require.NotEmpty(t, run.ID())
	res := result(t, run)
	require.Equal(t, subagent.StopCompleted, res.StopReason)
	require.Equal(t, "hello", res.Text(), "the output is the last non-empty assistant message")
	require.NoError(t, run.Dispose(ctxFor(t)))

	turns := runner.Turns()
	require.Len(t, turns, 1)
	require.Equal(t, "say hello", turns[0].Input.Text())
	require.Equal(t, 1, turns[0].Depth, "a child of a depth-0 parent is at depth 1")
	if b.p.InheritsParentContext() {
		got, err := turns[0].History.Messages(ctxFor(t))
		require.NoError(t, err)
		require.Equal(t, parent().History, got, "a provider that inherits the parent's context sees its turns")
		require.Equal(t, len(parent().History), turns[0].History.Len())
	} else {
		require.Zero(t, turns[0].History.Len(), "a provider that does not inherit the parent's context starts fresh")
		got, err := turns[0].History.Messages(ctxFor(t))
		require.NoError(t, err)
		require.Empty(t, got)
	}

	second := b.start(t, subagent.Request{Prompt: "again", Parent: parent()})
	require.NotEqual(t, run.ID(), second.ID(), "run ids are unique within the parent")
	require.Equal(t, subagent.StopCompleted, result(t, second).StopReason)
}

// panicking is a runner that panics in its turn.
type panicking struct{}

func (panicking) RunTurn(context.Context, subagent.Turn) (subagent.TurnResult, error) {
	panic("runner bug")
}

func childFailureResolves(t *testing.T, f Factory) {
	for name, runner := range map[string]subagent.TurnRunner{
		"runner error": subagent.NewScripted(subagent.Reply{Err: errors.New("model unavailable")}),
		"runner panic": panicking{},
		"stop reason":  subagent.NewScripted(subagent.Reply{Text: "partial", StopReason: subagent.StopMaxTokens, Diagnostic: "ran out"}),
	} {
		t.Run(name, func(t *testing.T) {
			b := setup(t, f, runner)
			run := b.start(t, subagent.Request{Prompt: "p", Parent: parent()})
			res := result(t, run)
			require.NoError(t, run.Dispose(ctxFor(t)))
			switch name {
			case "runner error":
				require.Equal(t, subagent.StopError, res.StopReason)
				require.Contains(t, res.Diagnostic, "model unavailable")
			case "runner panic":
				require.Equal(t, subagent.StopError, res.StopReason)
				require.Contains(t, res.Diagnostic, "runner bug")
			default:
				require.Equal(t, subagent.Result{Output: []subagent.Block{{Type: "text", Text: "partial"}},
					StopReason: subagent.StopMaxTokens, Diagnostic: "ran out"}, res)
			}
		})
	}
}

// gated is a runner whose turns block until their ctx ends; it announces each
// turn's start and its return.
type gated struct {
	entered chan struct{}
	exited  chan struct{}
}

func newGated() *gated {
	return &gated{entered: make(chan struct{}, 4), exited: make(chan struct{}, 4)}
}

func (g *gated) RunTurn(ctx context.Context, _ subagent.Turn) (subagent.TurnResult, error) {
	defer func() { g.exited <- struct{}{} }()
	g.entered <- struct{}{}
	<-ctx.Done()
	return subagent.TurnResult{}, context.Cause(ctx)
}

func recv(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(budget):
		t.Fatalf("%s did not happen", what)
	}
}

func cancelMidTurn(t *testing.T, f Factory) {
	g := newGated()
	b := setup(t, f, g)
	before := goleak.IgnoreCurrent()
	run := b.start(t, subagent.Request{Prompt: "p", Parent: parent()})
	recv(t, g.entered, "the turn's start")
	select {
	case <-run.Done():
		t.Fatal("the result settled while the turn was still blocked")
	default:
	}

	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs { // two concurrent disposals wait for the same quiescence
		wg.Go(func() { errs[i] = run.Dispose(ctxFor(t)) })
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	select {
	case <-g.exited:
	default:
		t.Fatal("Dispose returned while the turn was still running: no quiescence")
	}
	res := result(t, run)
	require.Equal(t, subagent.StopAborted, res.StopReason)
	goleak.VerifyNone(t, before)
}

func disposeTwice(t *testing.T, f Factory) {
	b := setup(t, f, subagent.NewScripted(subagent.Reply{Text: "done"}))
	run := b.start(t, subagent.Request{Prompt: "p", Parent: parent()})
	require.Equal(t, subagent.StopCompleted, result(t, run).StopReason)
	first := run.Dispose(ctxFor(t))
	second := run.Dispose(ctxFor(t))
	require.Equal(t, first, second, "every Dispose returns the same disposal's error")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	require.Equal(t, first, run.Dispose(cancelled), "a finished disposal answers even a done ctx")
	require.Equal(t, subagent.StopCompleted, result(t, run).StopReason, "disposal leaves a settled result as it was")
}

// capabilityOptions are the request options of each capability, in SPEC §5.2's
// fixed check order.
var capabilityOptions = []struct {
	name  string
	has   func(subagent.Capabilities) bool
	apply func(*subagent.Request)
}{
	{"outputSchema", func(c subagent.Capabilities) bool { return c.OutputSchema },
		func(r *subagent.Request) { r.OutputSchema = json.RawMessage(`{"type":"object"}`) }},
	{"depthLimit", func(c subagent.Capabilities) bool { return c.DepthLimit },
		func(r *subagent.Request) { d := int64(10); r.MaxDepth = &d }},
	{"toolFilter", func(c subagent.Capabilities) bool { return c.ToolFilter },
		func(r *subagent.Request) { r.ToolFilter = &subagent.ToolFilter{Deny: []string{"bash"}} }},
	{"persona", func(c subagent.Capabilities) bool { return c.Persona },
		func(r *subagent.Request) { r.Persona = "terse" }},
}

func capabilityRefusal(t *testing.T, f Factory) {
	runner := subagent.NewScripted(subagent.Reply{Text: "never"})
	b := setup(t, f, runner)
	caps := b.p.Capabilities()
	var lacking []string
	all := subagent.Request{Prompt: "p", Parent: parent()}
	for _, c := range capabilityOptions {
		if c.has(caps) {
			continue
		}
		lacking = append(lacking, c.name)
		c.apply(&all)
		one := subagent.Request{Prompt: "p", Parent: parent()}
		c.apply(&one)
		_, err := b.rt.Start(ctxFor(t), b.name, one, nil)
		requireUnsupported(t, err, b.name, c.name)
	}
	if len(lacking) == 0 {
		t.Skipf("provider %q claims every capability: nothing to refuse", b.name)
	}
	// Every capability requested at once: the first lacking one, in the fixed order.
	for _, c := range capabilityOptions {
		c.apply(&all)
	}
	_, err := b.rt.Start(ctxFor(t), b.name, all, nil)
	requireUnsupported(t, err, b.name, lacking[0])
	require.Empty(t, runner.Turns(), "a refused request never reaches the provider")
}

func requireUnsupported(t *testing.T, err error, provider, capability string) {
	t.Helper()
	require.ErrorIs(t, err, subagent.ErrUnsupportedCapability)
	var coded *messages.Error
	require.ErrorAs(t, err, &coded)
	require.Equal(t, subagent.CodeUnsupportedCapability, coded.Code)
	require.Equal(t, fmt.Sprintf("subagent provider %q does not support the %q capability", provider, capability), err.Error())
}

func depth(t *testing.T, f Factory) {
	runner := subagent.NewScripted(subagent.Reply{Text: "deep enough"})
	b := setup(t, f, runner)
	if !b.p.Capabilities().DepthLimit {
		t.Skipf("provider %q does not claim depthLimit: depth is its own business", b.name)
	}
	for _, tc := range []struct {
		parent   subagent.Parent
		maxDepth int64
		want     int
	}{
		{subagent.Parent{Session: "suite-parent", Depth: 3}, 3, 4},
		{subagent.Parent{Session: "suite-parent", SubagentDepth: 3}, 3, 4},
		{subagent.Parent{Session: "suite-parent"}, 0, 1},
	} {
		d := tc.maxDepth
		_, err := b.rt.Start(ctxFor(t), b.name, subagent.Request{Prompt: "p", MaxDepth: &d, Parent: tc.parent}, nil)
		var de *subagent.DepthError
		require.ErrorAs(t, err, &de, "depth %d over maxDepth %d", tc.want, tc.maxDepth)
		require.Equal(t, subagent.DepthError{AttemptedDepth: tc.want, MaxDepth: tc.maxDepth}, *de)
		require.Equal(t, fmt.Sprintf("subagent depth %d exceeds maxDepth %d", tc.want, tc.maxDepth), err.Error())
	}
	require.Empty(t, runner.Turns(), "a refused child never runs")

	d := int64(3)
	run := b.start(t, subagent.Request{Prompt: "p", MaxDepth: &d, Parent: subagent.Parent{Session: "suite-parent", Depth: 2}})
	require.Equal(t, subagent.StopCompleted, result(t, run).StopReason, "depth 3 is within maxDepth 3")
	require.Equal(t, 3, runner.Turns()[0].Depth)
}

// ExternalFactory builds a provider whose children are other programs (the ACP
// provider): the suite cannot script their turns, so it checks what holds for any
// turn. It is called once per check, each time on a fresh System.
type ExternalFactory func(t *testing.T, sys *troupe.System) subagent.Provider

// RunExternalProviderSuite runs the checks that need no scripted turn against a
// provider of external children: a start resolves to a run whose result settles
// completed with output (prompt is a prompt the child completes), run ids are
// unique, a dispose right after the start aborts the turn and reaches quiescence
// (no goroutine outlives it), dispose is idempotent, capabilities it lacks are
// refused, and a claimed depthLimit is enforced. Child failures cannot be
// scripted here: the provider's own cases cover them.
func RunExternalProviderSuite(t *testing.T, f ExternalFactory, prompt string) {
	factory := func(t *testing.T) *bench {
		sys, logs := troupetest.NewSystem(t)
		rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), slog.New(logs))
		require.NoError(t, err)
		p := f(t, sys)
		require.NotNil(t, p, "the factory built no provider")
		_, err = rt.RegisterProvider(t.Context(), sys.Scope(), p)
		require.NoError(t, err)
		return &bench{rt: rt, p: p, name: p.Name()}
	}
	t.Run("StartResult", func(t *testing.T) {
		b := factory(t)
		run := b.start(t, subagent.Request{Prompt: prompt, Label: "greet", Parent: parent()})
		require.NotEmpty(t, run.ID())
		res := result(t, run)
		require.Equal(t, subagent.StopCompleted, res.StopReason, "diagnostic: %s", res.Diagnostic)
		require.NotEmpty(t, res.Text(), "a completed turn has output")
		require.NoError(t, run.Dispose(ctxFor(t)))
		second := b.start(t, subagent.Request{Prompt: prompt, Parent: parent()})
		require.NotEqual(t, run.ID(), second.ID(), "run ids are unique within the parent")
		require.Equal(t, subagent.StopCompleted, result(t, second).StopReason)
	})
	t.Run("CancelMidTurn", func(t *testing.T) {
		b := factory(t)
		before := goleak.IgnoreCurrent()
		run := b.start(t, subagent.Request{Prompt: prompt, Parent: parent()})
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs { // two concurrent disposals wait for the same quiescence
			wg.Go(func() { errs[i] = run.Dispose(ctxFor(t)) })
		}
		wg.Wait()
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
		select {
		case <-run.Done():
		default:
			t.Fatal("Dispose returned before the result settled: no quiescence")
		}
		require.Equal(t, subagent.StopAborted, result(t, run).StopReason)
		goleak.VerifyNone(t, before)
	})
	t.Run("DisposeTwice", func(t *testing.T) {
		b := factory(t)
		run := b.start(t, subagent.Request{Prompt: prompt, Parent: parent()})
		require.Equal(t, subagent.StopCompleted, result(t, run).StopReason)
		first := run.Dispose(ctxFor(t))
		require.Equal(t, first, run.Dispose(ctxFor(t)), "every Dispose returns the same disposal's error")
		cancelled, cancel := context.WithCancel(context.Background())
		cancel()
		require.Equal(t, first, run.Dispose(cancelled), "a finished disposal answers even a done ctx")
		require.Equal(t, subagent.StopCompleted, result(t, run).StopReason, "disposal leaves a settled result as it was")
	})
	t.Run("CapabilityRefusal", func(t *testing.T) {
		b := factory(t)
		caps := b.p.Capabilities()
		var lacking []string
		all := subagent.Request{Prompt: prompt, Parent: parent()}
		for _, c := range capabilityOptions {
			if c.has(caps) {
				continue
			}
			lacking = append(lacking, c.name)
			one := subagent.Request{Prompt: prompt, Parent: parent()}
			c.apply(&one)
			_, err := b.rt.Start(ctxFor(t), b.name, one, nil)
			requireUnsupported(t, err, b.name, c.name)
		}
		if len(lacking) == 0 {
			t.Skipf("provider %q claims every capability: nothing to refuse", b.name)
		}
		for _, c := range capabilityOptions {
			c.apply(&all)
		}
		_, err := b.rt.Start(ctxFor(t), b.name, all, nil)
		requireUnsupported(t, err, b.name, lacking[0])
	})
	t.Run("Depth", func(t *testing.T) {
		b := factory(t)
		if !b.p.Capabilities().DepthLimit {
			t.Skipf("provider %q does not claim depthLimit: depth is its own business", b.name)
		}
		d := int64(0)
		_, err := b.rt.Start(ctxFor(t), b.name, subagent.Request{Prompt: prompt, MaxDepth: &d, Parent: subagent.Parent{Session: "suite-parent"}}, nil)
		var de *subagent.DepthError
		require.ErrorAs(t, err, &de)
	})
}
