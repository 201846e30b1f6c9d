package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/subagent/acp"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/tools/agenttools"
	"github.com/troupe-rt/troupe/tools/jobtools"
	"github.com/troupe-rt/troupe/tools/subagenttool"
)

// researcher is the demo's scripted child model: deterministic replies by prompt. A
// prompt that makes it think runs until its turn is cancelled; its input is then
// sent on thinking (if there is room), so a scenario knows the turn is in flight.
func researcher(thinking chan<- string) *subagent.Scripted {
	r := subagent.NewScripted()
	r.Match = func(t subagent.Turn) (subagent.Reply, bool) {
		in := t.Input.Text()
		switch {
		case strings.Contains(in, "capital"):
			return subagent.Reply{Text: "Paris is the capital of France."}, true
		case strings.Contains(in, "summarise"):
			return subagent.Reply{Text: "Summary: three findings, all consistent."}, true
		case strings.Contains(in, "think hard"), strings.Contains(in, "investigate"):
			select {
			case thinking <- in:
			default:
			}
			return subagent.Reply{Block: true}, true // runs until interrupted or cut off
		}
		return subagent.Reply{Text: fmt.Sprintf("noted (%d earlier messages): %s", t.History.Len(), in)}, true
	}
	return r
}

// subagentSystem is one system generation over the sessions file: the job tools,
// the subagent tool (provider spawn), the continuation manager and its model
// tools, and the lead agent that uses them.
type subagentSystem struct {
	st    *stage
	sys   *troupe.System
	jobs  *jobtools.Mount
	tool  *subagenttool.Mount
	acp   *subagenttool.Mount // the subagent tool over the ACP provider; nil without the example agent
	mgr   *activation.Manager
	agent *agenttools.Tools
	lead  *owner.Agent
	store *narratedStore
}

func openSubagents(st *stage, loop owner.Surface, thinking chan<- string) (*subagentSystem, error) {
	sys, err := st.newSystem()
	if err != nil {
		return nil, err
	}
	s := &subagentSystem{st: st, sys: sys}
	fail := func(err error) (*subagentSystem, error) { s.close(); return nil, err }
	if s.store, err = openStore(st, st.store); err != nil {
		return fail(err)
	}
	cfg := jobtools.DefaultConfig()
	resolved, err := cfg.Resolve()
	if err != nil {
		return fail(err)
	}
	if s.jobs, err = jobtools.MountIn(context.Background(), sys.Jobs(), sys.Scope(), cfg); err != nil {
		return fail(err)
	}
	st.emit(Event{Kind: KindMount, Text: "tool-jobs", Budget: resolved.MaxConsecutiveWakes,
		Detail: fmt.Sprintf("completionDelivery %s, maxConsecutiveWakes %d", resolved.CompletionDelivery, resolved.MaxConsecutiveWakes)})
	if _, err = sys.Jobs().MountAgents(context.Background(), sys.Scope()); err != nil {
		return fail(err)
	}
	rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), st.logger())
	if err != nil {
		return fail(err)
	}
	runner := narratedRunner{inner: researcher(thinking), st: st}
	if _, err = rt.RegisterProvider(context.Background(), sys.Scope(), subagent.NewSpawn(sys.Actors(), runner)); err != nil {
		return fail(err)
	}
	if s.mgr, err = sys.StartContinuations(s.store, rt, runner, nil, activation.WithLogger(st.logger())); err != nil {
		return fail(err)
	}
	if s.agent, err = agenttools.New(s.mgr, ""); err != nil {
		return fail(err)
	}
	if s.tool, err = subagenttool.MountIn(context.Background(), sys.Scope(), subagenttool.Config{Provider: "spawn"},
		subagenttool.Deps{Subagents: rt, Jobs: sys.Jobs(), Continuations: s.mgr}); err != nil {
		return fail(err)
	}
	st.emit(Event{Kind: KindMount, Text: "subagent, send_message, interrupt_agent, list_agents",
		Detail: "provider spawn, a scripted model; continuable sessions in " + st.store})
	if agent := exampleACPAgent(); agent != "" {
		if _, err = acp.Register(rt, sys.Scope(), acp.Config{Command: "node", Args: []string{agent},
			Cwd: filepath.Dir(st.store), Logger: st.logger()}); err != nil {
			return fail(err)
		}
		if s.acp, err = subagenttool.MountIn(context.Background(), sys.Scope(), subagenttool.Config{Provider: "acp", ProviderManagedDepth: true},
			subagenttool.Deps{Subagents: rt, Jobs: sys.Jobs()}); err != nil {
			return fail(err)
		}
		st.emit(Event{Kind: KindMount, Text: "subagent (acp)", Detail: "provider acp: the ACP SDK's example agent, " + agent})
	}
	if s.lead, err = spawnAgent(st, sys, "lead", loop); err != nil {
		return fail(err)
	}
	s.lead.SetBusy(true) // the lead is mid-turn: a child's settlement is steered into its next step
	return s, nil
}

// close shuts the system down (draining its Activations, which keep their queued
// messages in the journal), then closes the sessions file.
func (s *subagentSystem) close() {
	s.st.shutdown(s.sys)
	if s.store != nil {
		if err := s.store.Close(); err != nil {
			s.st.emit(Event{Kind: KindLog, Who: "store", Status: "error", Text: "closing the sessions file: " + err.Error()})
		}
	}
}

// run runs one of the lead's tools through the job tools' pipeline.
func (s *subagentSystem) run(tool tools.Tool, args any) (string, bool) {
	raw, _ := json.Marshal(args)
	res := s.jobs.Pipeline().Run(context.Background(), tool,
		tools.Call{ID: "demo", Name: tool.Name, Args: raw, Caller: tools.AsAgent(s.lead)})
	text, _ := res.SingleText()
	return text, res.IsError
}

// call runs one of the lead's tools and emits its result. child and detail say
// what the call is about (the target and the message of a send_message).
func (s *subagentSystem) call(tool tools.Tool, child, detail string, args any) (string, bool) {
	text, isErr := s.run(tool, args)
	ev := Event{Kind: KindTool, Who: s.lead.Session(), Status: tool.Name, Child: child, Detail: detail, Text: text}
	if isErr {
		ev.Code = toolError
	}
	s.st.emit(ev)
	return text, isErr
}

// toolError is the code of a tool event whose result is an error.
const toolError = "tool-error"

// send is send_message from the lead to child.
func (s *subagentSystem) send(child, message string) (string, bool) {
	return s.call(s.agent.Send(), child, message, map[string]any{"subagent_id": child, "message": message})
}

// scenarioSubagents: delegation in the foreground and in the background, and a
// continuable child talked to across followups, an interrupt, and a restart of the
// whole system that resumes it from the sessions file.
func scenarioSubagents(st *stage) error {
	loop := newLoop(st, "lead", "subagent-settled")
	thinking := make(chan string, 4)
	s, err := openSubagents(st, loop, thinking)
	if err != nil {
		return err
	}
	defer func() { s.close() }() // s is the latest generation

	// Foreground: the tool waits for the child's answer.
	text, isErr := s.run(s.tool.Tool(), map[string]any{"description": "find a capital", "prompt": "what is the capital of France?"})
	st.emit(Event{Kind: KindSubagent, Who: "lead", Status: "foreground", Text: text})
	if err := st.check("a foreground delegation answers in the tool's result", !isErr && strings.Contains(text, "Paris"),
		"the tool answered %q", text); err != nil {
		return err
	}

	// An ACP child: another program (the ACP SDK's example agent, when installed)
	// answers through the same tool; its permission request is refused by default.
	if s.acp != nil {
		text, isErr = s.run(s.acp.Tool(), map[string]any{"description": "update the config", "prompt": "update the configuration"})
		st.emit(Event{Kind: KindSubagent, Who: "lead", Status: "acp", Text: text})
		if err := st.check("an ACP child answers through the subagent tool, its permission request rejected",
			!isErr && strings.Contains(text, "skip the configuration update"), "the tool answered %q", text); err != nil {
			return err
		}
	}

	// One-shot background: a job of kind subagent, collected with job_output.
	text, isErr = s.run(s.tool.Tool(), map[string]any{"description": "summarise notes", "prompt": "summarise the notes", "run_in_background": true})
	id, ok := strings.CutPrefix(text, "started background subagent job ")
	if err := st.check("a background delegation starts a job", !isErr && ok, "the tool answered %q", text); err != nil {
		return err
	}
	st.started("lead", id, "subagent: summarise notes")
	text, _ = s.run(s.jobs.Output(), map[string]any{"job_id": id, "wait": true})
	st.emit(Event{Kind: KindSubagent, Who: "lead", Job: id, Status: "background", Text: text})
	if err := st.check("job_output collects the background answer", strings.Contains(text, "Summary:"),
		"job_output answered %q", text); err != nil {
		return err
	}

	// Continuable: a child the lead keeps talking to.
	child, _, err := s.mgr.Start(context.Background(), s.lead, "spawn", "notes keeper", "keeper",
		subagent.Request{Prompt: "remember: the launch is on Tuesday"})
	if err != nil {
		return err
	}
	st.say("lead", "started continuable child %s", child)
	if _, err := loop.expect("a child that finished its turn tells its busy parent (steer)", "steer"); err != nil {
		return err
	}
	s.send(child, "think hard about risks")
	if err := await(thinking, "the child's turn to start"); err != nil {
		return err
	}
	s.send(child, "also note: budget approved")
	st.emit(Event{Kind: KindInterrupt, Who: "lead", Child: child}) // before the call: the turn may end before it returns
	s.call(s.agent.Interrupt(), child, "", map[string]any{"agent_id": child})
	status, _ := s.mgr.Status(context.Background(), child) // the interrupt was handled before Interrupt returned
	if err := st.check("after an interrupt the queued message is kept, parked until the next send",
		status.Parked && status.Queued == 1, "status after the interrupt: parked %v, %d queued", status.Parked, status.Queued); err != nil {
		return err
	}
	s.call(s.agent.List(), "", "", map[string]any{})
	before, err := s.store.Load(context.Background(), child)
	if err != nil {
		return err
	}

	// Restart the whole system: the child resumes from the sessions file.
	st.say("system", "restarting the whole system: a new one over the same sessions file")
	s.close()
	if s, err = openSubagents(st, loop, thinking); err != nil {
		return err
	}
	text, isErr = s.send(child, "what do you remember?")
	if err := st.check("after the restart the child takes followups again", !isErr, "send_message answered %q", text); err != nil {
		return err
	}
	if _, err := loop.expect("the resumed child tells its parent when it is done (steer)", "steer"); err != nil {
		return err
	}
	return checkResumed(st, s.store, child, before.Header.Epoch)
}

// exampleACPAgent is the ACP SDK's example agent under TROUPE_INTEROP_DIR (the
// peers .ci/run installs), or "" when it or node is missing.
func exampleACPAgent() string {
	dir := os.Getenv("TROUPE_INTEROP_DIR")
	if dir == "" {
		return ""
	}
	if _, err := exec.LookPath("node"); err != nil {
		return ""
	}
	agent := filepath.Join(dir, "@agentclientprotocol/sdk/dist/examples/agent.js")
	if _, err := os.Stat(agent); err != nil {
		return ""
	}
	return agent
}

// checkResumed checks the child's session as stored after the restart: its turns
// in acceptance order (the parked one first), a newer epoch, and the last turn
// given the whole history.
func checkResumed(st *stage, store session.Store, child string, epochBefore uint64) error {
	snap, err := store.Load(context.Background(), child)
	if err != nil {
		return err
	}
	var users []string
	var reply string       // the last assistant message
	history, last := 0, -1 // messages before the last user message
	for _, e := range snap.Log {
		if e.Kind != session.EntryMessage || len(e.Content) == 0 {
			continue
		}
		switch e.Role {
		case "user":
			users = append(users, e.Content[0].Text)
			last = history
		case "assistant":
			reply = e.Content[0].Text
		}
		history++
	}
	want := []string{"remember: the launch is on Tuesday", "think hard about risks", "also note: budget approved", "what do you remember?"}
	if err := st.check("the child's turns ran in order across the interrupt and the restart, none lost",
		strings.Join(users, "|") == strings.Join(want, "|"), "turns %q, want %q", users, want); err != nil {
		return err
	}
	if err := st.check("the resumed child runs at a newer epoch than before the restart", snap.Header.Epoch > epochBefore,
		"epoch %d before the restart, %d after", epochBefore, snap.Header.Epoch); err != nil {
		return err
	}
	return st.check("the resumed child was given its whole history", strings.HasPrefix(reply, fmt.Sprintf("noted (%d earlier messages)", last)),
		"its last reply is %q; %d messages preceded that turn", reply, last)
}
