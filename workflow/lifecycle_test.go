package workflow_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/workflow"
	"github.com/troupe-rt/troupe/workflow/workflowtest"
)

// A provider call that outlasts the dispose grace is abandoned by the run, not
// leaked: when it finally returns a run, that run is disposed.
func TestWorkflowAbandonedStartIsDisposedWhenItReturns(t *testing.T) {
	e := newEnv(t, func(c *workflow.Config) { c.DisposeGraceMs = i64(30) })
	e.stub.Set(func(s *workflowtest.Behaviour) { s.Deferred, s.CtxDeaf = true, true })
	run := e.start(e.request("return await agent('deaf')"))
	r := e.stub.AwaitStarts(t, 1)[0]
	began := time.Now()
	e.dispose(run)
	require.Less(t, time.Since(began), 2*time.Second, "Dispose is bounded by the grace")
	require.Equal(t, "workflow run cancelled: workflow disposed", result(t, run).Error)
	r.Publish <- nil // the deaf provider finally publishes
	e.stub.Await(t, "the abandoned run's dispose", func() bool { return e.stub.Disposes(r) == 1 })
}

// System shutdown (the global scope's disposal) cancels and disposes every live run
// with "workflow engine stopped", then stops the engine; later starts are refused.
func TestWorkflowShutdownStopsLiveRuns(t *testing.T) {
	e := newEnv(t, func(c *workflow.Config) { c.DisposeGraceMs = i64(50) })
	e.stub.Set(func(s *workflowtest.Behaviour) { s.Mode = manual })
	parked := e.start(e.request("await new Promise(() => {})"))
	waiting := e.start(e.request("return await agent('p')"))
	r := e.stub.AwaitStarts(t, 1)[0]
	e.events.Await(t, waiting.ID(), workflow.EventAgentStart)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, e.sys.Shutdown(ctx))
	for _, run := range []*workflow.Run{parked, waiting} {
		res := result(t, run)
		require.Equal(t, workflow.StopCancelled, res.StopReason)
		require.Equal(t, "workflow run cancelled: workflow engine stopped", res.Error)
		require.NoError(t, run.Dispose(ctx))
	}
	require.Equal(t, 1, e.stub.Disposes(r))
	require.Equal(t, "workflow engine stopped", context.Cause(r.Ctx).Error())
	_, err := e.eng.Start(ctx, e.request("return 1"))
	require.ErrorIs(t, err, workflow.ErrStopped)
}

// Slots pass FIFO in acceptance order (WORKFLOW.md 3.6): with one slot, children
// start strictly in the order their agent() calls were accepted.
func TestWorkflowSlotsPassInAcceptanceOrder(t *testing.T) {
	e := newEnv(t, func(c *workflow.Config) { c.MaxConcurrentAgents = i64(1) })
	e.stub.Set(func(s *workflowtest.Behaviour) { s.Mode = manual })
	run := e.start(e.request("return await parallel(['a', 'b', 'c', 'd'].map(p => () => agent(p)))"))
	for i, want := range []string{"a", "b", "c", "d"} {
		r := e.stub.AwaitStarts(t, i+1)[i]
		require.Equal(t, want, r.Req.Prompt)
		e.stub.Finish(t, r, text(want+"!"), nil)
	}
	res := result(t, run)
	e.dispose(run)
	require.Equal(t, `["a!","b!","c!","d!"]`, string(res.Value), res.Error)
	live, peak := 0, 0
	for _, o := range e.stub.Order() {
		if o[:6] == "start " {
			live++
		} else {
			live--
		}
		peak = max(peak, live)
	}
	require.Equal(t, 1, peak)
}

// A run a provider returns after the run closed is refused and disposed by the run
// actor; a failing dispose is logged (WORKFLOW.md 3.7), and no agent event follows.
func TestWorkflowRunReturnedAfterClosureIsRefusedAndDisposed(t *testing.T) {
	e := newEnv(t)
	e.stub.Set(func(s *workflowtest.Behaviour) {
		s.Deferred, s.CtxDeaf = true, true
		s.DisposeErr = errors.New("refused dispose exploded")
	})
	run := e.start(e.request("try { await agent('late') } catch (e) { return e.code }"))
	r := e.stub.AwaitStarts(t, 1)[0]
	run.Cancel("closed first")
	r.Publish <- nil
	res := result(t, run)
	require.Equal(t, workflow.StopCancelled, res.StopReason)
	e.dispose(run)
	e.stub.Await(t, "the refused run's dispose", func() bool { return e.stub.Disposes(r) == 1 })
	require.Eventually(t, func() bool {
		return e.logs.Contains("workflow: refused child dispose failed: refused dispose exploded")
	},
		5*time.Second, time.Millisecond)
	require.Empty(t, filter(e.events.Of(run.ID()), workflow.EventAgentStart))
}

// Prepare publishes nothing; Launch dispatches workflow/start before it returns, a
// second Launch returns the first run; Observe hears its own run, before listeners.
func TestWorkflowPrepareLaunchObserve(t *testing.T) {
	e := newEnv(t)
	var order []string // appended on the engine actor only; read after the run's end was delivered
	eff, err := e.eng.Listen(e.sys.Scope(), func(ev workflow.Event) {
		if ev.Type == workflow.EventStart || ev.Type == workflow.EventEnd {
			order = append(order, "listener "+ev.Type)
		}
	})
	require.NoError(t, err)
	req := e.request("log('x')\nreturn 1")
	req.Observe = func(ev workflow.Event) { order = append(order, "observe "+ev.Type) }
	p, err := e.eng.Prepare(req)
	require.NoError(t, err)
	require.Empty(t, e.events.All(), "Prepare publishes nothing")
	run, err := p.Launch(context.Background())
	require.NoError(t, err)
	require.Equal(t, workflow.EventStart, e.events.Of(run.ID())[0].Type, "workflow/start is dispatched before Launch returns")
	again, err := p.Launch(context.Background())
	require.NoError(t, err)
	require.Same(t, run, again)
	require.Equal(t, "1", string(result(t, run).Value))
	e.dispose(run) // returns once workflow/end reached every listener
	require.Equal(t, []string{"observe workflow/start", "listener workflow/start", "observe workflow/log",
		"observe workflow/end", "listener workflow/end"}, order)

	require.NoError(t, eff.Run(context.Background())) // unlisten
	other := e.runScript("return 2")
	require.Equal(t, "2", string(other.Value))
	require.Len(t, order, 5, "Observe hears only its own run")
}
