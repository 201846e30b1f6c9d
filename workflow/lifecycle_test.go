package workflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/workflow"
)

// A provider call that outlasts the dispose grace is abandoned by the run, not
// leaked: when it finally returns a run, that run is disposed.
func TestWorkflowAbandonedStartIsDisposedWhenItReturns(t *testing.T) {
	e := newEnv(t, func(c *workflow.Config) { c.DisposeGraceMs = i64(30) })
	e.stub.set(func(s *stub) { s.mu.deferred, s.mu.ctxDeaf = true, true })
	run := e.start(e.request("return await agent('deaf')"))
	r := e.stub.awaitStarts(t, 1)[0]
	began := time.Now()
	e.dispose(run)
	require.Less(t, time.Since(began), 2*time.Second, "Dispose is bounded by the grace")
	require.Equal(t, "workflow run cancelled: workflow disposed", result(t, run).Error)
	r.publish <- nil // the deaf provider finally publishes
	e.stub.await(t, "the abandoned run's dispose", func() bool { return e.stub.disposes(r) == 1 })
}

// System shutdown (the global scope's disposal) cancels and disposes every live run
// with "workflow engine stopped", then stops the engine; later starts are refused.
func TestWorkflowShutdownStopsLiveRuns(t *testing.T) {
	e := newEnv(t, func(c *workflow.Config) { c.DisposeGraceMs = i64(50) })
	e.stub.set(func(s *stub) { s.mu.mode = manual })
	parked := e.start(e.request("await new Promise(() => {})"))
	waiting := e.start(e.request("return await agent('p')"))
	r := e.stub.awaitStarts(t, 1)[0]
	e.events.await(t, waiting.ID(), workflow.EventAgentStart)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, e.sys.Shutdown(ctx))
	for _, run := range []*workflow.Run{parked, waiting} {
		res := result(t, run)
		require.Equal(t, workflow.StopCancelled, res.StopReason)
		require.Equal(t, "workflow run cancelled: workflow engine stopped", res.Error)
		require.NoError(t, run.Dispose(ctx))
	}
	require.Equal(t, 1, e.stub.disposes(r))
	require.Equal(t, "workflow engine stopped", context.Cause(r.ctx).Error())
	_, err := e.eng.Start(ctx, e.request("return 1"))
	require.ErrorIs(t, err, workflow.ErrStopped)
}
