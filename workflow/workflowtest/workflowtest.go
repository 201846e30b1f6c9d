// Package workflowtest is the workflow engine's test support: the stub subagent
// provider of WORKFLOW.md 6.0 (every start recorded, settled by a reply function, by
// hand, or never; publication deferred; dispose errors and panics) and an event
// recorder that checks the event invariants of WORKFLOW.md case W45 on every event it hears.
// The engine's own tests (workflow) and the tool and job-mode suites (test/workflow) share it.
package workflowtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/workflow"
)

// Budget bounds every wait of this package.
const Budget = 10 * time.Second

// Mode says how a stub run settles.
type Mode int

const (
	// Auto settles each run at start with Behaviour.Reply.
	Auto Mode = iota
	// Manual leaves each run open until the test calls Stub.Finish.
	Manual
)

// Behaviour is what the stub does on its next starts; change it with Stub.Set.
type Behaviour struct {
	Mode Mode
	// Deferred holds each start until the test sends on StubRun.Publish (nil
	// publishes, an error rejects); CtxDeaf makes that wait ignore the start's ctx.
	Deferred bool
	CtxDeaf  bool
	// FailsOnAbort settles a run whose ctx ends with an error instead of "aborted".
	FailsOnAbort bool
	// Reply is the result of the index-th start (Auto mode).
	Reply func(req subagent.ResolvedRequest, index int) subagent.Result
	// DisposeErr is returned by Dispose (or panicked with, under DisposePanic).
	DisposeErr   error
	DisposePanic bool
	// NeverSettle: the run settles only when disposed.
	NeverSettle bool
	// OnCtx runs when a start's ctx ends.
	OnCtx func()
}

// Stub is a subagent.Provider that records its starts.
type Stub struct {
	name string
	caps subagent.Capabilities

	mu struct {
		sync.Mutex
		b      Behaviour
		starts []*StubRun
		order  []string // "start <id>" / "dispose <id>"
	}
	changed chan struct{} // closed and replaced on every recorded change
}

// StubRun is one start of a Stub.
type StubRun struct {
	Index    int
	Req      subagent.ResolvedRequest
	Ctx      context.Context
	ID       string
	Run      *subagent.Run
	settle   func(subagent.Result, error)
	Publish  chan error // Deferred: the test publishes (nil) or rejects
	Returned chan struct{}
	disposes int

	CtxErrAtStart error
}

// NewStub returns a stub provider named name, in Auto mode, replying "stub reply".
func NewStub(name string) *Stub {
	s := &Stub{name: name, caps: subagent.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true}, changed: make(chan struct{})}
	s.mu.b.Reply = func(subagent.ResolvedRequest, int) subagent.Result { return Text("stub reply") }
	return s
}

// Text is a completed result whose output is one text block.
func Text(s string) subagent.Result {
	return subagent.Result{Output: []tools.Block{{Type: "text", Text: s}}, StopReason: subagent.StopCompleted}
}

// Set changes the stub's behaviour for the starts that follow (under its lock).
func (s *Stub) Set(f func(b *Behaviour)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.mu.b)
}

func (s *Stub) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Name, Capabilities and InheritsParentContext make Stub a subagent.Provider.
func (s *Stub) Name() string                        { return s.name }
func (s *Stub) Capabilities() subagent.Capabilities { return s.caps }
func (s *Stub) InheritsParentContext() bool         { return false }

// Start records the start and settles it as Behaviour says.
func (s *Stub) Start(ctx context.Context, req subagent.ResolvedRequest) (*subagent.Run, error) {
	s.mu.Lock()
	r := &StubRun{Index: len(s.mu.starts), Req: req, Ctx: ctx, CtxErrAtStart: ctx.Err(), Publish: make(chan error, 1), Returned: make(chan struct{})}
	r.ID = s.name + "-run-" + strconv.Itoa(r.Index+1)
	s.mu.starts = append(s.mu.starts, r)
	s.mu.order = append(s.mu.order, "start "+r.ID)
	deferred, deaf, failsOnAbort, mode, reply := s.mu.b.Deferred, s.mu.b.CtxDeaf, s.mu.b.FailsOnAbort, s.mu.b.Mode, s.mu.b.Reply
	disposeErr, disposePanic, never, onCtx := s.mu.b.DisposeErr, s.mu.b.DisposePanic, s.mu.b.NeverSettle, s.mu.b.OnCtx
	s.notify()
	s.mu.Unlock()
	defer close(r.Returned)
	if deferred {
		var err error
		if deaf {
			err = <-r.Publish
		} else {
			select {
			case err = <-r.Publish:
			case <-ctx.Done():
				err = errors.New("child start aborted before publication")
			}
		}
		if err != nil {
			return nil, err
		}
	}
	var settleOnDispose func(subagent.Result, error)
	run, settle := subagent.NewRun(r.ID, false, func(context.Context) error {
		// a disposed run settles (the seam's contract), even one that "never settles"
		defer settleOnDispose(subagent.Result{StopReason: subagent.StopAborted}, nil)
		s.mu.Lock()
		r.disposes++
		s.mu.order = append(s.mu.order, "dispose "+r.ID)
		s.notify()
		s.mu.Unlock()
		if disposePanic {
			panic(disposeErr.Error())
		}
		return disposeErr
	})
	settleOnDispose = settle
	s.mu.Lock()
	r.Run, r.settle = run, settle
	s.notify()
	s.mu.Unlock()
	if onCtx != nil {
		context.AfterFunc(ctx, onCtx)
	}
	if !deaf && !never {
		context.AfterFunc(ctx, func() {
			if failsOnAbort {
				settle(subagent.Result{}, errors.New("backend crashed on abort"))
				return
			}
			settle(subagent.Result{StopReason: subagent.StopAborted}, nil)
		})
	}
	if mode == Auto && !never {
		settle(reply(req, r.Index), nil)
	}
	return run, nil
}

// Finish settles r's run (waiting for its publication) with res or err.
func (s *Stub) Finish(t *testing.T, r *StubRun, res subagent.Result, err error) {
	t.Helper()
	var settle func(subagent.Result, error)
	s.Await(t, "the Stub run's publication", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		settle = r.settle
		return settle != nil
	})
	settle(res, err)
}

// Runs returns the starts so far.
func (s *Stub) Runs() []*StubRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*StubRun(nil), s.mu.starts...)
}

// Order lists "start <id>" and "dispose <id>" in the order they happened.
func (s *Stub) Order() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.mu.order...)
}

// Disposes counts the Dispose calls of r's run.
func (s *Stub) Disposes(r *StubRun) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return r.disposes
}

// Await waits until cond holds over the Stub's state (re-checked on every change).
func (s *Stub) Await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(Budget)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// AwaitStarts waits for n starts and returns them.
func (s *Stub) AwaitStarts(t *testing.T, n int) []*StubRun {
	t.Helper()
	s.Await(t, fmt.Sprintf("%d Stub starts", n), func() bool { return len(s.Runs()) >= n })
	return s.Runs()[:n]
}

// ---- the event Recorder and W45's checker ----

// Recorder records a run's events and checks W45's invariants as they come.
type Recorder struct {
	mu struct {
		sync.Mutex
		events []workflow.Event
		errs   []string
		starts map[string]*runCheck
		ended  map[string]bool
	}
	changed chan struct{}
}

type runCheck struct {
	meta   workflow.Meta
	agents map[int]workflow.AgentInfo
	open   map[int]bool
	starts int
}

// NewRecorder returns an empty recorder; pass its Hear to workflow.Engine.Listen.
func NewRecorder() *Recorder {
	r := &Recorder{changed: make(chan struct{})}
	r.mu.starts = map[string]*runCheck{}
	r.mu.ended = map[string]bool{}
	return r
}

func metaJSON(m workflow.Meta) string { b, _ := json.Marshal(m); return string(b) }

// Hear records ev and checks W45's invariants with DSH's messages.
func (r *Recorder) Hear(ev workflow.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer func() { close(r.changed); r.changed = make(chan struct{}) }()
	r.mu.events = append(r.mu.events, ev)
	bad := func(s string) { r.mu.errs = append(r.mu.errs, s) }
	id := ev.Run.ID
	if ev.Type == workflow.EventStart {
		if id == "" || ev.Run.Meta.Name == "" || ev.Run.Meta.Description == "" {
			bad("workflow/start id, meta.name, and meta.description must be non-empty")
		}
		if r.mu.starts[id] != nil {
			bad(fmt.Sprintf("workflow/start repeated run id %q", id))
		}
		r.mu.starts[id] = &runCheck{meta: ev.Run.Meta, agents: map[int]workflow.AgentInfo{}, open: map[int]bool{}}
		return
	}
	rc := r.mu.starts[id]
	if rc == nil || r.mu.ended[id] {
		bad(fmt.Sprintf("workflow event has no matching workflow/start for run %q", id))
		return
	}
	if metaJSON(rc.meta) != metaJSON(ev.Run.Meta) {
		bad(fmt.Sprintf("workflow event meta diverges from workflow/start for run %q", id))
	}
	switch ev.Type {
	case workflow.EventAgentStart:
		if ev.Agent.Seq < 1 || ev.Agent.ChildID == "" {
			bad("workflow/agent-start seq must be positive and childId must be non-empty")
		}
		if _, dup := rc.agents[ev.Agent.Seq]; dup {
			bad(fmt.Sprintf("workflow/agent-start repeated seq %d", ev.Agent.Seq))
		}
		rc.agents[ev.Agent.Seq] = ev.Agent
		rc.open[ev.Agent.Seq] = true
		rc.starts++
	case workflow.EventAgentEnd:
		a, ok := rc.agents[ev.Agent.Seq]
		if !ok || !rc.open[ev.Agent.Seq] {
			bad(fmt.Sprintf("workflow/agent-end has no matching start for seq %d", ev.Agent.Seq))
			return
		}
		if a.Label != ev.Agent.Label || a.ChildID != ev.Agent.ChildID || (a.Phase == nil) != (ev.Agent.Phase == nil) ||
			(a.Phase != nil && *a.Phase != *ev.Agent.Phase) {
			bad(fmt.Sprintf("workflow/agent-end identity diverges from workflow/agent-start for seq %d", ev.Agent.Seq))
		}
		delete(rc.open, ev.Agent.Seq)
	case workflow.EventEnd:
		if n := len(rc.open); n > 0 {
			bad(fmt.Sprintf("workflow/end has %d agent call(s) without workflow/agent-end", n))
		}
		if ev.Result.AgentsStarted < rc.starts {
			bad("workflow/end agentsStarted must be a safe integer covering every observed agent start")
		}
		if (ev.Result.Error == "") != (ev.Result.StopReason == workflow.StopCompleted) {
			bad("workflow/end error must be absent exactly for completed runs")
		}
		r.mu.ended[id] = true
	}
}

// Violations lists every broken W45 invariant heard so far.
func (r *Recorder) Violations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.mu.errs...)
}

// Of returns the events of run id, in order.
func (r *Recorder) Of(id string) []workflow.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []workflow.Event
	for _, ev := range r.mu.events {
		if ev.Run.ID == id {
			out = append(out, ev)
		}
	}
	return out
}

// All returns every event heard, in order.
func (r *Recorder) All() []workflow.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]workflow.Event(nil), r.mu.events...)
}

// Await waits until run id has an event of type typ.
func (r *Recorder) Await(t *testing.T, id, typ string) workflow.Event {
	t.Helper()
	return r.AwaitN(t, id, typ, 1)
}

// AwaitN waits until run id has n events of type typ and returns the n-th.
func (r *Recorder) AwaitN(t *testing.T, id, typ string, n int) workflow.Event {
	t.Helper()
	deadline := time.NewTimer(Budget)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		ch := r.changed
		r.mu.Unlock()
		if evs := Filter(r.Of(id), typ); len(evs) >= n {
			return evs[n-1]
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s of run %s", typ, id)
		}
	}
}

// Types lists the events' types.
func Types(evs []workflow.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

// Filter keeps the events of type typ.
func Filter(evs []workflow.Event, typ string) []workflow.Event {
	return slices.DeleteFunc(slices.Clone(evs), func(ev workflow.Event) bool { return ev.Type != typ })
}

// AwaitAny waits until some recorded event satisfies match.
func (r *Recorder) AwaitAny(t *testing.T, match func(workflow.Event) bool) workflow.Event {
	t.Helper()
	deadline := time.NewTimer(Budget)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		ch := r.changed
		r.mu.Unlock()
		for _, ev := range r.All() {
			if match(ev) {
				return ev
			}
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatal("timed out waiting for an event")
		}
	}
}

// Published returns the starts whose run is published (settleable), in start order, and a
// channel closed at the stub's next change.
func (s *Stub) Published() ([]*StubRun, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*StubRun
	for _, r := range s.mu.starts {
		if r.settle != nil {
			out = append(out, r)
		}
	}
	return out, s.changed
}

// Settle settles r's run with res or err; r must be one Published returned (first wins).
func (r *StubRun) Settle(res subagent.Result, err error) { r.settle(res, err) }
