package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/subagent/acp"
	"github.com/troupe-rt/troupe/test/acptest"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/tools/jobtools"
	"github.com/troupe-rt/troupe/tools/subagenttool"
	"github.com/troupe-rt/troupe/troupetest"
)

// A case of docs/INTEROP.md section 4.1 against the real peers.

type world struct {
	sys  *troupe.System
	rt   *subagent.Runtime
	p    *acp.Provider
	rec  *acptest.Recorder
	logs *troupetest.Logs
}

func newWorld(t *testing.T, cfg acp.Config) *world {
	t.Helper()
	sys, logs := troupetest.NewSystem(t)
	rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), slog.New(logs))
	require.NoError(t, err)
	rec := acptest.NewRecorder(budget)
	p, err := acp.Register(rt, sys.Scope(), observed(cfg, rec, slog.New(logs)))
	require.NoError(t, err)
	return &world{sys: sys, rt: rt, p: p, rec: rec, logs: logs}
}

func (w *world) run(t *testing.T, prompt string) (subagent.Result, *subagent.Run) {
	t.Helper()
	run, err := w.rt.Start(ctxFor(t), w.p.Name(), subagent.Request{Prompt: prompt, Parent: subagent.Parent{Session: "p"}}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = run.Dispose(context.Background()) })
	res, err := run.Result(ctxFor(t))
	require.NoError(t, err)
	return res, run
}

func TestInteropA05_ExampleAgentAllowedTurn(t *testing.T) {
	cfg := exampleAgent(t)
	cfg.Permission = acp.PermissionAllow
	w := newWorld(t, cfg)
	res, run := w.run(t, "update the configuration")
	require.Equal(t, subagent.StopCompleted, res.StopReason)
	require.Len(t, res.Output, 1, "one text block")
	text := res.Text()
	require.True(t, strings.HasPrefix(text, "I'll help you with that."), text)
	require.Contains(t, text, " Now I understand the project structure.")
	require.Contains(t, text, "successfully updated")
	perms := w.rec.Of(acp.EventPermission)
	require.Len(t, perms, 1, "exactly one permission request")
	require.Equal(t, "selected", perms[0].Answer)
	require.Equal(t, "allow", perms[0].OptionID)

	require.NoError(t, run.Dispose(ctxFor(t)))
	stopped := w.rec.Of(acp.EventStopped)
	require.Len(t, stopped, 1)
	require.Equal(t, "exit code: 0", stopped[0].Outcome.Detail, "the agent exited on stdin EOF, no signal sent")
	requireGone(t, w.rec)
}

func TestInteropA06_ExampleAgentRejectedByDefault(t *testing.T) {
	w := newWorld(t, exampleAgent(t))
	res, run := w.run(t, "update the configuration")
	require.Equal(t, subagent.StopCompleted, res.StopReason)
	perms := w.rec.Of(acp.EventPermission)
	require.Len(t, perms, 1)
	require.Equal(t, "selected", perms[0].Answer)
	require.Equal(t, "reject", perms[0].OptionID)
	require.Contains(t, res.Text(), "skip the configuration update")
	require.NotContains(t, res.Text(), "successfully updated")
	require.NoError(t, run.Dispose(ctxFor(t)))
	requireGone(t, w.rec)
}

// surface records every notice delivery of the parent.
type surface struct{ calls chan string }

func (s *surface) record(verb string, m owner.Message) error {
	select {
	case s.calls <- verb + ": " + m.Text:
	default:
	}
	return nil
}
func (s *surface) Inject(m owner.Message) error   { return s.record("inject", m) }
func (s *surface) Steer(m owner.Message) error    { return s.record("steer", m) }
func (s *surface) Followup(m owner.Message) error { return s.record("followup", m) }

func TestInteropA09_BackgroundDelegationKilled(t *testing.T) {
	cfg := exampleAgent(t)
	var sys *troupe.System
	var logs *troupetest.Logs
	sys, logs = troupetest.NewSystem(t)
	_, err := sys.Jobs().MountAgents(context.Background(), sys.Scope())
	require.NoError(t, err)
	rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), slog.New(logs))
	require.NoError(t, err)
	rec := acptest.NewRecorder(budget)
	_, err = acp.Register(rt, sys.Scope(), observed(cfg, rec, slog.New(logs)))
	require.NoError(t, err)
	sc, err := sys.Scope().Child("plugins")
	require.NoError(t, err)
	jobs, err := jobtools.MountIn(t.Context(), sys.Jobs(), sc, jobtools.Config{})
	require.NoError(t, err)
	m, err := subagenttool.MountIn(t.Context(), sc, subagenttool.Config{Provider: "acp", ProviderManagedDepth: true},
		subagenttool.Deps{Subagents: rt, Jobs: sys.Jobs()})
	require.NoError(t, err)
	surf := &surface{calls: make(chan string, 16)}
	parent, err := sys.NewAgent(sc, "parent", owner.Options{Surface: surf})
	require.NoError(t, err)
	require.NoError(t, sys.Jobs().RegisterAgent(context.Background(), parent))

	calls := 0
	call := func(tool tools.Tool, args string) tools.Result {
		calls++
		return jobs.Pipeline().Run(ctxFor(t), tool, tools.Call{ID: fmt.Sprintf("call-%d", calls), Name: tool.Name,
			Args: json.RawMessage(args), Caller: tools.AsAgent(parent)})
	}
	jobTool := func(name string) tools.Tool {
		for _, tl := range jobs.All() {
			if tl.Name == name {
				return tl
			}
		}
		t.Fatalf("no job tool %s", name)
		return tools.Tool{}
	}
	started := call(m.Tool(), `{"description":"configure","prompt":"update the configuration","run_in_background":true}`)
	require.False(t, started.IsError, "%#v", started.Content)
	txt, _ := started.SingleText()
	require.Equal(t, "started background subagent job subagent-1", txt)

	w := rec.Wait(t, acp.EventUpdate)
	kill := call(jobTool(jobtools.NameKill), `{"job_id":"subagent-1","reason":"superseded"}`)
	require.False(t, kill.IsError, "%#v", kill.Content)
	snap := troupetest.Settled(t, sys, "subagent-1", registry.AsAgent(parent))
	// The tree was gone before the job settled: Dispose (which waits for it) runs
	// before the job's Done.
	requireGone(t, rec)
	require.Equal(t, "[status: killed, superseded]", jobtools.StatusLine(snap))
	require.Len(t, rec.Of(acp.EventCancelSent), 1, "session/cancel sent exactly once")
	ends := rec.Of(acp.EventPromptEnd)
	require.Len(t, ends, 1)
	require.Equal(t, "cancelled", ends[0].Update, "the agent answered the cancel")
	require.Equal(t, w.PID, ends[0].PID)

	out := call(jobTool(jobtools.NameOutput), `{"job_id":"subagent-1","wait":true}`)
	txt, _ = out.SingleText()
	require.Equal(t, "(no new output)\n[status: killed, superseded]", txt)
	_, err = parent.Stats(ctxFor(t)) // a barrier behind any notice the owner was sent
	require.NoError(t, err)
	select {
	case n := <-surf.calls:
		t.Fatalf("the owner received a notice: %s", n)
	default:
	}
}

func TestInteropA11_EscapedGrandchildIsKilled(t *testing.T) {
	cfg := exampleAgent(t)
	cfg.Args = []string{"-c", "setsid sleep 600 & exec node " + cfg.Args[0]}
	cfg.Command = "sh"
	w := newWorld(t, cfg)
	res, run := w.run(t, "hello")
	require.Equal(t, subagent.StopCompleted, res.StopReason)
	marker := w.rec.Wait(t, acp.EventSpawned).Marker
	alive := acptest.Alive(marker)
	require.Len(t, alive, 2, "the agent and its escaped sleep carry the marker")
	require.NoError(t, run.Dispose(ctxFor(t)))
	require.Empty(t, acptest.Alive(marker), "Dispose returned only after the escaped sleep was gone")
	for _, pid := range alive {
		require.False(t, acptest.Exists(pid), "process %d is not reaped", pid)
	}
	requireGone(t, w.rec)
}

func TestInteropA15_CodexAuthAndPromptError(t *testing.T) {
	w := newWorld(t, codex(t, false))
	_, err := w.rt.Start(ctxFor(t), "acp", subagent.Request{Prompt: "hi", Parent: subagent.Parent{Session: "p"}}, nil)
	require.Error(t, err)
	require.Equal(t, `acp provider "acp": session/new failed: Authentication required (-32000); advertised auth methods: chatgpt, codex-api-key, openai-api-key; set Config.AuthMethod`, err.Error())
	requireGone(t, w.rec)

	cfg := codex(t, true)
	cfg.EOFGrace = 200e6
	w = newWorld(t, cfg)
	res, run := w.run(t, "hi")
	ks := w.rec.Kinds()
	require.Less(t, slices.Index(ks, acp.EventAuthenticated), slices.Index(ks, acp.EventSession), "authenticated before session: %v", ks)
	require.NotEqual(t, -1, slices.Index(ks, acp.EventAuthenticated))
	require.Equal(t, subagent.StopError, res.StopReason)
	require.Contains(t, res.Diagnostic, "acp session/prompt failed:")
	require.Contains(t, res.Diagnostic, "(-32603)")
	require.NoError(t, run.Dispose(ctxFor(t)))
	stopped := w.rec.Of(acp.EventStopped)
	require.Len(t, stopped, 1)
	require.Equal(t, "signal: SIGTERM", stopped[0].Outcome.Detail, "codex ignores EOF and exits on SIGTERM")
	requireGone(t, w.rec)
}

func TestInteropA19_ContinuableRefusedWithoutLoadSession(t *testing.T) {
	cfg := exampleAgent(t)
	cfg.Continuable = true
	sys, logs := troupetest.Served(t)
	rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), slog.New(logs))
	require.NoError(t, err)
	rec := acptest.NewRecorder(budget)
	p, err := acp.Register(rt, sys.Scope(), observed(cfg, rec, slog.New(logs)))
	require.NoError(t, err)
	store := session.NewMemory()
	m, err := sys.StartContinuations(store, rt, subagent.NewScripted(), nil)
	require.NoError(t, err)
	surf := &surface{calls: make(chan string, 16)}
	parent, err := sys.NewAgent(nil, "parent", owner.Options{Surface: surf})
	require.NoError(t, err)
	require.NoError(t, sys.Jobs().RegisterAgent(context.Background(), parent))

	const msg = `subagent provider "acp" does not support continuable children (the ACP agent does not advertise loadSession)`
	for i := range 2 {
		id, msgID, err := m.Start(ctxFor(t), parent, "acp", "label", "child-1", subagent.Request{Prompt: "p"})
		require.ErrorIs(t, err, subagent.ErrUnsupportedCapability)
		require.Equal(t, msg, err.Error())
		require.Empty(t, id)
		require.Empty(t, msgID)
		require.EqualValues(t, 1, p.ProbeRuns(), "start %d: the loadSession answer is cached", i+1)
	}
	ids, err := store.IDs(ctxFor(t))
	require.NoError(t, err)
	require.Empty(t, ids, "no child session exists")
	require.Nil(t, sys.Jobs().RegisteredAgent(ctxFor(t), "child-1"), "no child agent exists")
	require.Len(t, rec.Of(acp.EventSpawned), 1, "one probe process")
	requireGone(t, rec)
	_, err = parent.Stats(ctxFor(t))
	require.NoError(t, err)
	select {
	case n := <-surf.calls:
		t.Fatalf("the parent received a notice: %s", n)
	default:
	}
}

func TestInteropA24_CodexChildResumesThroughSessionLoad(t *testing.T) {
	cfg := codex(t, true)
	cfg.Continuable = true
	cfg.EOFGrace = 200e6 // codex ignores EOF: SIGTERM follows quickly
	sys, logs := troupetest.Served(t)
	rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), slog.New(logs))
	require.NoError(t, err)
	rec := acptest.NewRecorder(budget)
	_, err = acp.Register(rt, sys.Scope(), observed(cfg, rec, slog.New(logs)))
	require.NoError(t, err)
	store := session.NewMemory()
	m, err := sys.StartContinuations(store, rt, subagent.Route(rt, subagent.NewScripted()), nil)
	require.NoError(t, err)
	surf := &surface{calls: make(chan string, 16)}
	parent, err := sys.NewAgent(nil, "parent", owner.Options{Surface: surf})
	require.NoError(t, err)
	require.NoError(t, sys.Jobs().RegisterAgent(context.Background(), parent))
	next := func() string {
		select {
		case n := <-surf.calls:
			return n
		case <-ctxFor(t).Done():
			t.Fatal("no notice")
			return ""
		}
	}

	id, _, err := m.Start(ctxFor(t), parent, "acp", "coder", "coder", subagent.Request{Prompt: "hi"})
	require.NoError(t, err)
	require.Contains(t, next(), "Background subagent coder failed before it finished.", "the loopback provider fails the turn")
	sid := rec.Wait(t, acp.EventSession).SessionID
	first := rec.Wait(t, acp.EventSession).PID

	_, err = m.Followup(ctxFor(t), parent, id, "again", session.Source{Kind: "coordinator", Form: "relay", SenderSessionID: "parent"})
	require.NoError(t, err)
	require.Contains(t, next(), "Background subagent coder failed before it finished.")
	loaded := rec.Wait(t, acp.EventLoaded)
	require.Equal(t, sid, loaded.SessionID, "a fresh codex process loaded the first session")
	require.NotEqual(t, first, loaded.PID)
	snap, err := store.Load(ctxFor(t), id)
	require.NoError(t, err)
	var stops []string
	var states []string
	for _, e := range snap.Log {
		switch e.Kind {
		case session.EntryTurnEnd:
			stops = append(stops, e.StopReason)
		case session.EntryProviderState:
			states = append(states, string(e.State))
		}
	}
	require.Equal(t, []string{subagent.StopError, subagent.StopError}, stops)
	require.Len(t, states, 2)
	require.Equal(t, states[0], states[1], "the second turn failed in session/prompt, on the loaded session")

	require.NoError(t, sys.Shutdown(ctxFor(t)))
	requireGone(t, rec)
}
