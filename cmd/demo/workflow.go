package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/troupe-rt/troupe/actors/controller"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/tools/jobtools"
	"github.com/troupe-rt/troupe/tools/workflowtool"
	"github.com/troupe-rt/troupe/workflow"
)

// KindWorkflow is a workflow run's event (WORKFLOW.md 4): who: the parent
// session; job: the run's job; status: start | phase | log | agent-start |
// agent-end | end; child: the agent call's label; detail: its outcome (agent-end)
// or the run's stop reason (end); text: a phase title, a log message or an error.
const KindWorkflow Kind = "workflow"

// auditLimit is the audit runs' maxConcurrentAgents; disposeGrace their
// DisposeGraceMs. The spawn provider stops a published child when it is disposed
// (not when the run's context is cancelled), so a cancelled run whose child keeps
// working settles when the grace expires and reaps it.
const (
	auditLimit   = 3
	disposeGrace = 250
)

// auditScript is what the model writes: one scripted auditor per file, in
// parallel; failed audits come back null and are reported, not fatal.
const auditScript = `phase('Audit')
log('auditing ' + args.files.length + ' files, ' + 'three at a time')
const reports = await parallel(args.files.map(f => () => agent('audit ' + f, { label: f })))
phase('Report')
const failed = args.files.filter((f, i) => reports[i] === null)
return { audited: reports.filter(Boolean).length, failed, findings: reports.filter(Boolean) }`

// auditor is the scripted child model of the workflow scenario: an audit of
// legacy.go runs out of tokens (an ordinary child failure), an audit of huge.go
// runs until it is cancelled, the rest report one finding.
func auditor() *subagent.Scripted {
	r := subagent.NewScripted()
	r.Match = func(t subagent.Turn) (subagent.Reply, bool) {
		in := t.Input.Text()
		file := strings.TrimPrefix(in, "audit ")
		switch file {
		case "legacy.go":
			return subagent.Reply{Partial: "reading 40,000 lines…", StopReason: subagent.StopMaxTokens}, true
		case "huge.go":
			return subagent.Reply{Block: true}, true
		}
		return subagent.Reply{Text: file + ": no unchecked errors"}, true
	}
	return r
}

// scenarioWorkflow: a model-written script audits files in parallel through
// scripted subagents as a job of kind workflow; one child fails and the run
// still completes; a second, background run is killed by a human while a child
// is still working, and the model is told.
func scenarioWorkflow(st *stage) error {
	sys, err := st.newSystem()
	if err != nil {
		return err
	}
	defer st.shutdown(sys)
	cfg := jobtools.DefaultConfig()
	resolved, err := cfg.Resolve()
	if err != nil {
		return err
	}
	jobs, err := jobtools.MountIn(context.Background(), sys.Jobs(), sys.Scope(), cfg)
	if err != nil {
		return err
	}
	if _, err := sys.Jobs().MountAgents(context.Background(), sys.Scope()); err != nil {
		return err
	}
	ctl, err := sys.StartController(controller.Config{})
	if err != nil {
		return err
	}
	rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), st.logger())
	if err != nil {
		return err
	}
	if _, err := rt.RegisterProvider(context.Background(), sys.Scope(), subagent.NewSpawn(sys.Actors(), auditor())); err != nil {
		return err
	}
	eng, err := workflow.NewEngine(workflow.Host{Actors: sys.Actors(), Scope: sys.Scope(), Inspector: sys.Tree().PID(), Logger: st.logger()},
		sys.Scope(), rt, workflow.Config{MaxConcurrentAgents: ptr(int64(auditLimit)), DisposeGraceMs: ptr(int64(disposeGrace))})
	if err != nil {
		return err
	}
	w := &workflowWatch{st: st, open: map[string]int{}, peak: map[string]int{}, ended: map[string]workflow.Event{}, seen: make(chan workflow.Event, 256)}
	if _, err := eng.Listen(sys.Scope(), w.hear); err != nil {
		return err
	}
	tool, err := workflowtool.MountIn(sys.Scope(), workflowtool.Config{EnableRunInBackground: ptr(true)},
		workflowtool.Deps{Engine: eng, Jobs: sys.Jobs(), Logger: st.logger()})
	if err != nil {
		return err
	}
	st.emit(Event{Kind: KindMount, Text: "workflow", Detail: fmt.Sprintf("provider spawn, a scripted auditor; maxConcurrentAgents %d; runs are jobs of kind workflow", auditLimit)})
	// the job tools last: the notices promise reads the wake budget off the last mount
	st.emit(Event{Kind: KindMount, Text: "tool-jobs", Budget: resolved.MaxConsecutiveWakes,
		Detail: fmt.Sprintf("completionDelivery %s, maxConsecutiveWakes %d", resolved.CompletionDelivery, resolved.MaxConsecutiveWakes)})
	loop := newLoop(st, "lead", "")
	lead, err := spawnAgent(st, sys, "lead", loop)
	if err != nil {
		return err
	}
	call := func(args map[string]any) (string, bool) {
		raw, _ := json.Marshal(args)
		res := jobs.Pipeline().Run(context.Background(), tool.Tool(),
			tools.Call{ID: "wf", Name: tool.Tool().Name, Args: raw, Caller: tools.AsAgent(lead)})
		text, _ := res.SingleText()
		ev := Event{Kind: KindTool, Who: lead.Session(), Status: tool.Tool().Name, Text: text}
		if res.IsError {
			ev.Code = toolError
		}
		st.emit(ev)
		return text, res.IsError
	}
	meta := map[string]any{"name": "audit", "description": "audit error handling file by file"}

	// 1. In the foreground: six files, legacy.go's auditor runs out of tokens.
	files := []string{"api.go", "store.go", "legacy.go", "auth.go", "cache.go", "jobs.go"}
	st.say("lead", "writes a workflow: audit %d files in parallel", len(files))
	done := make(chan struct{})
	go func() {
		defer close(done)
		text, isErr := call(map[string]any{"script": auditScript, "meta": meta, "args": map[string]any{"files": files}})
		_ = st.check("the foreground run completes although one child failed; its null is reported, not fatal",
			!isErr && strings.Contains(text, `"audited": 5`) && strings.Contains(text, `"legacy.go"`), "tool result %q", text)
	}()
	first, err := w.next("workflow/start")
	if err != nil {
		return err
	}
	id, err := w.jobOf(sys.Jobs(), lead)
	if err != nil {
		return err
	}
	st.started("lead", id, "audit")
	if err := await(done, "the foreground audit"); err != nil {
		return err
	}
	if err := st.check(fmt.Sprintf("at most %d auditors ran at once", auditLimit), w.peakOf(first.Run.ID) <= auditLimit && w.peakOf(first.Run.ID) > 0,
		"peak %d", w.peakOf(first.Run.ID)); err != nil {
		return err
	}
	if err := st.check("legacy.go's child ended failed; every other child completed", w.outcomes(first.Run.ID) == "failed:legacy.go",
		"non-completed children: %s", w.outcomes(first.Run.ID)); err != nil {
		return err
	}

	// 2. In the background: huge.go's auditor never finishes; a human kills the run.
	files = []string{"router.go", "huge.go", "config.go"}
	st.say("lead", "starts a second audit in the background and goes idle")
	text, isErr := call(map[string]any{"script": auditScript, "meta": meta, "args": map[string]any{"files": files}, "run_in_background": true})
	if isErr {
		return fmt.Errorf("background workflow refused: %s", text)
	}
	bgID := strings.TrimPrefix(text, "started background workflow job ")
	st.started("lead", bgID, "audit")
	second, err := w.next("workflow/start")
	if err != nil {
		return err
	}
	// the kill must land while huge.go's child runs: its start published, the
	// other two ended (a child whose start is still in the provider when the run
	// is cancelled never starts, and nothing of it is left to cancel)
	if err := w.awaitSettledOthers(second.Run.ID, 2, "huge.go"); err != nil {
		return err
	}
	st.cause(bgID, causeHumanKill)
	outcome, err := ctl.Kill(context.Background(), lead.Session(), bgID)
	if err != nil {
		return err
	}
	st.emit(Event{Kind: KindJobKill, Who: "human", Job: bgID, Detail: controller.ReasonUser, Status: outcome.Name()})
	st.say("troupe", "the script sees CANCELLED; huge.go's child keeps working until the %d ms grace reaps it", disposeGrace)
	notice, err := loop.expect("the model is told a human killed its background workflow, with the reason", "followup")
	if err != nil {
		return err
	}
	if err := st.check("the notice names the workflow job and the human's reason",
		strings.Contains(notice, "background job "+bgID+" (workflow: audit) finished [status: killed, cancelled by the user]"), "notice %q", notice); err != nil {
		return err
	}
	end := w.endOf(second.Run.ID)
	return st.check("the kill cancelled the run and huge.go's running child; nothing was left open",
		end.Result.StopReason == workflow.StopCancelled && w.outcomes(second.Run.ID) == "cancelled:huge.go" && w.openOf(second.Run.ID) == 0,
		"end %+v, non-completed children %s", end.Result, w.outcomes(second.Run.ID))
}

// workflowWatch follows the engine's events: it prints them and keeps what the
// scenario's promises check. hear runs on the engine actor.
type workflowWatch struct {
	st    *stage
	mu    sync.Mutex
	open  map[string]int
	peak  map[string]int
	ends  []string // run id + " " + outcome + ":" + label, for non-completed children
	ended map[string]workflow.Event
	seen  chan workflow.Event
}

func (w *workflowWatch) hear(ev workflow.Event) {
	status := strings.TrimPrefix(ev.Type, "workflow/")
	out := Event{Kind: KindWorkflow, Who: ev.Run.Parent, Status: status, Child: ev.Agent.Label}
	w.mu.Lock()
	switch ev.Type {
	case workflow.EventPhase:
		out.Text = ev.Title
	case workflow.EventLog:
		out.Text = ev.Message
	case workflow.EventAgentStart:
		w.open[ev.Run.ID]++
		w.peak[ev.Run.ID] = max(w.peak[ev.Run.ID], w.open[ev.Run.ID])
	case workflow.EventAgentEnd:
		w.open[ev.Run.ID]--
		out.Detail = string(ev.Outcome)
		if ev.Outcome != workflow.OutcomeCompleted {
			w.ends = append(w.ends, ev.Run.ID+" "+string(ev.Outcome)+":"+ev.Agent.Label)
		}
	case workflow.EventEnd:
		out.Detail = string(ev.Result.StopReason)
		out.Text = ev.Result.Error
		w.ended[ev.Run.ID] = ev
	}
	w.mu.Unlock()
	w.st.emit(out)
	select {
	case w.seen <- ev:
	default:
	}
}

// next waits for the next event of type typ.
func (w *workflowWatch) next(typ string) (workflow.Event, error) {
	for {
		select {
		case ev := <-w.seen:
			if ev.Type == typ {
				return ev, nil
			}
		case <-timeAfterWait():
			return workflow.Event{}, fmt.Errorf("waited %s for %s", waitBudget, typ)
		}
	}
}

// awaitSettledOthers waits until n of run's children have ended and the child
// labelled running has started.
func (w *workflowWatch) awaitSettledOthers(run string, n int, running string) error {
	got, started := 0, false
	for got < n || !started {
		select {
		case ev := <-w.seen:
			switch {
			case ev.Run.ID != run:
			case ev.Type == workflow.EventAgentEnd:
				got++
			case ev.Type == workflow.EventAgentStart && ev.Agent.Label == running:
				started = true
			}
		case <-timeAfterWait():
			return fmt.Errorf("waited %s for %d children of %s to end and %s's to start", waitBudget, n, run, running)
		}
	}
	return nil
}

func (w *workflowWatch) peakOf(run string) int { w.mu.Lock(); defer w.mu.Unlock(); return w.peak[run] }
func (w *workflowWatch) openOf(run string) int { w.mu.Lock(); defer w.mu.Unlock(); return w.open[run] }
func (w *workflowWatch) endOf(run string) workflow.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ended[run]
}

func (w *workflowWatch) outcomes(run string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, e := range w.ends {
		if r, rest, _ := strings.Cut(e, " "); r == run {
			out = append(out, rest)
		}
	}
	return strings.Join(out, ",")
}

// jobOf finds the foreground run's job: the caller's one running workflow job
// (its id is in no tool result until the run ends).
func (w *workflowWatch) jobOf(jobs *registry.Client, lead *owner.Agent) (string, error) {
	snaps, err := jobs.List(context.Background(), registry.AsAgent(lead))
	if err != nil {
		return "", err
	}
	for _, s := range snaps {
		if s.GetKind() == workflowtool.JobKind && s.GetStatus() == job.Running {
			return s.GetId(), nil
		}
	}
	return "", fmt.Errorf("no running workflow job for %s", lead.Session())
}

func timeAfterWait() <-chan time.Time { return time.After(waitBudget) }
