package workflowtool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/workflow"
)

// JobKind is the kind of a run's job: ids workflow-1, workflow-2, …
const JobKind = "workflow"

// maxWait is the foreground collection's wait: as long as the run takes (the
// grace bounds it once the run is cancelled).
const maxWait = time.Duration(math.MaxInt64)

// args are the tool's arguments, decoded strictly at the top level.
type args struct {
	Script          json.RawMessage `json:"script"`
	Meta            json.RawMessage `json:"meta"`
	Args            json.RawMessage `json:"args"`
	RunInBackground *bool           `json:"run_in_background"`
}

func isObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{'
}

func errText(s string) tools.Result { return tools.ErrorResult(errors.New(s)) }

// execute is WORKFLOW.md 5.3: checks, Prepare, then a foreground run (directly or
// as a job) or a background job. Every path disposes the run it launched.
func (m *Mount) execute(ctx context.Context, call tools.Call) tools.Result {
	if ctx.Err() != nil {
		return errText(TextAborted)
	}
	if m.disposed.Load() {
		return errText(TextDisposed)
	}
	var a args
	if err := tools.DecodeArgs(call.Args, &a); err != nil {
		return tools.ErrorResult(err)
	}
	var script string
	if len(a.Script) == 0 || json.Unmarshal(a.Script, &script) != nil || bytes.TrimSpace(a.Script)[0] != '"' {
		return errText(TextInvalidScript)
	}
	if !isObject(a.Meta) {
		return errText(TextInvalidMeta)
	}
	if a.Args != nil && !isObject(a.Args) {
		return errText(TextInvalidArgs)
	}
	background := a.RunInBackground != nil && *a.RunInBackground
	if background && !m.cfg.EnableRunInBackground {
		return errText(TextBackgroundDisabled)
	}
	if call.Caller.Agent() == nil {
		return errText(TextNoAgent)
	}
	if background && m.deps.Jobs == nil {
		return errText(TextNoJobs)
	}
	caller := call.Caller.Agent()
	rs := &runState{m: m, session: caller.Session(), owner: caller}
	req := workflow.Request{Script: script, Meta: a.Meta, Args: a.Args, Parent: caller, Observe: rs.observe}
	if m.deps.ParentOf != nil {
		req.ParentInfo = m.deps.ParentOf(call)
	}
	p, err := m.deps.Engine.Prepare(req)
	if err != nil {
		return tools.ErrorResult(err)
	}
	rs.name = p.Meta().Name
	switch {
	case background:
		return m.background(rs, p)
	case m.deps.Jobs != nil:
		return m.foregroundJob(ctx, rs, p)
	}
	return m.foreground(ctx, rs, p)
}

// settled is a run collected and disposed.
type settled struct {
	run *workflow.Run
	res workflow.Result
}

// collect waits for the run's result, disposes it, and then writes run-end.
func (rs *runState) collect(run *workflow.Run) settled {
	res, _ := run.Result(context.Background())
	_ = run.Dispose(context.Background())
	rs.runEnd(run.ID(), res)
	return settled{run: run, res: res}
}

func (m *Mount) render(rs *runState, s settled) tools.Result {
	if s.res.StopReason != workflow.StopCompleted {
		return errText(RenderFailure(s.res))
	}
	return tools.TextResult(RenderSuccess(rs.name, s.res.AgentsStarted, s.res.Value, m.cfg.MaxResultChars),
		Value{RunID: s.run.ID(), AgentsStarted: s.res.AgentsStarted, Result: s.res.Value})
}

// foreground runs without a job registry: the tool's ctx ending cancels the run
// ("parent step aborted"), the tool still waits for the result (the grace bounds
// it) and disposes the run.
func (m *Mount) foreground(ctx context.Context, rs *runState, p *workflow.Prepared) tools.Result {
	run, err := p.Launch(context.Background())
	if err != nil {
		return tools.ErrorResult(err)
	}
	stop := context.AfterFunc(ctx, func() { run.Cancel(ReasonParentAborted) })
	defer stop()
	return m.render(rs, rs.collect(run))
}

// startJob registers the run as a job of kind workflow owned by the caller (WORKFLOW.md 5.5)
// and launches it inside the registry's start. done carries the collected run
// once it is disposed; the job's outcome is sent after that and, when gate is
// not nil, only once gate is closed.
func (m *Mount) startJob(rs *runState, p *workflow.Prepared, gate <-chan struct{}) (id string, done <-chan settled, err error) {
	rec := job.NewRecord()
	rs.record = rec
	out := make(chan settled, 1)
	// Start is prompt (its Run only launches); it is not cut short by the
	// tool's ctx, which could leave a registered job whose id nobody knows.
	id, err = m.deps.Jobs.Start(context.Background(), job.Spec{Kind: JobKind, Label: rs.name, Owner: rs.owner, Record: rec,
		Run: func() (job.Hooks, error) {
			run, err := p.Launch(context.Background())
			if err != nil {
				return job.Hooks{}, err
			}
			outcome := &job.Settler{}
			go func() {
				s := rs.collect(run)
				out <- s
				if gate != nil {
					<-gate
				}
				outcome.Settle(m.outcome(rs, s))
			}()
			return job.Hooks{Cancel: func(reason string) error { run.Cancel(reason); return nil }, CancelNonBlocking: true, OnSettle: outcome.OnSettle}, nil
		}})
	return id, out, err
}

func (m *Mount) outcome(rs *runState, s settled) job.Outcome {
	switch s.res.StopReason {
	case workflow.StopCompleted:
		return job.Outcome{Status: job.Completed,
			Output: RenderSuccess(rs.name, s.res.AgentsStarted, s.res.Value, m.cfg.MaxResultChars)}
	case workflow.StopCancelled:
		return job.Outcome{Status: job.Killed, Output: RenderFailure(s.res)}
	}
	return job.Outcome{Status: job.Failed, Detail: "error", Output: RenderFailure(s.res)}
}

// foregroundJob runs as a job and collects it in the foreground: the pending wait
// claims the job at settlement, so no completion notice is sent; the tool's ctx
// ending kills the job ("parent step aborted").
func (m *Mount) foregroundJob(ctx context.Context, rs *runState, p *workflow.Prepared) tools.Result {
	gate := make(chan struct{})
	id, done, err := m.startJob(rs, p, gate)
	if err != nil {
		return tools.ErrorResult(err)
	}
	jobs := m.deps.Jobs
	stop := context.AfterFunc(ctx, func() {
		_, _, _ = jobs.Kill(context.Background(), id, registry.AsAgent(rs.owner), registry.KillOptions{Reason: ReasonParentAborted})
	})
	defer stop()
	// A Wait that fails (a disposed registry) or returns early leaves the run to
	// its own settlement: done is sent once the run is disposed.
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		_, _ = jobs.Wait(context.WithoutCancel(ctx), id, maxWait, registry.AsAgent(rs.owner))
	}()
	// The outcome is held until the wait is pending, so the wait is there at
	// settlement on every path and claims the report: a run that ends before the
	// wait reached the job would otherwise send a completion notice. Each Waiters
	// call is a round trip ordered after every wait already routed to the job.
	for n := 0; n == 0; {
		select {
		case <-waited:
			n = 1
		default:
			var err error
			if n, err = jobs.Waiters(context.Background(), id); err != nil {
				n = 1
			}
		}
	}
	close(gate)
	<-waited
	return m.render(rs, <-done)
}

// background registers the job and returns at once (WORKFLOW.md 5.6); the run belongs to
// the job and the ordinary notice rules apply.
func (m *Mount) background(rs *runState, p *workflow.Prepared) tools.Result {
	id, _, err := m.startJob(rs, p, nil)
	if err != nil {
		return tools.ErrorResult(err)
	}
	return tools.TextResult(startedBackground+id, BackgroundValue{Kind: "background", JobID: id})
}

// maxLine bounds one narration line of the job record (bytes, before the newline).
const maxLine = 1024

// narrationLine is one record line: one line, valid UTF-8, bounded.
func narrationLine(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
	if len(s) > maxLine {
		cut := maxLine
		for cut > 0 && !utf8RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s + "\n"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// narrate appends the job-record line for ev (nil record: not a job).
func (rs *runState) narrate(ev workflow.Event) {
	if rs.record == nil {
		return
	}
	var line string
	switch ev.Type {
	case workflow.EventPhase:
		line = "phase: " + ev.Title
	case workflow.EventLog:
		line = "log: " + ev.Message
	case workflow.EventAgentStart:
		line = "agent " + strconv.Itoa(ev.Agent.Seq) + " started: " + ev.Agent.Label
	case workflow.EventAgentEnd:
		line = fmt.Sprintf("agent %d %s: %s", ev.Agent.Seq, ev.Outcome, ev.Agent.Label)
	default:
		return
	}
	rs.record.Append(narrationLine(line), job.AppendOptions{})
}
