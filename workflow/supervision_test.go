package workflow_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/supervision"
	"github.com/troupe-rt/troupe/workflow"
	"github.com/troupe-rt/troupe/workflow/workflowtest"
)

// The run and script actors are nodes of the supervision tree, under the engine.
func TestWorkflowRunAndScriptAreSupervisionNodes(t *testing.T) {
	e := newEnv(t)
	e.stub.Set(func(s *workflowtest.Behaviour) { s.Mode = manual })
	run := e.start(e.request("return await agent('p')"))
	r := e.stub.AwaitStarts(t, 1)[0]
	snap, err := e.sys.Tree().Snapshot(t.Context())
	require.NoError(t, err)
	runNode, ok := snap.Node(supervision.Ref{Kind: workflow.KindRun, ID: run.ID()})
	require.True(t, ok, snap.String())
	require.Equal(t, workflow.KindEngine, runNode.Parent.Kind)
	require.Equal(t, "parent-A", runNode.Session)
	scriptNode, ok := snap.Node(supervision.Ref{Kind: workflow.KindScript, ID: run.ID()})
	require.True(t, ok, snap.String())
	require.Equal(t, runNode.Ref, scriptNode.Parent)

	e.stub.Finish(t, r, text("ok"), nil)
	require.Equal(t, `"ok"`, string(result(t, run).Value))
	e.dispose(run)
	require.Eventually(t, func() bool { // the inspector applies the stops in order; poll its snapshot, no sleep
		snap, err := e.sys.Tree().Snapshot(t.Context())
		require.NoError(t, err)
		_, live := snap.Node(supervision.Ref{Kind: workflow.KindRun, ID: run.ID()})
		return !live
	}, 5*time.Second, time.Millisecond)
	stats, err := e.sys.Tree().Stats(t.Context())
	require.NoError(t, err)
	require.Zero(t, stats.Rejected, "the tree refused none of the engine's events: %v", stats.Rejections)
}

// A panic inside the engine settles the run failed, never the host: the run actor's
// own panic settles error with its text, reaps, and other runs go on.
func TestWorkflowRunActorPanicSettlesTheRunNotTheHost(t *testing.T) {
	e := newEnv(t)
	e.stub.Set(func(s *workflowtest.Behaviour) { s.Mode = manual })
	run := e.start(e.request("return await agent('p')"))
	r := e.stub.AwaitStarts(t, 1)[0]
	e.events.Await(t, run.ID(), workflow.EventAgentStart)
	run.PanicRunActor()
	res := result(t, run)
	require.Equal(t, workflow.Result{Value: json.RawMessage("null"), StopReason: workflow.StopError, Error: "workflow run actor failed: injected run crash", AgentsStarted: 1}, res)
	e.dispose(run)
	require.Equal(t, "workflow script gone", context.Cause(r.Ctx).Error())
	evs := e.events.Of(run.ID())
	require.Equal(t, workflow.EventEnd, evs[len(evs)-1].Type)

	e.stub.Set(func(s *workflowtest.Behaviour) { s.Mode = auto })
	require.Equal(t, `"stub reply"`, string(e.runScript("return await agent('next')").Value))
}

// The default provider, spawn, with a scripted turn runner (only the LLM is faked):
// children are real in-process child agents; a blocked child is stopped by the
// grace after a cancel (spawn's children end on Dispose, not on the start ctx).
func TestWorkflowSpawnProviderChildren(t *testing.T) {
	e := newEnv(t)
	runner := &subagent.Scripted{Match: func(turn subagent.Turn) (subagent.Reply, bool) {
		if turn.Input.Text() == "block" {
			return subagent.Reply{Block: true}, true
		}
		return subagent.Reply{Text: "did " + turn.Input.Text()}, true
	}}
	_, err := e.rt.RegisterProvider(t.Context(), e.sys.Scope(), subagent.NewSpawn(e.sys.Actors(), runner))
	require.NoError(t, err)
	eng, err := workflow.NewEngine(workflow.Host{Actors: e.sys.Actors(), Scope: e.sys.Scope(), Inspector: e.sys.Tree().PID(), Logger: slog.New(e.logs)},
		e.sys.Scope(), e.rt, workflow.Config{DisposeGraceMs: i64(100)})
	require.NoError(t, err)
	_, err = eng.Listen(e.sys.Scope(), e.events.Hear)
	require.NoError(t, err)
	run, err := eng.Start(t.Context(), e.request("return await parallel(['a', 'b', 'c'].map(f => () => agent(f)))"))
	require.NoError(t, err)
	res := result(t, run)
	require.NoError(t, run.Dispose(t.Context()))
	require.Equal(t, `["did a","did b","did c"]`, string(res.Value), res.Error)
	require.Len(t, runner.Turns(), 3)
	for _, ev := range filter(e.events.Of(run.ID()), workflow.EventAgentStart) {
		require.Contains(t, ev.Agent.ChildID, "parent-A/spawn-")
	}

	run, err = eng.Start(t.Context(), e.request("return await agent('block')"))
	require.NoError(t, err)
	e.events.Await(t, run.ID(), workflow.EventAgentStart)
	run.Cancel("stop")
	res = result(t, run)
	require.NoError(t, run.Dispose(t.Context()))
	require.Equal(t, workflow.StopCancelled, res.StopReason)
	require.Equal(t, "workflow run cancelled: stop", res.Error)
}
