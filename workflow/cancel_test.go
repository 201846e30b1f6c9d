package workflow_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/troupetest"
	"github.com/troupe-rt/troupe/workflow"
	"github.com/troupe-rt/troupe/workflow/workflowtest"
)

// WORKFLOW.md 6.6 Cancellation

func TestWorkflowW29_CancelReachesTheChild(t *testing.T) {
	e := newEnv(t)
	e.stub.Set(func(s *workflowtest.Behaviour) { s.Mode = manual })
	run := e.start(e.request("return await agent('long job')"))
	r := e.stub.AwaitStarts(t, 1)[0]
	e.events.Await(t, run.ID(), workflow.EventAgentStart)
	run.Cancel("user stopped it")
	res := result(t, run)
	require.Equal(t, workflow.StopCancelled, res.StopReason)
	require.Equal(t, "workflow run cancelled: user stopped it", res.Error)
	require.Equal(t, "null", string(res.Value))
	require.Equal(t, "user stopped it", context.Cause(r.Ctx).Error())
	e.dispose(run)
	require.Equal(t, 1, e.stub.Disposes(r))
	evs := e.events.Of(run.ID())
	ends := filter(evs, workflow.EventAgentEnd)
	require.Len(t, ends, 1)
	require.Equal(t, 1, ends[0].Agent.Seq)
	require.Equal(t, workflow.OutcomeCancelled, ends[0].Outcome)
	require.Equal(t, workflow.ResultInfo{StopReason: workflow.StopCancelled, Error: "workflow run cancelled: user stopped it", AgentsStarted: 1}, evs[len(evs)-1].Result)
}

func TestWorkflowW30_StartSignalAndCancelReasons(t *testing.T) {
	e := newEnv(t)
	e.stub.Set(func(s *workflowtest.Behaviour) { s.Mode = manual })
	done, cancel := context.WithCancel(context.Background())
	cancel()
	run, err := e.eng.Start(done, e.request("log('ran')\nreturn 123"))
	require.NoError(t, err)
	res := result(t, run)
	e.dispose(run)
	require.Equal(t, workflow.Result{Value: []byte("null"), StopReason: workflow.StopCancelled, Error: "workflow run cancelled: workflow start signal already aborted"}, res)
	require.Empty(t, filter(e.events.Of(run.ID()), workflow.EventLog))
	require.Empty(t, e.stub.Runs())

	live, stop := context.WithCancel(context.Background())
	run, err = e.eng.Start(live, e.request("return await agent('job')"))
	require.NoError(t, err)
	e.stub.AwaitStarts(t, 1)
	stop()
	require.Equal(t, "workflow run cancelled: workflow signal aborted", result(t, run).Error)
	e.dispose(run)

	run = e.start(e.request("return await agent('never')"))
	e.stub.AwaitStarts(t, 2)
	run.Cancel("")
	run.Cancel("later")
	require.Equal(t, "workflow run cancelled: workflow cancelled", result(t, run).Error)
	e.dispose(run)

	e.stub.Set(func(s *workflowtest.Behaviour) { s.Mode = auto })
	live, stop = context.WithCancel(context.Background())
	run, err = e.eng.Start(live, e.request("return await agent('quick')"))
	require.NoError(t, err)
	res = result(t, run)
	require.Equal(t, workflow.StopCompleted, res.StopReason)
	stop()
	run.Cancel("x")
	e.dispose(run)
	require.Equal(t, res, result(t, run))
	require.Len(t, filter(e.events.Of(run.ID()), workflow.EventEnd), 1)
	require.Equal(t, workflow.StopCompleted, filter(e.events.Of(run.ID()), workflow.EventEnd)[0].Result.StopReason)
	require.Len(t, e.stub.Runs(), 3, "no stub run was added")
	require.Equal(t, 1, e.stub.Disposes(e.stub.Runs()[2]), "the completed run's child was disposed once, by its settlement")
}

func TestWorkflowW31_HooksKeepThrowingAfterCancel(t *testing.T) {
	e := newEnv(t)
	e.stub.Set(func(s *workflowtest.Behaviour) { s.Mode = manual })
	run := e.start(e.request("phase('before')\ntry { await agent('x') } catch (e) {}\ntry { phase('after') } catch (e) {}\ntry { log('after') } catch (e) {}\ntry { await parallel([() => 'ran']) } catch (e) {}\ntry { await pipeline(['item'], p => p) } catch (e) {}\nreturn 'survived by catching'"))
	e.stub.AwaitStarts(t, 1)
	e.events.Await(t, run.ID(), workflow.EventAgentStart)
	run.Cancel("stop everything")
	res := result(t, run)
	e.dispose(run)
	require.Equal(t, workflow.StopCancelled, res.StopReason)
	require.Equal(t, "workflow run cancelled: stop everything", res.Error)
	evs := e.events.Of(run.ID())
	phases := filter(evs, workflow.EventPhase)
	require.Len(t, phases, 1)
	require.Equal(t, "before", phases[0].Title)
	require.Empty(t, filter(evs, workflow.EventLog))
	ends := filter(evs, workflow.EventAgentEnd)
	require.Len(t, ends, 1)
	require.Equal(t, workflow.OutcomeCancelled, ends[0].Outcome)
}

func TestWorkflowW32_GraceSettlesAParkedScript(t *testing.T) {
	e := newEnv(t, func(c *workflow.Config) { c.DisposeGraceMs = i64(50) })
	run := e.start(e.request("await new Promise(() => {})\nreturn 'unreachable'"))
	e.events.Await(t, run.ID(), workflow.EventStart)
	began := time.Now()
	run.Cancel("user aborted")
	res := result(t, run)
	require.Less(t, time.Since(began), 2*time.Second)
	require.Equal(t, workflow.Result{Value: []byte("null"), StopReason: workflow.StopCancelled, Error: "workflow run cancelled: user aborted"}, res)
	e.dispose(run)
	ends := filter(e.events.Of(run.ID()), workflow.EventEnd)
	require.Len(t, ends, 1)
	require.Equal(t, workflow.ResultInfo{StopReason: workflow.StopCancelled, Error: "workflow run cancelled: user aborted"}, ends[0].Result)
}

func TestWorkflowW33_DisposeBoundsAndIsIdempotent(t *testing.T) {
	e := newEnv(t, func(c *workflow.Config) { c.DisposeGraceMs = i64(50) })
	run := e.start(e.request("await new Promise(() => {})\nreturn 'unreachable'"))
	began := time.Now()
	e.dispose(run)
	require.Less(t, time.Since(began), 2*time.Second)
	require.Equal(t, "workflow run cancelled: workflow disposed", result(t, run).Error)

	slow := newEnv(t, func(c *workflow.Config) { c.DisposeGraceMs = i64(44444) })
	run = slow.start(slow.request("return 1"))
	require.Equal(t, "1", string(result(t, run).Value))
	began = time.Now()
	slow.dispose(run)
	slow.dispose(run)
	require.Less(t, time.Since(began), time.Second)
}

func TestWorkflowW34_StrayCallAfterSettlement(t *testing.T) {
	e := newEnv(t)
	e.stub.Set(func(s *workflowtest.Behaviour) { s.Deferred = true })
	run := e.start(e.request("agent('stray')\nreturn 'done'"))
	res := result(t, run)
	require.Equal(t, `"done"`, string(res.Value), res.Error)
	r := e.stub.AwaitStarts(t, 1)[0]
	e.dispose(run)
	select {
	case <-r.Returned:
	default:
		t.Fatal("Dispose returned before the stray's Start did")
	}
	require.Equal(t, "workflow settled", context.Cause(r.Ctx).Error())
	require.Empty(t, filter(e.events.Of(run.ID()), workflow.EventAgentStart))
	require.Empty(t, filter(e.events.Of(run.ID()), workflow.EventAgentEnd))
}

func TestWorkflowW40_CancelClosesEveryPublishedCall(t *testing.T) {
	e := newEnv(t)
	e.stub.Set(func(s *workflowtest.Behaviour) { s.Mode = manual })
	run := e.start(e.request("await parallel([() => agent('a'), () => agent('b')])\nreturn 'unreachable'"))
	e.stub.AwaitStarts(t, 2)
	e.events.AwaitN(t, run.ID(), workflow.EventAgentStart, 2)
	run.Cancel("user stop")
	res := result(t, run)
	e.dispose(run)
	require.Equal(t, workflow.StopCancelled, res.StopReason)
	evs := e.events.Of(run.ID())
	ends := filter(evs, workflow.EventAgentEnd)
	require.Len(t, ends, 2)
	require.NotEqual(t, ends[0].Agent.Seq, ends[1].Agent.Seq)
	for _, ev := range ends {
		require.Equal(t, workflow.OutcomeCancelled, ev.Outcome)
	}
	require.Equal(t, workflow.EventEnd, evs[len(evs)-1].Type)
}

// WORKFLOW.md 6.7 Script failure

func TestWorkflowW42_ScriptCrashSettlesErrorAndReaps(t *testing.T) {
	e := newEnv(t)
	var handle atomic.Pointer[workflow.Run]
	e.stub.Set(func(s *workflowtest.Behaviour) {
		s.NeverSettle = true
		s.DisposeErr = errors.New("dispose exploded during reap")
		s.OnCtx = func() {
			if r := handle.Load(); r != nil {
				r.Cancel("reentered")
			}
		}
	})
	run := e.start(e.request("return await agent('doomed')"))
	handle.Store(run)
	e.events.Await(t, run.ID(), workflow.EventAgentStart)
	run.CrashScript()
	res := result(t, run)
	require.Equal(t, workflow.StopError, res.StopReason)
	require.Equal(t, "workflow script failed: injected script crash", res.Error)
	require.Equal(t, 1, res.AgentsStarted)
	e.dispose(run)
	r := e.stub.Runs()[0]
	require.Equal(t, "workflow script gone", context.Cause(r.Ctx).Error())
	evs := e.events.Of(run.ID())
	n := len(evs)
	require.Equal(t, []string{workflow.EventAgentEnd, workflow.EventEnd}, types(evs[n-2:]))
	require.Equal(t, 1, evs[n-2].Agent.Seq)
	require.Equal(t, workflow.OutcomeCancelled, evs[n-2].Outcome)
	require.Equal(t, workflow.ResultInfo{StopReason: workflow.StopError, Error: "workflow script failed: injected script crash", AgentsStarted: 1}, evs[n-1].Result)
	require.Len(t, filter(evs, workflow.EventEnd), 1)
	require.True(t, e.logs.Contains("workflow: child dispose failed: dispose exploded during reap"), e.logs.Lines())
}

// WORKFLOW.md 6.8 Events and engine

func TestWorkflowW45_EventInvariantsAndRunIdentity(t *testing.T) {
	e := newEnv(t) // the W45 checker is installed by newEnv in every case
	a := e.start(e.request("return 1"))
	b := e.start(e.request("return 2"))
	require.NotEqual(t, a.ID(), b.ID())
	for _, run := range []*workflow.Run{a, b} {
		result(t, run)
		e.dispose(run)
		start := e.events.Of(run.ID())[0]
		require.Equal(t, workflow.EventStart, start.Type)
		require.Equal(t, run.Meta(), start.Run.Meta)
		require.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, run.ID())
	}
	// the checker itself fails on a broken stream
	bad := newRecorder()
	bad.Hear(workflow.Event{Type: workflow.EventAgentStart, Run: workflow.RunInfo{ID: "r"}})
	bad.Hear(workflow.Event{Type: workflow.EventStart, Run: workflow.RunInfo{ID: "r", Meta: workflow.Meta{Name: "n", Description: "d"}}})
	bad.Hear(workflow.Event{Type: workflow.EventAgentStart, Run: workflow.RunInfo{ID: "r", Meta: workflow.Meta{Name: "n", Description: "d"}}, Agent: workflow.AgentInfo{Seq: 1, ChildID: "c"}})
	bad.Hear(workflow.Event{Type: workflow.EventEnd, Run: workflow.RunInfo{ID: "r", Meta: workflow.Meta{Name: "n", Description: "d"}}, Result: workflow.ResultInfo{StopReason: workflow.StopCompleted}})
	require.Equal(t, []string{
		`workflow event has no matching workflow/start for run "r"`,
		"workflow/end has 1 agent call(s) without workflow/agent-end",
		"workflow/end agentsStarted must be a safe integer covering every observed agent start",
	}, bad.Violations())
}

func TestWorkflowW46_ListenersAreContainedAndScoped(t *testing.T) {
	e := newEnv(t)
	_, err := e.eng.Listen(e.sys.Scope(), func(ev workflow.Event) {
		if ev.Type == workflow.EventPhase {
			panic("bad listener")
		}
	})
	require.NoError(t, err)
	heard := make(chan string, 4)
	_, err = e.eng.Listen(e.sys.Scope(), func(ev workflow.Event) {
		if ev.Type == workflow.EventPhase {
			heard <- ev.Title
		}
	})
	require.NoError(t, err)
	res := e.runScript("phase('Scan')\nreturn 1")
	require.Equal(t, workflow.StopCompleted, res.StopReason)
	require.Equal(t, "Scan", <-heard)
	require.Empty(t, heard)
	n := 0
	for _, l := range e.logs.Lines() {
		if l == "workflow: workflow/phase listener threw: bad listener" {
			n++
		}
	}
	require.Equal(t, 1, n)

	b := troupetest.Agent(t, e.sys, "parent-B")
	scoped, global := make(chan string, 8), make(chan string, 8)
	_, err = e.eng.Listen(e.parent.Scope(), func(ev workflow.Event) {
		if ev.Type == workflow.EventStart {
			scoped <- ev.Run.Parent
		}
	})
	require.NoError(t, err)
	_, err = e.eng.Listen(e.sys.Scope(), func(ev workflow.Event) {
		if ev.Type == workflow.EventStart {
			global <- ev.Run.Parent
		}
	})
	require.NoError(t, err)
	e.runScript("return 1")
	reqB := e.request("return 2")
	reqB.Parent = b
	runB := e.start(reqB)
	result(t, runB)
	e.dispose(runB)
	require.Equal(t, "parent-A", <-scoped)
	require.Empty(t, scoped)
	require.ElementsMatch(t, []string{"parent-A", "parent-B"}, []string{<-global, <-global})
}

func TestWorkflowW48_EngineScopeDisposalKeepsReturnedRuns(t *testing.T) {
	e := newEnv(t)
	sc, err := e.sys.Scope().Child("engine")
	require.NoError(t, err)
	e.stub.Set(func(s *workflowtest.Behaviour) {
		s.Reply = func(subagent.ResolvedRequest, int) subagent.Result { return text("survived reload") }
	})
	eng, err := workflow.NewEngine(workflow.Host{Actors: e.sys.Actors(), Scope: e.sys.Scope(), Logger: slog.New(e.logs)}, sc, e.rt, workflow.Config{Provider: str("stub")})
	require.NoError(t, err)
	run, err := eng.Start(context.Background(), e.request("return await agent('after reload')"))
	require.NoError(t, err)
	require.NoError(t, sc.Dispose(context.Background()))
	res := result(t, run)
	require.NoError(t, run.Dispose(context.Background()))
	require.Equal(t, `"survived reload"`, string(res.Value), res.Error)
	require.Equal(t, 1, res.AgentsStarted)
	_, err = eng.Start(context.Background(), e.request("return 1"))
	code, msg := codeOf(t, err)
	require.Equal(t, messages.CodeStopped, code)
	require.Equal(t, "workflow engine is stopped", msg)
}
