package spec

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/troupetest"
)

// SPEC §8.5: continuable subagents (§6), cases 146–179.

func TestSpec146_StartResolvesAtInboxAcceptanceBeforeAnyModelRequest(t *testing.T) {
	e := newContEnv(t)
	p, s := e.parent(t, "P")
	release := e.store.holdTurns("c")

	id, msgID, err := e.m.Start(ctx(t), p, "spawn", "research", "c", subagent.Request{Prompt: "task"})
	require.NoError(t, err)
	require.Equal(t, "c", id)
	snap, err := e.store.Load(context.Background(), "c")
	require.NoError(t, err)
	require.Len(t, snap.Inbox, 1, "one inbox insertion")
	require.Equal(t, msgID, snap.Inbox[0].ID)
	require.Empty(t, userTexts(t, e.store, "c"), "the log has no prompt yet")
	require.Empty(t, e.runner.inputs(), "no model request yet")

	release()
	requireSettlementNotice(t, s, "c")
	require.Equal(t, []string{"task"}, userTexts(t, e.store, "c"))
	require.Equal(t, []string{"task"}, e.runner.inputs())
}

func TestSpec147_NoPersistenceIsUnavailable(t *testing.T) {
	sys, _ := troupetest.Served(t)
	rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), nil)
	require.NoError(t, err)
	runner := newGateRunner()
	_, err = rt.RegisterProvider(t.Context(), sys.Scope(), subagent.NewSpawn(sys.Actors(), runner))
	require.NoError(t, err)
	m, err := sys.StartContinuations(nil, rt, runner, nil)
	require.NoError(t, err)
	p := troupetest.Agent(t, sys, "P")

	_, _, err = m.Start(ctx(t), p, "spawn", "research", "c", subagent.Request{Prompt: "task"})
	require.Equal(t, subagent.CodePersistenceUnavailable, messages.CodeOf(err))
	requireHinted(t, err, "continuable subagents require session persistence")
	require.Empty(t, runner.inputs())
	require.Nil(t, sys.Jobs().RegisteredAgent(context.Background(), "c"))
}

func TestSpec148_NoAgentServiceIsUnavailable(t *testing.T) {
	sys, _ := troupetest.Served(t)
	rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), nil)
	require.NoError(t, err)
	runner := newGateRunner()
	_, err = rt.RegisterProvider(t.Context(), sys.Scope(), subagent.NewSpawn(sys.Actors(), runner))
	require.NoError(t, err)
	store := session.NewMemory()
	m, err := activation.NewManager(sys.Actors(), activation.Deps{Store: store, Runtime: rt, Runner: runner})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sys.Actors().Root.StopFuture(m.PID()).Wait()) })
	p := troupetest.Agent(t, sys, "P")

	const want = "continuable subagents require the agents service"
	_, _, err = m.Start(ctx(t), p, "spawn", "research", "c", subagent.Request{Prompt: "task"})
	requireSubagentError(t, err, subagent.CodeContinuationUnavailable, want)
	_, err = m.Followup(ctx(t), p, "c", "more", session.Source{Kind: "coordinator"})
	requireSubagentError(t, err, subagent.CodeContinuationUnavailable, want)
	_, err = m.Report(context.Background(), p, "progress", false)
	requireSubagentError(t, err, subagent.CodeContinuationUnavailable, want)

	require.NoError(t, m.Interrupt(context.Background(), "c", activation.Authority{ParentSession: "P"}))
	require.NoError(t, m.Interrupt(context.Background(), "c", activation.Authority{Ancestor: p}))
	require.NoError(t, m.DrainContinuableChildren(ctx(t), p, []string{"c"}))
	require.NoError(t, m.DrainContinuableDescendants(ctx(t), nil))
	ids, err := store.IDs(context.Background())
	require.NoError(t, err)
	require.Empty(t, ids)
	require.Empty(t, runner.inputs())
}

func TestSpec149_ProviderWithoutPrepareContinuableIsUnsupported(t *testing.T) {
	e := newContEnv(t)
	remote := &subagent.ScriptedProvider{ProviderName: "remote", Runner: e.runner}
	_, err := e.rt.RegisterProvider(t.Context(), e.sys.Scope(), remote)
	require.NoError(t, err)
	p, _ := e.parent(t, "P")

	id, msgID, err := e.m.Start(ctx(t), p, "remote", "research", "c", subagent.Request{Prompt: "task"})
	requireSubagentError(t, err, subagent.CodeUnsupportedCapability,
		`subagent provider "remote" does not support continuable children (no prepareContinuable capability)`)
	require.Empty(t, id)
	require.Empty(t, msgID)
	ids, err := e.store.IDs(context.Background())
	require.NoError(t, err)
	require.Empty(t, ids, "no child session")
	require.Empty(t, e.registered("c"), "no child agent")
	require.Zero(t, e.m.Live(context.Background()))
	require.Empty(t, e.runner.inputs())
}

func TestSpec151_AbortBetweenPublicationAndAcceptanceRollsBack(t *testing.T) {
	e := newContEnv(t)
	p, s := e.parent(t, "P")
	c, cancel := context.WithCancel(ctx(t))
	// Publication: the child's session is activated and its Activation and agent
	// are about to exist; the caller aborts right then.
	e.store.setOnActivate(func(id string) {
		if id == "c" {
			cancel()
		}
	})

	id, msgID, err := e.m.Start(c, p, "spawn", "research", "c", subagent.Request{Prompt: "task"})
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, id)
	require.Empty(t, msgID)
	require.Zero(t, e.m.Live(context.Background()), "no Activation")
	require.Empty(t, e.registered("c"), "no registered child agent")
	ids, err := e.store.IDs(context.Background())
	require.NoError(t, err)
	require.Empty(t, ids)

	// A later child's notice is the first (and only) call the parent gets.
	e.store.setOnActivate(nil)
	e.start(t, p, "d", "other")
	requireSettlementNotice(t, s, "d")
	require.Equal(t, "d", e.events.next(t).ID, "the aborted child emitted no subagent/start")
	s.none(t)
	require.Equal(t, []string{"other"}, e.runner.inputs())
}

func TestSpec153_FollowupsDuringAHeldTurnRunInOrderOnTheSameAgent(t *testing.T) {
	e := newContEnv(t)
	p, s := e.parent(t, "P")
	release := e.runner.hold("task")
	e.start(t, p, "c", "task")
	e.runner.waitStarted(t, "task")
	agent := e.runner.agent(t, "c")
	require.NotNil(t, agent)

	e.followup(t, p, "c", "parked B")
	e.followup(t, p, "c", "parked C")
	require.Same(t, agent, e.runner.agent(t, "c"), "the same Activation took both")
	require.Equal(t, agent.PID().Id, e.registered("c"))
	require.Equal(t, 1, e.m.Live(context.Background()))

	release()
	requireSettlementNotice(t, s, "c")
	require.Equal(t, []string{"task", "parked B", "parked C"}, userTexts(t, e.store, "c"))
	snap, err := e.store.Load(context.Background(), "c")
	require.NoError(t, err)
	require.Equal(t, uint64(1), snap.Header.Epoch, "no cold resume")
}

func TestSpec154_FollowupAfterSettlementColdResumesWithANewEventPair(t *testing.T) {
	e := newContEnv(t)
	p, s := e.parent(t, "P")
	e.start(t, p, "c", "task")
	start1 := e.events.next(t)
	end1 := e.events.next(t)
	require.Equal(t, []string{subagent.EventStart, subagent.EventEnd}, []string{start1.Type, end1.Type})
	require.Equal(t, start1.RunID, end1.RunID)
	require.Equal(t, "c", end1.ID)
	require.Equal(t, "spawn", end1.Provider)
	require.Equal(t, "spawn", start1.Provider)
	require.True(t, end1.Parent.Is(p), "scoped to the delegating parent")
	require.Equal(t, subagent.StopCompleted, end1.StopReason)
	requireSettlementNotice(t, s, "c")
	require.Zero(t, e.m.Live(context.Background()))

	e.followup(t, p, "c", "more")
	start2 := e.events.next(t)
	end2 := e.events.next(t)
	require.Equal(t, []string{subagent.EventStart, subagent.EventEnd}, []string{start2.Type, end2.Type})
	require.Equal(t, start2.RunID, end2.RunID)
	require.NotEqual(t, start1.RunID, start2.RunID)
	require.Equal(t, "re: more", end2.LastAssistantMessage)
	n := requireSettlementNotice(t, s, "c")
	require.Equal(t, []string{"Its closing message:", "re: more"}, n.msg.More)

	snap, err := e.store.Load(context.Background(), "c")
	require.NoError(t, err)
	require.Equal(t, uint64(2), snap.Header.Epoch, "a new Activation, cold-resumed")
	require.Equal(t, []string{"task", "more"}, userTexts(t, e.store, "c"))
}

func TestSpec156_FollowupFromAnotherLiveAgentIsUnauthorized(t *testing.T) {
	e := newContEnv(t)
	p, s := e.parent(t, "P")
	x, _ := e.parent(t, "X")
	release := e.runner.hold("task")
	e.start(t, p, "c", "task")

	_, err := e.m.Followup(ctx(t), x, "c", "hijack", session.Source{Kind: "coordinator"})
	requireSubagentError(t, err, subagent.CodeUnauthorized, "")
	require.Regexp(t, `belongs to another parent session`, err.Error())

	release()
	requireSettlementNotice(t, s, "c")
	_, err = e.m.Followup(ctx(t), x, "c", "hijack", session.Source{Kind: "coordinator"}) // the cold path
	requireSubagentError(t, err, subagent.CodeUnauthorized, "")
	require.Regexp(t, `belongs to another parent session`, err.Error())
	require.NotContains(t, e.runner.inputs(), "hijack")
}

func TestSpec158_PersistedOneShotChildIsNotResumable(t *testing.T) {
	e := newContEnv(t)
	p, _ := e.parent(t, "P")
	desc, err := json.Marshal(map[string]any{"version": 2, "mode": "one-shot", "provider": "spawn", "label": "done"})
	require.NoError(t, err)
	require.NoError(t, e.store.Create(context.Background(),
		session.Header{ID: "o", ParentSession: "P", Origin: "subagent", DelegationDepth: 1},
		[]session.Entry{{Kind: session.EntryDescriptor, Descriptor: desc},
			{Kind: session.EntryMessage, Role: "user", Content: []session.Block{{Type: "text", Text: "task"}}},
			{Kind: session.EntryMessage, Role: "assistant", Content: []session.Block{{Type: "text", Text: "answer"}}}}))

	_, err = e.m.Followup(ctx(t), p, "o", "more", session.Source{Kind: "coordinator"})
	requireSubagentError(t, err, subagent.CodeNotResumable, "")
	require.Contains(t, err.Error(), "no supported continuation state")
	require.Contains(t, err.Error(), "do not retry send_message with this id")
	require.Zero(t, e.m.Live(context.Background()))
	require.Empty(t, e.registered("o"))
}

func TestSpec159_UnknownChildIsNotResumable(t *testing.T) {
	e := newContEnv(t)
	p, _ := e.parent(t, "P")
	_, err := e.m.Followup(ctx(t), p, "nobody", "hello", session.Source{Kind: "coordinator"})
	requireSubagentError(t, err, subagent.CodeNotResumable, `subagent "nobody" is unavailable`)
	require.ErrorIs(t, err, subagent.ErrNotResumable)
}

func TestSpec161_InterruptParksTheQueueUntilTheNextWakingSend(t *testing.T) {
	e := newContEnv(t)
	p, s := e.parent(t, "P")
	e.runner.hold("task") // never released: only the interrupt ends it
	first := e.start(t, p, "c", "task")
	e.runner.waitStarted(t, "task")
	e.followup(t, p, "c", "B")
	e.followup(t, p, "c", "C")
	ended := e.store.turnEnd("c", first)

	require.NoError(t, e.m.Interrupt(context.Background(), "c", activation.Authority{ParentSession: "P"}))
	require.Equal(t, subagent.StopAborted, recv(t, ended).StopReason)

	var cancel *activation.Cancel
	require.True(t, errors.As(e.runner.cause("task"), &cancel), "cause %v", e.runner.cause("task"))
	require.Equal(t, "user", cancel.Kind)
	st, ok := e.m.Status(context.Background(), "c")
	require.True(t, ok, "still resident")
	require.Equal(t, 2, st.Queued, "two next-turn items kept")
	require.True(t, st.Parked)
	require.Equal(t, activation.Waiting, st.Residency, "idle")
	require.Equal(t, []string{"task"}, e.runner.inputs(), "no second model request")
	agent := e.runner.agent(t, "c")
	require.Equal(t, agent.PID().Id, e.registered("c"), "still registered")
	stats, err := agent.Stats(ctx(t))
	require.NoError(t, err)
	require.False(t, stats.Busy)

	e.followup(t, p, "c", "D")
	requireSettlementNotice(t, s, "c")
	require.Equal(t, []string{"task", "B", "C", "D"}, userTexts(t, e.store, "c"))
	require.Equal(t, []string{"aborted", "completed", "completed", "completed"}, turnEnds(t, e.store, "c"))
	require.Equal(t, []string{"task", "B", "C", "D"}, e.runner.inputs())
}

func TestSpec162_InterruptBySelfSiblingOrStrangerIsUnauthorized(t *testing.T) {
	e := newContEnv(t)
	p, _ := e.parent(t, "P")
	x, _ := e.parent(t, "X")
	e.runner.hold("t-task")
	e.runner.hold("s-task")
	e.start(t, p, "T", "t-task")
	e.start(t, p, "S", "s-task")
	target, sibling := e.runner.agent(t, "T"), e.runner.agent(t, "S")

	err := e.m.Interrupt(context.Background(), "T", activation.Authority{Ancestor: target})
	requireSubagentError(t, err, subagent.CodeUnauthorized, `agent "T" cannot interrupt itself`)
	err = e.m.Interrupt(context.Background(), "T", activation.Authority{Ancestor: sibling})
	requireSubagentError(t, err, subagent.CodeUnauthorized, `subagent "T" is not a live descendant of agent "S"`)
	err = e.m.Interrupt(context.Background(), "T", activation.Authority{Ancestor: x})
	requireSubagentError(t, err, subagent.CodeUnauthorized, `subagent "T" is not a live descendant of agent "X"`)

	st, ok := e.m.Status(context.Background(), "T")
	require.True(t, ok)
	require.Equal(t, activation.Running, st.Residency)
	require.False(t, st.Parked)
	require.NoError(t, e.runner.cause("t-task"), "T's cancel was never called")
}

func TestSpec164_InterruptOfAbsentTargetsIsANoOp(t *testing.T) {
	e := newContEnv(t)
	p, s := e.parent(t, "P")
	// A one-shot run, held.
	release := e.runner.hold("one-shot")
	run, err := e.rt.Start(ctx(t), "spawn", subagent.Request{Prompt: "one-shot"}, p)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, run.Dispose(context.Background())) })
	e.runner.waitStarted(t, "one-shot")
	// A continuable child that completed naturally.
	e.start(t, p, "done", "task")
	requireSettlementNotice(t, s, "done")

	for _, target := range []string{"unknown", run.ID(), "done"} {
		require.NoError(t, e.m.Interrupt(context.Background(), target, activation.Authority{ParentSession: "P"}), target)
		require.NoError(t, e.m.Interrupt(context.Background(), target, activation.Authority{Ancestor: p}), target)
		require.NoError(t, e.m.Interrupt(context.Background(), target, activation.Authority{ParentSession: "P"}), "repeated: "+target)
	}
	require.NoError(t, e.runner.cause("one-shot"), "the one-shot agent was never cancelled")
	select {
	case <-run.Done():
		t.Fatal("the one-shot run ended")
	default:
	}
	release()
	res, err := run.Result(ctx(t))
	require.NoError(t, err)
	require.Equal(t, subagent.StopCompleted, res.StopReason)
}

func TestSpec166_UserInterruptWithAnotherParentAddressIsUnauthorized(t *testing.T) {
	e := newContEnv(t)
	p, _ := e.parent(t, "P")
	e.runner.hold("task")
	e.start(t, p, "c", "task")
	err := e.m.Interrupt(context.Background(), "c", activation.Authority{ParentSession: "Q"})
	requireSubagentError(t, err, subagent.CodeUnauthorized, `subagent "c" belongs to another parent session`)
	require.NoError(t, e.runner.cause("task"))
}

func TestSpec167_AncestorInterruptOfAGrandchildCancelsOnlyIt(t *testing.T) {
	e := newContEnv(t)
	p, _ := e.parent(t, "P")
	e.runner.hold("c-task")
	e.runner.hold("g-task")
	gStarted := make(chan string, 1)
	e.runner.before = func(c context.Context, turn subagent.Turn) {
		if turn.Session == "C" && turn.Input.Text() == "c-task" {
			_, msgID, err := e.m.Start(c, activation.TurnAgent(c), "spawn", "grandchild", "G", subagent.Request{Prompt: "g-task"})
			if err != nil {
				msgID = "error: " + err.Error()
			}
			gStarted <- msgID
		}
	}
	e.start(t, p, "C", "c-task")
	gFirst := recv(t, gStarted)
	require.NotContains(t, gFirst, "error")
	e.runner.waitStarted(t, "g-task")
	ended := e.store.turnEnd("G", gFirst)

	require.NoError(t, e.m.Interrupt(context.Background(), "G", activation.Authority{Ancestor: p}))
	require.Equal(t, subagent.StopAborted, recv(t, ended).StopReason)
	var cancel *activation.Cancel
	require.True(t, errors.As(e.runner.cause("g-task"), &cancel))
	require.Equal(t, "parent", cancel.Kind)

	st, ok := e.m.Status(context.Background(), "C")
	require.True(t, ok)
	require.Equal(t, activation.Running, st.Residency, "C keeps running")
	require.NoError(t, e.runner.cause("c-task"))
}

func TestSpec168_IdleParentGetsOneFollowupTurnWithTheClosingMessage(t *testing.T) {
	e := newContEnv(t)
	e.runner.answers["task"] = "the answer"
	p, s := e.parent(t, "P")
	e.start(t, p, "c", "task")

	n := requireSettlementNotice(t, s, "c")
	summary := "Background subagent c finished and will do no further work unless you send it more."
	require.Equal(t, "followup", n.verb, "one ordinary new turn")
	require.Equal(t, summary, n.msg.Text)
	require.Equal(t, []string{"Its closing message:", "the answer"}, n.msg.More)
	require.Equal(t, "notice", n.msg.Source.Form)
	require.Equal(t, summary, n.msg.Source.Summary)
	e.events.nextEnd(t, "c") // emitted after the notice and the release
	s.none(t)
}

func TestSpec169_BusyParentGetsNoticesSettlingTogetherInOneStep(t *testing.T) {
	e := newContEnv(t)
	p, s := e.parent(t, "P")
	p.SetBusy(true)
	stats, err := p.Stats(ctx(t))
	require.NoError(t, err)
	require.True(t, stats.Busy)
	release := e.runner.hold("task")
	e.start(t, p, "a", "task")
	e.start(t, p, "b", "task")
	release()

	got := map[string]string{}
	for range 2 {
		n := s.next(t)
		require.Equal(t, "subagent-settled", n.msg.Source.Kind)
		got[n.msg.Source.SenderSessionID] = n.verb
	}
	// Both are next-step items (steer): the running turn's next step consumes them
	// together; neither opens a turn of its own.
	require.Equal(t, map[string]string{"a": "steer", "b": "steer"}, got)
}

func TestSpec172_NoticeToAnUnregisteredParentIsDroppedSilently(t *testing.T) {
	e := newContEnv(t)
	p, s := e.parent(t, "P")
	release := e.runner.hold("task")
	e.start(t, p, "c", "task")
	require.NoError(t, e.sys.Jobs().UnregisterAgent(context.Background(), p))
	require.Nil(t, e.sys.Jobs().RegisteredAgent(context.Background(), "P"))

	release()
	end := e.events.nextEnd(t, "c")
	require.Equal(t, subagent.StopCompleted, end.StopReason)
	require.Zero(t, e.m.Live(context.Background()), "the teardown completed")
	require.Empty(t, e.registered("c"))
	s.none(t)
	require.False(t, e.logs.Contains("ACTIVATION_TEARDOWN_FAILED"), "logs: %v", e.logs.Lines())
	require.Empty(t, e.logs.Lines())
}

func TestSpec173_ReportThenSettlementBothReachTheParent(t *testing.T) {
	e := newContEnv(t)
	p, s := e.parent(t, "P")
	release := e.runner.hold("task")
	e.start(t, p, "c", "task")
	id, err := e.m.Report(context.Background(), e.runner.agent(t, "c"), "half done", false)
	require.NoError(t, err)
	require.NotEmpty(t, id)
	release()

	r := s.next(t)
	require.Equal(t, "Background subagent c reported:", r.msg.Text)
	require.Equal(t, []string{"half done"}, r.msg.More)
	require.Equal(t, "subagent-report", r.msg.Source.Kind)
	require.Equal(t, id, r.msg.ID)
	n := requireSettlementNotice(t, s, "c")
	require.Equal(t, "Background subagent c finished and will do no further work unless you send it more.", n.msg.Text)
}

func TestSpec174_NextStepReportWakesAnIdleParent(t *testing.T) {
	e := newContEnv(t)
	p, s := e.parent(t, "P")
	e.runner.hold("task")
	e.start(t, p, "c", "task")

	id, err := e.m.Report(context.Background(), e.runner.agent(t, "c"), "found it", false)
	require.NoError(t, err)
	r := s.next(t)
	require.Equal(t, "steer", r.verb, "next-step: steered, which wakes an idle parent")
	require.Equal(t, "Background subagent c reported:", r.msg.Text, "the first block")
	require.Equal(t, []string{"found it"}, r.msg.More)
	require.Equal(t, "subagent-report", r.msg.Source.Kind)
	require.Equal(t, "relay", r.msg.Source.Form)
	require.Equal(t, "c", r.msg.Source.SenderSessionID)
	require.Equal(t, id, r.msg.ID, "the message id the tool reports")

	_, err = e.m.Report(context.Background(), e.runner.agent(t, "c"), "quietly", true)
	require.NoError(t, err)
	require.Equal(t, "inject", s.next(t).verb, "quiet delivery injects")
}

func TestSpec175_ReportCredentials(t *testing.T) {
	e := newContEnv(t)
	p, _ := e.parent(t, "P")
	e.runner.hold("task")
	e.start(t, p, "c", "task")

	_, err := e.m.Report(context.Background(), p, "not a child", false)
	requireSubagentError(t, err, subagent.CodeUnauthorized, `agent "P" is not a live continuable subagent and cannot report`)

	require.NoError(t, e.sys.Jobs().UnregisterAgent(context.Background(), p))
	_, err = e.m.Report(context.Background(), e.runner.agent(t, "c"), "anyone?", false)
	requireSubagentError(t, err, subagent.CodeParentUnavailable, "direct parent is not live; report was not delivered")
}

func TestSpec176_ParentWaitsResidentUntilItsChildIsDisposed(t *testing.T) {
	e := newContEnv(t)
	p, s := e.parent(t, "P")
	releaseG := e.runner.hold("g-task")
	gStarted := make(chan string, 1)
	e.runner.before = func(c context.Context, turn subagent.Turn) {
		if turn.Session == "C" && turn.Input.Text() == "c-task" {
			_, _, err := e.m.Start(c, activation.TurnAgent(c), "spawn", "grandchild", "G", subagent.Request{Prompt: "g-task"})
			gStarted <- contErrText(err)
		}
	}
	cEnded := e.store.watch(func(id string, en session.Entry) bool { return id == "C" && en.Kind == session.EntryTurnEnd })
	cFirst := e.start(t, p, "C", "c-task")
	require.Empty(t, recv(t, gStarted))
	end := recv(t, cEnded)
	require.Equal(t, cFirst, end.InboxID)
	require.Equal(t, subagent.StopCompleted, end.StopReason, "C's own turn finished")

	cAgent := e.runner.agent(t, "C")
	st, ok := e.m.Status(context.Background(), "C")
	require.True(t, ok, "C stays resident")
	require.Equal(t, activation.Waiting, st.Residency)
	require.Equal(t, cAgent.PID().Id, e.registered("C"), "agents.get(C) is unchanged")

	releaseG()
	require.Equal(t, "G", e.events.nextEnd(t, "G").ID)
	e.events.nextEnd(t, "C") // only after G's disposal
	n := requireSettlementNotice(t, s, "C")
	// G's notice woke C for one more turn; its answer is C's closing message.
	require.Equal(t, "re: Background subagent G finished and will do no further work unless you send it more."+
		"Its closing message:re: g-task", n.msg.More[1])
	require.Equal(t, []string{"c-task", "Background subagent G finished and will do no further work unless you send it more.", "Its closing message:", "re: g-task"},
		userContent(t, e.store, "C"))
	require.Zero(t, e.m.Live(context.Background()))
}

func contErrText(err error) string {
	if err != nil {
		return err.Error()
	}
	return ""
}

func TestSpec177_DrainingManagerAdmitsNothing(t *testing.T) {
	e := newContEnv(t)
	p, s := e.parent(t, "P")
	e.start(t, p, "c", "task")
	requireSettlementNotice(t, s, "c")
	require.NoError(t, e.m.Drain(ctx(t)))

	const want = "continuable subagents are draining; the operation was not admitted"
	_, _, err := e.m.Start(ctx(t), p, "spawn", "research", "d", subagent.Request{Prompt: "task"})
	requireSubagentError(t, err, subagent.CodeDraining, want)
	_, err = e.m.Followup(ctx(t), p, "c", "more", session.Source{Kind: "coordinator"})
	requireSubagentError(t, err, subagent.CodeDraining, want)
	require.ErrorIs(t, err, subagent.ErrDraining)
	require.Equal(t, []string{"task"}, e.runner.inputs())
}

func TestSpec178_DrainChildrenRequiresTheExactLiveDirectParent(t *testing.T) {
	e := newContEnv(t)
	p1, _ := e.parent(t, "P1")
	p2, _ := e.parent(t, "P2")
	e.runner.hold("task")
	e.start(t, p1, "C", "task")

	err := e.m.DrainContinuableChildren(ctx(t), p2, []string{"C"})
	requireSubagentError(t, err, subagent.CodeUnauthorized, `subagent "C" is not a direct child of agent "P2"`)
	p1b, s1b := e.parent(t, "P1") // a replacement: p1 is stale now
	err = e.m.DrainContinuableChildren(ctx(t), p1, []string{"C"})
	requireSubagentError(t, err, subagent.CodeUnauthorized, "selected child teardown requires the exact live parent agent")
	st, ok := e.m.Status(context.Background(), "C")
	require.True(t, ok)
	require.Equal(t, activation.Running, st.Residency, "C untouched")

	// The exact live parent releases it; its pending inbox work is not preserved.
	pending := e.followup(t, p1b, "C", "pending")
	discarded := e.store.watch(func(id string, en session.Entry) bool {
		return id == "C" && en.Kind == session.EntryDiscarded && en.InboxID == pending
	})
	require.NoError(t, e.m.DrainContinuableChildren(ctx(t), p1b, []string{"C", "absent"}))
	require.Zero(t, e.m.Live(context.Background()))
	recv(t, discarded)
	require.Equal(t, []string{"task"}, e.runner.inputs())
	n := requireSettlementNotice(t, s1b, "C")
	require.Equal(t, "Background subagent C was stopped before it finished.", n.msg.Text)
	require.Equal(t, []string{"task"}, userTexts(t, e.store, "C"))
}

func TestSpec179_HeaderAndFirstDescriptorOfAFreshChild(t *testing.T) {
	e := newContEnv(t, activation.WithCwd(func(*owner.Agent) string { return "/w" }))
	p, s := e.parent(t, "P")
	_, _, err := e.m.Start(ctx(t), p, "spawn", "research", "c",
		subagent.Request{Prompt: "task", Parent: subagent.Parent{Session: "P", Depth: 2}})
	require.NoError(t, err)
	requireSettlementNotice(t, s, "c")

	snap, err := e.store.Load(context.Background(), "c")
	require.NoError(t, err)
	h := snap.Header
	require.Equal(t, "P", h.ParentSession)
	require.Equal(t, "subagent", h.Origin)
	require.Equal(t, 3, h.DelegationDepth, "parentDepth+1")
	require.Equal(t, "/w", h.Cwd)
	raw, err := json.Marshal(h)
	require.NoError(t, err)
	var fields map[string]any
	require.NoError(t, json.Unmarshal(raw, &fields))
	require.NotContains(t, fields, "seedLength", "a fresh child has no seed")

	requireDescriptor(t, snap.FirstDescriptor(), map[string]any{
		"version": float64(2), "mode": "continuable", "provider": "spawn", "label": "research"})

	// Declared optional fields appear, and only those.
	_, _, err = e.m.Start(ctx(t), p, "spawn", "styled", "d", subagent.Request{Prompt: "task",
		Persona: "terse", ToolFilter: &subagent.ToolFilter{Allow: []string{"read"}}})
	require.NoError(t, err)
	snap, err = e.store.Load(context.Background(), "d")
	require.NoError(t, err)
	requireDescriptor(t, snap.FirstDescriptor(), map[string]any{
		"version": float64(2), "mode": "continuable", "provider": "spawn", "label": "styled",
		"persona": "terse", "toolFilter": map[string]any{"allow": []any{"read"}}})
	require.Equal(t, 1, snap.Header.DelegationDepth)
}

func requireDescriptor(t *testing.T, raw json.RawMessage, want map[string]any) {
	t.Helper()
	var got map[string]any
	require.NoError(t, json.Unmarshal(raw, &got))
	require.Equal(t, want, got)
}

// userContent returns every text block of the user messages in a child's log.
func userContent(t *testing.T, s session.Store, id string) []string {
	t.Helper()
	snap, err := s.Load(context.Background(), id)
	require.NoError(t, err)
	out := []string{}
	for _, e := range snap.Log {
		if e.Kind == session.EntryMessage && e.Role == "user" {
			for _, b := range e.Content {
				out = append(out, b.Text)
			}
		}
	}
	return out
}

// TestSpec148_NoMountedAgentRegistryIsUnavailable is case 148 with a job registry
// whose agent registry is not mounted: the agents service is just as absent.
func TestSpec148_NoMountedAgentRegistryIsUnavailable(t *testing.T) {
	sys, _ := troupetest.NewSystem(t)
	_, err := sys.Jobs().AttachController(context.Background(), sys.Scope(), "t")
	require.NoError(t, err)
	rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), nil)
	require.NoError(t, err)
	runner := newGateRunner()
	_, err = rt.RegisterProvider(t.Context(), sys.Scope(), subagent.NewSpawn(sys.Actors(), runner))
	require.NoError(t, err)
	store := session.NewMemory()
	m, err := sys.StartContinuations(store, rt, runner, nil)
	require.NoError(t, err)
	p, err := sys.NewAgent(nil, "P")
	require.NoError(t, err)

	const want = "continuable subagents require the agents service"
	_, _, err = m.Start(ctx(t), p, "spawn", "research", "c", subagent.Request{Prompt: "task"})
	requireSubagentError(t, err, subagent.CodeContinuationUnavailable, want)
	_, err = m.Followup(ctx(t), p, "c", "more", session.Source{Kind: "coordinator"})
	requireSubagentError(t, err, subagent.CodeContinuationUnavailable, want)
	require.NoError(t, m.Interrupt(context.Background(), "c", activation.Authority{ParentSession: "P"}))
	ids, err := store.IDs(context.Background())
	require.NoError(t, err)
	require.Empty(t, ids)
	require.Empty(t, runner.inputs())
}
