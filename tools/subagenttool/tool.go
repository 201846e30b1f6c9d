package subagenttool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/scope"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/tools"
)

// Continuations starts continuable children (SPEC §6.2 startContinuable): it
// resolves once the child's inbox has accepted the prompt, with the child's id and
// the accepted message's id. The continuation manager implements it.
type Continuations interface {
	StartContinuable(ctx context.Context, provider, label string, req subagent.Request, parent *owner.Agent) (childID, messageID string, err error)
}

// Deps are what the tool runs on.
type Deps struct {
	// Subagents is the provider runtime; required.
	Subagents *subagent.Runtime
	// Jobs runs one-shot background delegations as jobs; nil: they fail with
	// "background jobs unavailable: …". Job tools (jobtools.MountIn) must serve the
	// calling agent's scope for the start to pass preflight.
	Jobs *registry.Client
	// Continuations starts continuable children; nil: continuable background calls
	// fail with CONTINUATION_UNAVAILABLE.
	Continuations Continuations
	// ParentOf describes the calling agent for the request: its delegation depth and,
	// for providers that inherit the parent's context, its completed turns. nil (or
	// an empty Session) means the call's session at depth 0.
	ParentOf func(call tools.Call) subagent.Parent
}

// ForegroundValue is a completed foreground call's value.
type ForegroundValue struct {
	Kind   string           `json:"kind"` // "foreground"
	RunID  string           `json:"runId"`
	Output []subagent.Block `json:"output"`
}

// BackgroundValue is a one-shot background call's value.
type BackgroundValue struct {
	Kind  string `json:"kind"` // "background"
	JobID string `json:"jobId"`
}

// ContinuableValue is a continuable background call's value.
type ContinuableValue struct {
	Kind       string `json:"kind"` // "continuable"
	SubagentID string `json:"subagentId"`
}

// Mount is the subagent tool mounted in a Scope for one provider. It follows the
// provider: the tool is offered (Tools, Available) only while a provider of that
// name is registered and passes the mount-time checks.
type Mount struct {
	cfg    Resolved
	deps   Deps
	schema json.RawMessage
	desc   string
	listen *scope.Effect

	// state is seq<<1 | available. The provider listener (on the runtime actor) and
	// MountIn's initial lookup write it; the seq lets the lookup lose to any event
	// the listener handled meanwhile.
	state atomic.Uint64
}

// MountIn validates cfg, checks it against its provider if one is registered, and
// mounts the tool in sc, where it follows provider-added and provider-removed: a
// provider added later that fails the checks is refused (its registration fails
// with the check's error). Disposing the mount, or sc, stops the following.
func MountIn(ctx context.Context, sc *scope.Scope, cfg Config, deps Deps) (*Mount, error) {
	r, err := cfg.Resolve()
	if err != nil {
		return nil, err
	}
	if deps.Subagents == nil {
		return nil, invalid("tool-subagent: a subagent runtime is required (subagenttool.Deps.Subagents)")
	}
	m := &Mount{cfg: r, deps: deps, schema: schema(r), desc: description(r)}
	if m.listen, err = deps.Subagents.Listen(ctx, sc, m.follow); err != nil {
		return nil, err
	}
	s0 := m.state.Load()
	p := deps.Subagents.Provider(ctx, r.Provider)
	if err := ctx.Err(); err != nil { // the lookup was cut short: p says nothing
		_ = m.listen.Run(context.Background())
		return nil, err
	}
	if p != nil {
		if err := m.check(p); err != nil {
			_ = m.listen.Run(context.Background())
			return nil, err
		}
	}
	m.state.CompareAndSwap(s0, next(s0, p != nil))
	return m, nil
}

func next(s uint64, available bool) uint64 {
	n := (s>>1 + 1) << 1
	if available {
		n |= 1
	}
	return n
}

func (m *Mount) set(available bool) {
	for {
		s := m.state.Load()
		if m.state.CompareAndSwap(s, next(s, available)) {
			return
		}
	}
}

// follow is the provider listener. It runs on the runtime actor and only flips the
// state; a refused provider-added panics, which rolls the registration back.
func (m *Mount) follow(ev subagent.Event) {
	if ev.Provider != m.cfg.Provider {
		return
	}
	switch ev.Type {
	case subagent.EventProviderAdded:
		if err := m.check(ev.Registered); err != nil {
			panic(err)
		}
		m.set(true)
	case subagent.EventProviderRemoved:
		m.set(false)
	}
}

// check is SPEC §5.4's mount-time checks against the provider.
func (m *Mount) check(p subagent.Provider) error {
	if m.cfg.MaxDepth != nil && !p.Capabilities().DepthLimit {
		return messages.Errorf(subagent.CodeUnsupportedCapability,
			"tool-subagent: provider %q cannot enforce maxDepth (no depthLimit capability) — set maxDepth: 'provider-managed' to leave the recursion budget to the provider", m.cfg.Provider)
	}
	if _, ok := p.(subagent.Continuable); m.cfg.BackgroundMode == Continuable && !ok {
		return messages.Errorf(subagent.CodeUnsupportedCapability,
			"tool-subagent: provider %q does not support `backgroundMode: continuable`", m.cfg.Provider)
	}
	return nil
}

// Config returns the resolved config.
func (m *Mount) Config() Resolved { return m.cfg }

// Available reports whether the provider is registered (and passed the checks).
func (m *Mount) Available() bool { return m.state.Load()&1 == 1 }

// Tool returns the tool's definition, whether or not it is available.
func (m *Mount) Tool() tools.Tool {
	return tools.Tool{Name: m.cfg.ToolName, Description: m.desc, Parameters: m.schema, Execute: m.execute}
}

// Tools returns the tool while its provider is registered, nothing otherwise.
func (m *Mount) Tools() []tools.Tool {
	if !m.Available() {
		return nil
	}
	return []tools.Tool{m.Tool()}
}

// Dispose stops following the provider; the tool is no longer offered. Idempotent.
// Delegations already running go on.
func (m *Mount) Dispose(ctx context.Context) error {
	err := m.listen.Run(ctx)
	m.set(false)
	return err
}

func description(r Resolved) string {
	d := "Delegate a self-contained task to a subagent. It works with its own context and returns its final answer; it sees nothing but your prompt, so make the prompt complete. Give a short (3-5 word) description."
	if r.EnableRunInBackground {
		if r.BackgroundMode == Continuable {
			d += " Delegations run in the background by default and you are notified when one settles; set run_in_background: false to wait for the answer instead."
		} else {
			d += " Set run_in_background: true to run it as a background job and keep working; collect its result with job_output."
		}
	}
	return d
}

func schema(r Resolved) json.RawMessage {
	props := `"description":{"type":"string","description":"A short (3-5 word) description of the task."},` +
		`"prompt":{"type":"string","description":"The complete task for the subagent."}`
	if r.EnableRunInBackground {
		props += `,"run_in_background":{"type":"boolean","description":"Run the subagent in the background instead of waiting for its answer."}`
	}
	return json.RawMessage(`{"type":"object","properties":{` + props + `},"required":["description","prompt"],"additionalProperties":false}`)
}

func (m *Mount) execute(ctx context.Context, call tools.Call) tools.Result {
	var args struct {
		Description     *string `json:"description"`
		Prompt          *string `json:"prompt"`
		RunInBackground *bool   `json:"run_in_background"`
	}
	if err := tools.DecodeArgs(call.Args, &args); err != nil {
		return tools.ErrorResult(err)
	}
	if args.Description == nil || *args.Description == "" {
		return tools.ErrorResult(errors.New("invalid description: expected a non-empty string"))
	}
	if args.Prompt == nil || *args.Prompt == "" {
		return tools.ErrorResult(errors.New("invalid prompt: expected a non-empty string"))
	}
	background := m.cfg.EnableRunInBackground && m.cfg.BackgroundMode == Continuable
	if v := args.RunInBackground; v != nil {
		if *v && !m.cfg.EnableRunInBackground {
			return tools.ErrorResult(errors.New(TextBackgroundDisabled))
		}
		background = *v
	}
	if call.Caller.Agent() == nil {
		return tools.ErrorResult(errors.New(TextNoAgent))
	}
	req := m.request(call, *args.Description, *args.Prompt)
	switch {
	case !background:
		return m.foreground(ctx, call, req)
	case m.cfg.BackgroundMode == Continuable:
		return m.continuable(ctx, call, req)
	}
	return m.background(call, req)
}

func (m *Mount) request(call tools.Call, description, prompt string) subagent.Request {
	parent := subagent.Parent{Session: call.Caller.Session()}
	if m.deps.ParentOf != nil {
		parent = m.deps.ParentOf(call)
		if parent.Session == "" {
			parent.Session = call.Caller.Session()
		}
	}
	req := subagent.Request{Prompt: prompt, Label: description, Persona: m.cfg.Persona, Parent: parent}
	if d := m.cfg.MaxDepth; d != nil {
		v := *d
		req.MaxDepth = &v
	}
	if f := m.cfg.ToolFilter; f != nil {
		req.ToolFilter = &subagent.ToolFilter{Allow: slices.Clone(f.Allow), Deny: slices.Clone(f.Deny)}
	}
	if o := m.cfg.AgentOptions; o != nil {
		c := *o
		req.Options = &c
	}
	return req
}

// collect waits for the run's result or for ctx to end, then always disposes the
// run (which aborts it if it is still going) and returns the result, the error that
// rejected it, and the dispose error. A result still unsettled once Dispose has
// returned — the run reached quiescence without settling — counts as aborted.
func collect(ctx context.Context, run *subagent.Run) (res subagent.Result, resErr, disposeErr error) {
	select {
	case <-run.Done():
	case <-ctx.Done():
	}
	disposeErr = run.Dispose(context.WithoutCancel(ctx))
	select {
	case <-run.Done():
		res, resErr = run.Result(context.Background())
	default:
		res = subagent.Result{StopReason: subagent.StopAborted}
	}
	return res, resErr, disposeErr
}

// foreground starts the run, awaits its result and then its disposal (SPEC §5.4).
func (m *Mount) foreground(ctx context.Context, call tools.Call, req subagent.Request) tools.Result {
	run, err := m.deps.Subagents.Start(ctx, m.cfg.Provider, req, call.Caller.Agent())
	if err != nil {
		return tools.ErrorResult(err)
	}
	res, resErr, disposeErr := collect(ctx, run)
	switch {
	case resErr != nil && disposeErr != nil:
		return tools.ErrorResult(&RunDisposeError{Run: resErr, Dispose: disposeErr})
	case resErr != nil:
		return tools.ErrorResult(resErr)
	case disposeErr != nil:
		return tools.ErrorResult(disposeErr)
	case res.StopReason != subagent.StopCompleted:
		return tools.ErrorResult(errors.New(FailureText(res)))
	}
	return tools.TextResult(res.Text(), ForegroundValue{Kind: "foreground", RunID: run.ID(), Output: res.Output})
}

// background starts a one-shot delegation as a job (SPEC §5.4): the provider starts
// only once the job's preflight has passed, in a goroutine the job owns, with the
// job's context; Cancel cancels that context; the outcome is sent once the run is
// disposed.
func (m *Mount) background(call tools.Call, req subagent.Request) tools.Result {
	if m.deps.Jobs == nil {
		return tools.ErrorResult(errors.New(TextNoJobs))
	}
	parent := call.Caller.Agent()
	id, err := m.deps.Jobs.Start(context.Background(), job.Spec{Kind: JobKind, Label: req.Label, Owner: parent, Run: func() (job.Hooks, error) {
		jctx, cancel := context.WithCancelCause(context.Background())
		done := &job.Settler{}
		go func() {
			o := m.runJob(jctx, req, parent)
			cancel(nil)
			done.Settle(o)
		}()
		return job.Hooks{Cancel: func(reason string) error { cancel(killCause(reason)); return nil }, CancelNonBlocking: true, OnSettle: done.OnSettle}, nil
	}})
	if err != nil {
		return tools.ErrorResult(err)
	}
	return tools.TextResult(startedBackground+id, BackgroundValue{Kind: "background", JobID: id})
}

// runJob is a background job's work: start the run, collect it, map its end.
func (m *Mount) runJob(jctx context.Context, req subagent.Request, parent *owner.Agent) (o job.Outcome) {
	defer func() {
		if v := recover(); v != nil {
			o = job.Outcome{Status: job.Failed, Detail: "Error: " + fmt.Sprint(v)}
		}
	}()
	run, err := m.deps.Subagents.Start(jctx, m.cfg.Provider, req, parent)
	if err != nil {
		return StartFailure(jctx.Err() != nil, err)
	}
	return Outcome(collect(jctx, run))
}

// continuable starts a continuable child; it resolves at inbox acceptance.
func (m *Mount) continuable(ctx context.Context, call tools.Call, req subagent.Request) tools.Result {
	if m.deps.Continuations == nil {
		return tools.ErrorResult(messages.Errorf(subagent.CodeContinuationUnavailable, "%s", TextContinuationUnavailable))
	}
	childID, _, err := m.deps.Continuations.StartContinuable(ctx, m.cfg.Provider, req.Label, req, call.Caller.Agent())
	if err != nil {
		return tools.ErrorResult(err)
	}
	return tools.TextResult(startedContinuable+childID, ContinuableValue{Kind: "continuable", SubagentID: childID})
}
