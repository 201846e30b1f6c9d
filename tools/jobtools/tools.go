package jobtools

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/tools"
)

// Tool names and descriptions (SPEC §3.10).
const (
	NameOutput = "job_output"
	NameList   = "job_list"
	NameKill   = "job_kill"

	DescOutput = "Read a background job. Stream jobs return only output since the previous read; final-output jobs return their result after settlement. Every response ends with `[status: ...]`. Reads are non-blocking unless `wait: true`, which waits up to the configured cap."
	DescList   = "List your background jobs (running and finished) with their ids, kinds, and statuses."
	DescKill   = "Request cancellation of a running background job by job id. Returns immediately; the job settles as killed once its work actually stops."

	// PromptSection names the system-prompt section; PromptText is its text.
	PromptSection = "tool:jobs"
	PromptText    = "Track every background job id you start. You are notified in-session when a job finishes — do not busy-poll or sleep on one; keep working on independent steps and do not duplicate a running job's work. Before giving a final answer, collect every still-relevant job with job_output (set wait: true only when you are genuinely blocked on it), and job_kill jobs that stopped mattering."
)

var (
	schemaOutput = json.RawMessage(`{"type":"object","properties":{"job_id":{"type":"string","description":"The background job id, for example bash-1."},"wait":{"type":"boolean","description":"Wait for the job to settle (up to timeout_ms) before reading."},"timeout_ms":{"type":"number","description":"How long to wait when wait is true, in milliseconds."}},"required":["job_id"],"additionalProperties":false}`)
	schemaList   = json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)
	schemaKill   = json.RawMessage(`{"type":"object","properties":{"job_id":{"type":"string","description":"The background job id to cancel."},"reason":{"type":"string","description":"Why the job is no longer needed; passed to the job."}},"required":["job_id"],"additionalProperties":false}`)
)

// OutputValue is job_output's canonical value.
type OutputValue struct {
	Text string    `json:"text"`
	Job  PublicJob `json:"job"`
}

// KillValue is job_kill's canonical value.
type KillValue struct {
	Outcome string    `json:"outcome"` // cancellation-requested | already-finished
	Job     PublicJob `json:"job"`
}

// Tools are the model-facing job tools over one registry.
type Tools struct {
	jobs *registry.Client
	cfg  Resolved

	// limits holds the outputLimitBytes captured at call start, per call id, for the
	// final step. A leaf helper: no actor state depends on it.
	limits struct {
		sync.Mutex
		m map[string]capturedLimit
	}
}

// capturedLimit is what CaptureLimit found of a job visible to the caller at call
// start: its outputLimitBytes, or that it has none. A job's limit is its spec's
// and never changes, so the final step needs no second lookup either way.
type capturedLimit struct {
	limit int64
	has   bool
}

// New binds the tools to a registry with a config.
func New(jobs *registry.Client, cfg Config) (*Tools, error) {
	r, err := cfg.Resolve()
	if err != nil {
		return nil, err
	}
	t := &Tools{jobs: jobs, cfg: r}
	t.limits.m = map[string]capturedLimit{}
	return t, nil
}

// Config returns the resolved config.
func (t *Tools) Config() Resolved { return t.cfg }

// All returns job_output, job_list and job_kill.
func (t *Tools) All() []tools.Tool { return []tools.Tool{t.Output(), t.List(), t.Kill()} }

// Output is job_output (SPEC §3.2).
func (t *Tools) Output() tools.Tool {
	return tools.Tool{Name: NameOutput, Description: DescOutput, Parameters: schemaOutput, Execute: t.output}
}

// List is job_list (SPEC §3.3).
func (t *Tools) List() tools.Tool {
	return tools.Tool{Name: NameList, Description: DescList, Parameters: schemaList, Execute: t.list}
}

// Kill is job_kill (SPEC §3.4).
func (t *Tools) Kill() tools.Tool {
	return tools.Tool{Name: NameKill, Description: DescKill, Parameters: schemaKill, Execute: t.kill}
}

func invalidJobID(id string) error {
	b, _ := json.Marshal(id)
	return errors.New("invalid job_id: expected a non-empty string, got " + string(b))
}

func (t *Tools) output(ctx context.Context, call tools.Call) tools.Result {
	var args struct {
		JobID     *string  `json:"job_id"`
		Wait      *bool    `json:"wait"`
		TimeoutMs *float64 `json:"timeout_ms"`
	}
	if err := tools.DecodeArgs(call.Args, &args); err != nil {
		return tools.ErrorResult(err)
	}
	if args.JobID == nil || *args.JobID == "" {
		return tools.ErrorResult(invalidJobID(""))
	}
	id := *args.JobID
	if args.Wait != nil && *args.Wait {
		ms := float64(t.cfg.WaitTimeoutMs)
		if args.TimeoutMs != nil {
			ms = *args.TimeoutMs
		}
		ms = min(ms, float64(t.cfg.MaxWaitTimeoutMs))
		if _, err := t.jobs.Wait(ctx, id, time.Duration(ms*float64(time.Millisecond)), registry.AsAgent(call.Caller.Agent())); err != nil {
			return tools.ErrorResult(err)
		}
	}
	text, snap, err := t.jobs.Read(ctx, id, registry.AsAgent(call.Caller.Agent()))
	if err != nil {
		return tools.ErrorResult(err)
	}
	return tools.TextResult(OutputText(text, snap), OutputValue{Text: text, Job: Public(snap)})
}

func (t *Tools) list(ctx context.Context, call tools.Call) tools.Result {
	var args struct{}
	if err := tools.DecodeArgs(call.Args, &args); err != nil {
		return tools.ErrorResult(err)
	}
	jobs, err := t.jobs.List(ctx, registry.AsAgent(call.Caller.Agent()))
	if err != nil {
		return tools.ErrorResult(err)
	}
	value := make([]PublicJob, len(jobs))
	for i, s := range jobs {
		value[i] = Public(s)
	}
	return tools.TextResult(ListText(jobs), value)
}

func (t *Tools) kill(ctx context.Context, call tools.Call) tools.Result {
	var args struct {
		JobID  *string `json:"job_id"`
		Reason *string `json:"reason"`
	}
	if err := tools.DecodeArgs(call.Args, &args); err != nil {
		return tools.ErrorResult(err)
	}
	if args.JobID == nil || *args.JobID == "" {
		return tools.ErrorResult(invalidJobID(""))
	}
	var reason string
	if args.Reason != nil {
		reason = *args.Reason
	}
	res, snap, err := t.jobs.Kill(ctx, *args.JobID, registry.AsAgent(call.Caller.Agent()), registry.KillOptions{Reason: reason})
	if err != nil {
		return tools.ErrorResult(err)
	}
	outcome := "cancellation-requested"
	if res == messages.KillResult_KILL_RESULT_ALREADY_FINISHED {
		outcome = "already-finished"
	}
	return tools.TextResult(KillText(res, snap), KillValue{Outcome: outcome, Job: Public(snap)})
}

// jobIDOf returns the job_id argument of a call, "" if absent or malformed.
func jobIDOf(call tools.Call) string {
	var args struct {
		JobID string `json:"job_id"`
	}
	_ = json.Unmarshal(call.Args, &args)
	return args.JobID
}

// lookupLimit finds the job's outputLimitBytes among the caller's visible jobs:
// found reports that the job is one (the registry's owner fence, in its Get), and
// c its limit, if it has one.
func (t *Tools) lookupLimit(ctx context.Context, call tools.Call) (c capturedLimit, found bool) {
	id := jobIDOf(call)
	if id == "" {
		return capturedLimit{}, false
	}
	snap, err := t.jobs.Get(ctx, id, registry.AsAgent(call.Caller.Agent()))
	if err != nil {
		return capturedLimit{}, false
	}
	if snap.OutputLimitBytes != nil {
		c = capturedLimit{limit: *snap.OutputLimitBytes, has: true}
	}
	return c, true
}

// CaptureLimit is a pre hook to add first (tools.Pipeline.PrependPre): it captures
// the job's output limit at call start, before policy runs. A visible job's absent
// limit is captured too, so that Finalize does not ask the registry again.
func (t *Tools) CaptureLimit(ctx context.Context, call *tools.Call) (*tools.Result, error) {
	if (call.Name == NameOutput || call.Name == NameKill) && call.ID != "" {
		if c, found := t.lookupLimit(ctx, *call); found {
			t.limits.Lock()
			t.limits.m[call.ID] = c
			t.limits.Unlock()
		}
	}
	return nil, nil
}

// Finalize is SPEC §3.6's final step for job_output and job_kill: it bounds the
// result's complete UTF-8 text by the job's outputLimitBytes, whatever produced the
// result. Other tools' results pass unchanged. Add it with tools.Pipeline.AddFinal.
func (t *Tools) Finalize(ctx context.Context, call tools.Call, res tools.Result) tools.Result {
	if call.Name != NameOutput && call.Name != NameKill {
		return res
	}
	t.limits.Lock()
	c, found := t.limits.m[call.ID]
	delete(t.limits.m, call.ID)
	t.limits.Unlock()
	if !found {
		// Not captured at call start (no call id, no CaptureLimit, or the job was
		// not visible then): look it up now.
		c, found = t.lookupLimit(ctx, call)
	}
	if !found || !c.has {
		return res
	}
	return Bound(call.Name, res, int(c.limit))
}

// Bound applies §3.6's finalize rules with a known limit.
func Bound(tool string, res tools.Result, limit int) tools.Result {
	text, single := res.SingleText()
	if !single {
		return res // multi-block or non-text content is returned unchanged
	}
	out := res
	if v, ok := res.Value.(OutputValue); ok && tool == NameOutput && !res.IsError && text == renderOutput(v.Text, v.Job.StatusLine()) {
		status := v.Job.StatusLine()
		content := strings.TrimSuffix(text, "\n"+status)
		out.Content = []tools.Block{{Type: "text", Text: TruncateOutput(content, status, limit)}}
		return out
	}
	out.Content = []tools.Block{{Type: "text", Text: TruncateResult(text, limit)}}
	return out
}
