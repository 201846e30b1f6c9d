package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/tools/agenttools"
	"github.com/troupe-rt/troupe/tools/jobtools"
	"github.com/troupe-rt/troupe/tools/subagenttool"
)

// researcher is the demo's scripted child model: deterministic replies by prompt.
func researcher() *subagent.Scripted {
	r := subagent.NewScripted()
	r.Match = func(t subagent.Turn) (subagent.Reply, bool) {
		in := t.Input.Text()
		switch {
		case strings.Contains(in, "capital"):
			return subagent.Reply{Text: "Paris is the capital of France."}, true
		case strings.Contains(in, "summarise"):
			return subagent.Reply{Text: "Summary: three findings, all consistent."}, true
		case strings.Contains(in, "think hard"):
			return subagent.Reply{Block: true}, true // runs until interrupted
		}
		return subagent.Reply{Text: fmt.Sprintf("noted (%d earlier messages): %s", len(t.History), in)}, true
	}
	return r
}

func call(tool tools.Tool, p *tools.Pipeline, agent *owner.Agent, args any) (string, bool) {
	raw, _ := json.Marshal(args)
	res := p.Run(context.Background(), tool, tools.Call{ID: "demo", Name: tool.Name, Args: raw, Session: agent.Session(), Agent: agent})
	text, _ := res.SingleText()
	return text, res.IsError
}

// subagentSystem is one system generation over a bbolt file.
type subagentSystem struct {
	sys   *troupe.System
	jobs  *jobtools.Mount
	tool  *subagenttool.Mount
	mgr   *activation.Manager
	agent *agenttools.Tools
	lead  *owner.Agent
	store *session.Bolt
}

func openSubagents(tl *timeline, path string, loop owner.Surface) (*subagentSystem, error) {
	sys, err := troupe.New(troupe.Config{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return nil, err
	}
	s := &subagentSystem{sys: sys}
	fail := func(err error) (*subagentSystem, error) { s.close(); return nil, err }
	if s.store, err = session.OpenBolt(path); err != nil {
		return fail(err)
	}
	if s.jobs, err = jobtools.MountIn(sys, sys.Scope(), jobtools.DefaultConfig()); err != nil {
		return fail(err)
	}
	if _, err = sys.Jobs().MountAgents(sys.Scope()); err != nil {
		return fail(err)
	}
	rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), nil)
	if err != nil {
		return fail(err)
	}
	runner := researcher()
	if _, err = rt.RegisterProvider(sys.Scope(), subagent.NewSpawn(sys.Actors(), runner)); err != nil {
		return fail(err)
	}
	if s.mgr, err = activation.Start(sys, s.store, rt, runner, nil); err != nil {
		return fail(err)
	}
	if s.agent, err = agenttools.New(s.mgr, ""); err != nil {
		return fail(err)
	}
	if s.tool, err = subagenttool.MountIn(sys.Scope(), subagenttool.Config{Provider: "spawn"},
		subagenttool.Deps{Subagents: rt, Jobs: sys.Jobs(), Continuations: s.mgr}); err != nil {
		return fail(err)
	}
	if s.lead, err = sys.NewAgent(nil, "lead", owner.Options{Surface: loop}); err != nil {
		return fail(err)
	}
	if err = sys.Jobs().RegisterAgent(s.lead); err != nil {
		return fail(err)
	}
	s.lead.SetBusy(true)
	return s, nil
}

func (s *subagentSystem) close() {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	_ = s.sys.Shutdown(ctx)
	if s.store != nil {
		_ = s.store.Close()
	}
}

func scenarioSubagents(tl *timeline) error {
	dir, err := os.MkdirTemp("", "troupe-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "sessions.db")
	loop := &agentLoop{tl: tl, name: "lead", lanes: make(chan string, 16), only: "subagent-settled"}
	s, err := openSubagents(tl, path, loop)
	if err != nil {
		return err
	}
	tl.say("system", "subagent runtime with provider spawn; sessions in %s", path)

	// Foreground: the tool waits for the child's answer.
	text, isErr := call(s.tool.Tool(), s.jobs.Pipeline(), s.lead, map[string]any{"description": "find a capital", "prompt": "what is the capital of France?"})
	if isErr {
		return fmt.Errorf("broken promise: foreground delegation failed: %s", text)
	}
	tl.say("lead", "subagent (foreground) → %q", text)

	// One-shot background: a job of kind subagent, collected with job_output.
	text, _ = call(s.tool.Tool(), s.jobs.Pipeline(), s.lead, map[string]any{"description": "summarise notes", "prompt": "summarise the notes", "run_in_background": true})
	tl.say("lead", "subagent (background) → %q", text)
	id := strings.TrimPrefix(text, "started background subagent job ")
	text, _ = call(s.jobs.Output(), s.jobs.Pipeline(), s.lead, map[string]any{"job_id": id, "wait": true})
	tl.say("lead", "job_output %s → %q", id, text)
	if !strings.Contains(text, "Summary:") {
		return fmt.Errorf("broken promise: background answer not collected")
	}

	// Continuable: a child the lead keeps talking to.
	child, _, err := s.mgr.Start(context.Background(), s.lead, "spawn", "notes keeper", "keeper", subagent.Request{Prompt: "remember: the launch is on Tuesday"})
	if err != nil {
		return err
	}
	tl.say("lead", "started continuable child %s", child)
	if err := expectLane(loop, "steer"); err != nil {
		return err
	}
	text, _ = call(s.agent.Send(), s.jobs.Pipeline(), s.lead, map[string]any{"subagent_id": child, "message": "think hard about risks"})
	tl.say("lead", "send_message → %q", text)
	text, _ = call(s.agent.Send(), s.jobs.Pipeline(), s.lead, map[string]any{"subagent_id": child, "message": "also note: budget approved"})
	tl.say("lead", "send_message (queued behind the running turn) → %q", text)
	text, _ = call(s.agent.Interrupt(), s.jobs.Pipeline(), s.lead, map[string]any{"agent_id": child})
	tl.say("lead", "interrupt_agent → %q (the queued message stays parked)", text)
	text, _ = call(s.agent.List(), s.jobs.Pipeline(), s.lead, map[string]any{})
	tl.say("lead", "list_agents → %q", text)

	// Restart the whole system: the child resumes from the bbolt file.
	s.close()
	tl.say("system", "restarted: a new system over the same file")
	if s, err = openSubagents(tl, path, loop); err != nil {
		return err
	}
	defer s.close()
	text, isErr = call(s.agent.Send(), s.jobs.Pipeline(), s.lead, map[string]any{"subagent_id": child, "message": "what do you remember?"})
	if isErr {
		return fmt.Errorf("broken promise: the child did not resume: %s", text)
	}
	tl.say("lead", "send_message after restart → %q", text)
	if err := expectLane(loop, "steer"); err != nil {
		return err
	}
	snap, err := s.store.Load(context.Background(), child)
	if err != nil {
		return err
	}
	var users []string
	for _, e := range snap.Log {
		if e.Kind == session.EntryMessage && e.Role == "user" && len(e.Content) > 0 {
			users = append(users, e.Content[0].Text)
		}
	}
	tl.say("system", "%s's session: epoch %d; its turns, in order: %q", child, snap.Header.Epoch, users)
	want := []string{"remember: the launch is on Tuesday", "think hard about risks", "also note: budget approved", "what do you remember?"}
	if strings.Join(users, "|") != strings.Join(want, "|") {
		return fmt.Errorf("broken promise: turns %q, want %q (a parked message was lost or reordered)", users, want)
	}
	return nil
}

func expectLane(loop *agentLoop, want string) error {
	if got := <-loop.lanes; got != want {
		return fmt.Errorf("broken promise: notice by %s, want %s", got, want)
	}
	return nil
}
