package acp_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/subagent/acp"
	"github.com/troupe-rt/troupe/test/acptest"
	"github.com/troupe-rt/troupe/troupetest"
)

// Continuable ACP children (docs/INTEROP.md section 1.8) against the scripted agent.

// notes records the parent's deliveries without blocking.
type notes struct{ ch chan string }

func (n *notes) put(verb string, m owner.Message) error {
	select {
	case n.ch <- verb + ": " + m.Text:
	default:
	}
	return nil
}
func (n *notes) Inject(m owner.Message) error   { return n.put("inject", m) }
func (n *notes) Steer(m owner.Message) error    { return n.put("steer", m) }
func (n *notes) Followup(m owner.Message) error { return n.put("followup", m) }

func (n *notes) next(t *testing.T) string {
	t.Helper()
	select {
	case s := <-n.ch:
		return s
	case <-time.After(budget):
		t.Fatal("no delivery to the parent")
		return ""
	}
}

// contWorld is one System generation with the continuable ACP provider over the
// fake, the continuation manager on subagent.Route, and a parent.
type contWorld struct {
	sys    *troupe.System
	p      *acp.Provider
	m      *activation.Manager
	parent *owner.Agent
	notes  *notes
}

func openCont(t *testing.T, store session.Store, rec *acptest.Recorder, s acptest.Script, dir string, manual bool) *contWorld {
	t.Helper()
	var sys *troupe.System
	var logs *troupetest.Logs
	if manual { // the test shuts this generation down itself (a restart)
		logs = &troupetest.Logs{}
		cfg := troupe.DefaultConfig()
		cfg.Logger = slog.New(logs)
		var err error
		sys, err = troupe.New(cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = sys.Shutdown(context.Background()) })
		_, err = sys.Jobs().AttachController(context.Background(), sys.Scope(), "test")
		require.NoError(t, err)
		_, err = sys.Jobs().MountAgents(context.Background(), sys.Scope())
		require.NoError(t, err)
	} else {
		sys, logs = troupetest.Served(t)
	}
	rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), slog.New(logs))
	require.NoError(t, err)
	cfg := fakeConfig(t, s, dir)
	cfg.Continuable, cfg.Observe, cfg.Logger = true, rec.Observe, slog.New(logs)
	p, err := acp.Register(rt, sys.Scope(), cfg)
	require.NoError(t, err)
	m, err := sys.StartContinuations(store, rt, subagent.Route(rt, subagent.NewScripted()), nil, activation.WithLogger(slog.New(logs)))
	require.NoError(t, err)
	n := &notes{ch: make(chan string, 64)}
	parent, err := sys.NewAgent(nil, "parent", owner.Options{Surface: n})
	require.NoError(t, err)
	require.NoError(t, sys.Jobs().RegisterAgent(context.Background(), parent))
	return &contWorld{sys: sys, p: p, m: m, parent: parent, notes: n}
}

func (w *contWorld) followup(t *testing.T, child, text string) {
	t.Helper()
	_, err := w.m.Followup(ctxFor(t), w.parent, child, text, session.Source{Kind: "coordinator", Form: "relay", SenderSessionID: "parent"})
	require.NoError(t, err)
}

func prompts(t *testing.T, log string) []string {
	var sids []string
	for _, r := range acptest.ReadLog(t, log) {
		if r.Method == "session/prompt" {
			var p struct {
				SessionID string `json:"sessionId"`
			}
			require.NoError(t, json.Unmarshal(r.Params, &p))
			sids = append(sids, p.SessionID)
		}
	}
	return sids
}

func count(ms []string, m string) int {
	n := 0
	for _, x := range ms {
		if x == m {
			n++
		}
	}
	return n
}

// stateEntries lists the child's provider/state entries.
func stateEntries(t *testing.T, store session.Store, child string) []acp.State {
	snap, err := store.Load(ctxFor(t), child)
	require.NoError(t, err)
	var out []acp.State
	for _, e := range snap.Log {
		if e.Kind == session.EntryProviderState {
			var st acp.State
			require.NoError(t, json.Unmarshal(e.State, &st))
			out = append(out, st)
			require.Empty(t, e.Content, "provider state carries no model content")
		}
	}
	return out
}

func TestInteropA20_ResidentChildKeepsOneProcess(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	gate := filepath.Join(t.TempDir(), "gate")
	s := acptest.Script{Log: filepath.Join(t.TempDir(), "fake.log"), StateDir: state, LoadSession: true, Echo: true, GateFile: gate}
	rec := acptest.NewRecorder(budget)
	store := session.NewMemory()
	w := openCont(t, store, rec, s, dir, false)

	id, _, err := w.m.Start(ctxFor(t), w.parent, "acp", "keeper", "keeper", subagent.Request{Prompt: "first"})
	require.NoError(t, err)
	rec.Wait(t, acp.EventUpdate) // the first prompt is in flight, held at the gate
	w.followup(t, id, "second")
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	rec.WaitN(t, acp.EventStopped, 2) // the probe's, then: both turns ran, the child settled, its epoch released the process
	require.Contains(t, w.notes.next(t), "Background subagent keeper finished")

	require.Len(t, served(rec), 1, "one process served both turns")
	require.Len(t, rec.Of(acp.EventSpawned), 2, "the loadSession probe, then the child's process")
	log := acptest.Methods(acptest.ReadLog(t, s.Log))
	require.Equal(t, 2, count(log, "initialize"), "the probe's and the child's process's")
	require.Equal(t, 1, count(log, "session/new"))
	require.Zero(t, count(log, "session/load"))
	sids := prompts(t, s.Log)
	require.Len(t, sids, 2)
	require.Equal(t, sids[0], sids[1], "both prompts on the same session")

	sts := stateEntries(t, store, id)
	require.Len(t, sts, 2, "one provider/state entry per turn")
	real, err := filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	for _, st := range sts {
		require.Equal(t, sids[0], st.SessionID)
		require.Contains(t, []string{dir, real}, st.Cwd)
	}
	snap, err := store.Load(ctxFor(t), id)
	require.NoError(t, err)
	var texts []string
	for _, e := range snap.Log {
		if e.Kind == session.EntryMessage {
			texts = append(texts, e.Role+":"+e.Content[0].Text)
		}
	}
	require.Equal(t, []string{"user:first", "assistant:echo: first", "user:second", "assistant:echo: second"}, texts,
		"model history holds the messages only")
	requireAllGone(t, rec)
}

// served lists the processes that opened or loaded a session (not the probe).
func served(rec *acptest.Recorder) []acp.Event {
	var out []acp.Event
	for _, e := range rec.All() {
		if e.Kind == acp.EventSession || e.Kind == acp.EventLoaded {
			out = append(out, e)
		}
	}
	return out
}

func requireAllGone(t *testing.T, rec *acptest.Recorder) {
	t.Helper()
	for _, e := range rec.Of(acp.EventSpawned) {
		acptest.RequireGone(t, e.Marker, e.PID)
	}
}

func TestInteropA21_ColdResumeAndRestartLoadTheSession(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	s := acptest.Script{Log: filepath.Join(t.TempDir(), "fake.log"), StateDir: state, LoadSession: true, Echo: true, ReplayText: "REPLAYED"}
	rec := acptest.NewRecorder(budget)
	path := filepath.Join(t.TempDir(), "sessions.db")
	store, err := session.OpenBolt(path)
	require.NoError(t, err)
	w := openCont(t, store, rec, s, dir, true)
	id, _, err := w.m.Start(ctxFor(t), w.parent, "acp", "keeper", "keeper", subagent.Request{Prompt: "first"})
	require.NoError(t, err)
	rec.WaitN(t, acp.EventStopped, 2) // the probe's, then the first epoch's process
	w.notes.next(t)
	sid := rec.Wait(t, acp.EventSession).SessionID

	// A cold resume: a new process loads the recorded session.
	w.followup(t, id, "second")
	rec.WaitN(t, acp.EventStopped, 3)
	w.notes.next(t)
	require.Equal(t, sid, rec.WaitN(t, acp.EventLoaded, 1).SessionID)

	// A restart of the whole System on the same file.
	require.NoError(t, w.sys.Shutdown(ctxFor(t)))
	require.NoError(t, store.Close())
	store, err = session.OpenBolt(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	w = openCont(t, store, rec, s, dir, true)
	w.followup(t, id, "third")
	rec.WaitN(t, acp.EventStopped, 4)
	w.notes.next(t)
	require.Equal(t, sid, rec.WaitN(t, acp.EventLoaded, 2).SessionID)
	require.NoError(t, w.sys.Shutdown(ctxFor(t)))

	var perProcess [][]string // methods by process, in order
	pids := map[int]int{}
	var loads []json.RawMessage
	for _, r := range acptest.ReadLog(t, s.Log) {
		i, ok := pids[r.PID]
		if !ok {
			i = len(perProcess)
			pids[r.PID] = i
			perProcess = append(perProcess, nil)
		}
		perProcess[i] = append(perProcess[i], r.Method)
		if r.Method == "session/load" {
			loads = append(loads, r.Params)
		}
	}
	require.Len(t, perProcess, 4)
	require.Equal(t, []string{"start", "initialize", "eof"}, perProcess[0], "the loadSession probe")
	require.Equal(t, []string{"start", "initialize", "session/new", "session/prompt", "eof"}, perProcess[1])
	for _, ms := range perProcess[2:] {
		require.Equal(t, []string{"start", "initialize", "session/load", "session/prompt", "eof"}, ms)
	}
	for _, l := range loads {
		var p map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(l, &p))
		require.JSONEq(t, `"`+sid+`"`, string(p["sessionId"]))
		require.JSONEq(t, `"`+dir+`"`, string(p["cwd"]))
		require.JSONEq(t, `[]`, string(p["mcpServers"]))
	}
	snap, err := store.Load(ctxFor(t), id)
	require.NoError(t, err)
	for _, e := range snap.Log {
		for _, b := range e.Content {
			require.NotContains(t, b.Text, "REPLAYED", "a replayed update reached the child's output")
		}
	}
	requireAllGone(t, rec)
}

func TestInteropA22_FailedLoadEndsTheTurnNotTheChild(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	s := acptest.Script{Log: filepath.Join(t.TempDir(), "fake.log"), StateDir: state, LoadSession: true, Echo: true}
	rec := acptest.NewRecorder(budget)
	store := session.NewMemory()
	w := openCont(t, store, rec, s, dir, false)
	id, _, err := w.m.Start(ctxFor(t), w.parent, "acp", "keeper", "keeper", subagent.Request{Prompt: "first"})
	require.NoError(t, err)
	rec.WaitN(t, acp.EventStopped, 2) // the probe's, then the first epoch's
	w.notes.next(t)

	// The agent's sessions are lost: session/load answers Resource not found.
	require.NoError(t, os.RemoveAll(state))
	require.NoError(t, os.Mkdir(state, 0o700))
	w.followup(t, id, "second")
	rec.WaitN(t, acp.EventStopped, 3)
	require.Contains(t, w.notes.next(t), "Background subagent keeper failed before it finished.")
	snap, err := store.Load(ctxFor(t), id)
	require.NoError(t, err)
	last := snap.Log[len(snap.Log)-2]
	require.Equal(t, session.EntryTurnEnd, last.Kind)
	require.Equal(t, subagent.StopError, last.StopReason)
	require.Equal(t, 1, count(acptest.Methods(acptest.ReadLog(t, s.Log)), "session/new"), "no fallback to session/new")
	sts := stateEntries(t, store, id)
	require.Equal(t, sts[0].SessionID, sts[len(sts)-1].SessionID, "the recorded session is kept: the child stays resumable")

	w.followup(t, id, "third") // still resumable: a third followup is accepted and runs
	rec.WaitN(t, acp.EventStopped, 4)
	require.Contains(t, w.notes.next(t), "Background subagent keeper failed before it finished.", "the third load fails the same way")
	require.Equal(t, 1, count(acptest.Methods(acptest.ReadLog(t, s.Log)), "session/new"))
	requireAllGone(t, rec)
}

// A22's texts, on the provider's turn runner directly.
func TestInteropA22_LoadFailureDiagnostic(t *testing.T) {
	dir := t.TempDir()
	s := acptest.Script{Log: filepath.Join(t.TempDir(), "fake.log"), LoadSession: true,
		LoadError: &acptest.RPCError{Code: -32002, Message: "Resource not found"}}
	w := newWorld(t, s, func(c *acp.Config) { c.Continuable = true })
	runner := w.rt.Provider(t.Context(), "acp").(subagent.TurnRunnerProvider).TurnRunner()
	res, err := runner.RunTurn(ctxFor(t), subagent.Turn{Session: "c", Provider: "acp",
		State: json.RawMessage(`{"acpSessionId":"gone","cwd":"` + dir + `"}`),
		Input: subagent.Message{Role: "user", Content: []subagent.Block{{Type: "text", Text: "again"}}}})
	require.NoError(t, err)
	require.Equal(t, subagent.StopError, res.StopReason)
	require.Equal(t, "acp session/load failed: Resource not found (-32002)", res.Diagnostic)
	require.JSONEq(t, `{"acpSessionId":"gone","cwd":"`+dir+`"}`, string(res.State), "the recorded session is kept")
	require.Equal(t, []string{"start", "initialize", "session/load", "eof"}, acptest.Methods(acptest.ReadLog(t, s.Log)))
	w.requireGone(t)

	// No state but a history: never a silent fresh session.
	res, err = runner.RunTurn(ctxFor(t), subagent.Turn{Session: "c2", Provider: "acp",
		History: subagent.HistoryOf([]subagent.Message{{Role: "user", Content: []subagent.Block{{Type: "text", Text: "x"}}}}),
		Input:   subagent.Message{Role: "user", Content: []subagent.Block{{Type: "text", Text: "again"}}}})
	require.NoError(t, err)
	require.Equal(t, subagent.StopError, res.StopReason)
	require.Equal(t, "acp child c2 has history but no recorded ACP session", res.Diagnostic)
	require.Len(t, w.rec.Of(acp.EventSpawned), 1, "nothing spawned for it")

	// An agent that stopped advertising loadSession.
	s2 := acptest.Script{Log: filepath.Join(t.TempDir(), "fake.log")}
	w2 := newWorld(t, s2, func(c *acp.Config) { c.Continuable = true })
	runner = w2.rt.Provider(t.Context(), "acp").(subagent.TurnRunnerProvider).TurnRunner()
	res, err = runner.RunTurn(ctxFor(t), subagent.Turn{Session: "c", Provider: "acp",
		State: json.RawMessage(`{"acpSessionId":"s1","cwd":"` + dir + `"}`),
		Input: subagent.Message{Role: "user", Content: []subagent.Block{{Type: "text", Text: "again"}}}})
	require.NoError(t, err)
	require.Equal(t, "acp agent no longer advertises loadSession", res.Diagnostic)
	w2.requireGone(t)
}

func TestInteropA23_InterruptKeepsTheProcess(t *testing.T) {
	dir := t.TempDir()
	gate := filepath.Join(t.TempDir(), "gate")
	s := acptest.Script{Log: filepath.Join(t.TempDir(), "fake.log"), StateDir: t.TempDir(), LoadSession: true, Echo: true, GateFile: gate}
	rec := acptest.NewRecorder(budget)
	store := session.NewMemory()
	w := openCont(t, store, rec, s, dir, false)
	id, _, err := w.m.Start(ctxFor(t), w.parent, "acp", "keeper", "keeper", subagent.Request{Prompt: "first"})
	require.NoError(t, err)
	rec.Wait(t, acp.EventUpdate)
	pid := rec.Wait(t, acp.EventSession).PID
	w.followup(t, id, "queued") // keeps the child resident (parked) across the interrupt
	require.NoError(t, w.m.Interrupt(ctxFor(t), id, activation.Authority{ParentSession: "parent"}))
	end := rec.Wait(t, acp.EventPromptEnd)
	require.Equal(t, "cancelled", end.Update)
	require.Len(t, rec.Of(acp.EventCancelSent), 1)

	w.followup(t, id, "after")        // unparks the queue
	rec.WaitN(t, acp.EventStopped, 2) // the probe's, then the child's at its epoch's end
	require.Len(t, served(rec), 1, "the followups ran on the same process")
	require.Equal(t, pid, rec.Of(acp.EventStopped)[1].PID)
	log := acptest.Methods(acptest.ReadLog(t, s.Log))
	require.Equal(t, 2, count(log, "initialize"), "the probe's and the child's: no second initialize for the child")
	require.Equal(t, 3, count(log, "session/prompt"))
	snap, err := store.Load(ctxFor(t), id)
	require.NoError(t, err)
	var stops []string
	for _, e := range snap.Log {
		if e.Kind == session.EntryTurnEnd {
			stops = append(stops, e.StopReason)
		}
	}
	require.Equal(t, []string{subagent.StopAborted, subagent.StopCompleted, subagent.StopCompleted}, stops)
	requireAllGone(t, rec)
}
