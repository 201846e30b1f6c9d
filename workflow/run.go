package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/supervision"
)

// The supervision tree kinds of the engine's actors (WORKFLOW.md 3.11).
const (
	KindEngine supervision.Kind = "workflow-engine"
	KindRun    supervision.Kind = "workflow-run"
	KindScript supervision.Kind = "workflow-script"
)

// Run is a started workflow run (WORKFLOW.md 3.4). It is holder-owned: call
// Dispose on every path. Its methods are safe for concurrent use.
type Run struct {
	id   string
	meta Meta
	root *actor.RootContext
	pid  *actor.PID // the run actor

	done chan struct{} // closed when res is set
	res  Result

	dispose      sync.Once
	disposed     chan struct{} // closed by the run actor when its disposal is over (or it stopped)
	endDelivered chan struct{} // closed by the engine actor once every listener heard workflow/end
	engineGone   <-chan struct{}
}

// ID is the run's id, a random UUID v4 (lowercase canonical form).
func (r *Run) ID() string { return r.id }

// Meta is the run's normalized meta.
func (r *Run) Meta() Meta { return r.meta.clone() }

// Done is closed when the result has settled.
func (r *Run) Done() <-chan struct{} { return r.done }

// Result waits for the result. A run's failure is a Result, never an error: the
// error is ctx's, when ctx ends first.
func (r *Run) Result(ctx context.Context) (Result, error) {
	select {
	case <-r.done:
		return r.res, nil
	default:
	}
	select {
	case <-r.done:
		return r.res, nil
	case <-ctx.Done():
		return Result{}, context.Cause(ctx)
	}
}

// Cancel asks the run to stop with reason ("" means "workflow cancelled"). The first
// reason processed wins; a settled run is unchanged.
func (r *Run) Cancel(reason string) { r.root.Send(r.pid, &cancelReq{reason: reason}) }

// Dispose cancels the run (reason "workflow disposed"), disposes its children,
// waits at most DisposeGraceMs for the result and quiescence, terminates the
// script and returns once workflow/end reached every listener. It is idempotent;
// ctx only stops the waiting.
func (r *Run) Dispose(ctx context.Context) error {
	r.dispose.Do(func() { r.root.Send(r.pid, &disposeReq{}) })
	for _, ch := range []<-chan struct{}{r.disposed, r.endDelivered} {
		select {
		case <-ch:
		case <-r.engineGone:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return nil
}

// Messages the run actor receives from outside the script.
type (
	cancelReq     struct{ reason string }
	disposeReq    struct{}
	ctxEnded      struct{}
	watchStop     struct{ stop func() bool }
	graceExpired  struct{}
	disposeExpiry struct{}
	startReturned struct {
		seq int
		run *subagent.Run
		err error
		p   *pendingStart
	}
	childResult struct {
		seq int
		res subagent.Result
		err error
	}
	childDisposeDone struct {
		seq int
		err error
	}
	crashReq    struct{}
	runCrashReq struct{}
)

// runConfig is what a run actor is spawned with.
type runConfig struct {
	h          *Run
	engine     *actor.PID
	rt         *subagent.Runtime
	provider   string
	parent     *owner.Agent
	parentInfo subagent.Parent
	grace      time.Duration
	aborted    bool // the start ctx was done at Launch
	logger     *slog.Logger
	inspector  *actor.PID
	script     scriptConfig
}

// runActor owns a run's settlement (its runCore), its children and timers.
type runActor struct {
	cfg  runConfig
	core *runCore

	self, script *actor.PID
	root         *actor.RootContext

	runCtx    context.Context // the children's ctx; owned here, cancelled at reap/cancel
	cancelRun context.CancelCauseFunc
	children  map[int]*subagent.Run
	pendings  map[*pendingStart]struct{} // provider calls not yet processed as returned
	forward   chan struct{}              // closed when the actor stops: ends result forwarders

	grace         *time.Timer
	disposing     bool
	disposeTimer  *time.Timer
	finished      bool
	unwatch       func() bool
	watchRemoved  bool
	panicText     string
	scriptPanic   string
	scriptStopped bool
}

func newRunActor(cfg runConfig) *runActor {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &runActor{cfg: cfg, core: newRunCore(), runCtx: ctx, cancelRun: cancel,
		children: map[int]*subagent.Run{}, pendings: map[*pendingStart]struct{}{}, forward: make(chan struct{})}
}

// scriptSupervisor stops a failed script actor, recording its panic text on the
// run actor (HandleFailure runs on the run actor's goroutine).
type scriptSupervisor struct{ a *runActor }

func (s scriptSupervisor) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, _ *actor.RestartStatistics, reason any, _ any) {
	if s.a.scriptPanic == "" {
		s.a.scriptPanic = panicText(reason)
	}
	sup.StopChildren(child)
}

func panicText(v any) string {
	if e, ok := v.(error); ok {
		return e.Error()
	}
	return fmt.Sprint(v)
}

func (a *runActor) Receive(c actor.Context) {
	defer func() {
		if v := recover(); v != nil {
			a.panicText = panicText(v)
			panic(v)
		}
	}()
	switch m := c.Message().(type) {
	case *actor.Started:
		a.self, a.root = c.Self(), c.ActorSystem().Root
		supervision.Emit(c, a.cfg.inspector, supervision.Event{Kind: supervision.Spawned,
			Node: supervision.Ref{Kind: KindRun, ID: a.cfg.h.id}, Parent: supervision.Ref{Kind: KindEngine, ID: a.cfg.engine.Id},
			Actor: c.Self().Id, Session: a.cfg.parent.Session()})
		sc := a.cfg.script
		pid, err := c.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &scriptActor{cfg: sc} }), "workflow-script")
		if err != nil {
			a.failure(c, "workflow script failed: "+err.Error())
			return
		}
		a.script = pid
		if a.cfg.aborted {
			a.cancel(c, "workflow start signal already aborted")
		}
	case *actor.Stopping:
		if !a.core.claimed {
			text := "workflow run actor stopped before the run settled"
			if a.panicText != "" {
				text = "workflow run actor failed: " + a.panicText
			}
			if _, won := a.core.claimActorFailure(text); won {
				a.settle("workflow script gone")
			}
		}
		a.cfg.script.budget.terminate()
		a.stopTimers()
		close(a.forward)
		for p := range a.pendings {
			if !p.state.CompareAndSwap(pendingOpen, pendingAbandoned) && p.run != nil {
				run := p.run // reported, but the message will never be processed
				go func() { _ = safeDispose(run) }()
			}
		}
	case *actor.Stopped:
		cause := supervision.CauseNone
		if a.panicText != "" {
			cause = supervision.CausePanic
		}
		supervision.Emit(c, a.cfg.inspector, supervision.Event{Kind: supervision.Stopped,
			Node: supervision.Ref{Kind: KindRun, ID: a.cfg.h.id}, Cause: cause})
		closeOnce(a.cfg.h.disposed)
	case *actor.Terminated:
		if a.script != nil && m.Who.Equal(a.script) {
			a.scriptStopped = true
			if a.scriptPanic != "" {
				a.failure(c, "workflow script failed: "+a.scriptPanic)
			} else {
				a.failure(c, "workflow script stopped before the run settled")
			}
			a.checkDisposed(c)
		}

	// from outside
	case *cancelReq:
		a.cancel(c, m.reason)
	case *ctxEnded:
		if !a.watchRemoved {
			a.cancel(c, "workflow signal aborted")
		}
	case *watchStop:
		if a.watchRemoved {
			m.stop()
		} else {
			a.unwatch = m.stop
		}
	case *disposeReq:
		if a.disposing {
			return
		}
		a.disposing = true
		a.removeWatch()
		a.cancel(c, "workflow disposed")
		a.reap("workflow disposed")
		a.disposeTimer = time.AfterFunc(a.cfg.grace, func() { a.root.Send(a.self, &disposeExpiry{}) })
		a.checkDisposed(c)
	case *graceExpired:
		if _, won := a.core.claimGrace(); won {
			a.settle("workflow settled")
			a.cfg.script.budget.terminate()
			a.stopScript(c)
		}
		a.checkDisposed(c)
	case *disposeExpiry:
		if _, won := a.core.claimGrace(); won {
			a.settle("workflow settled")
		}
		a.finish(c)
	case *runCrashReq:
		panic("injected run crash")
	case *crashReq:
		if a.script != nil {
			c.Send(a.script, &msgCrash{})
		}

	// children
	case *startReturned:
		a.startReturned(c, m)
		a.checkDisposed(c)
	case *childResult:
		a.childResult(c, m)
	case *childDisposeDone:
		if m.err != nil {
			a.cfg.logger.Warn("workflow: child dispose failed: " + m.err.Error())
		}
		if a.core.childDisposed(m.seq) && a.script != nil {
			c.Send(a.script, &msgChildDisposed{seq: m.seq})
		}
		a.checkDisposed(c)

	// from the script
	case *msgReady:
		if a.core.cancelled {
			c.Send(a.script, &msgCancel{reason: a.core.reason})
		} else {
			c.Send(a.script, &msgGo{})
		}
	case *msgChildStart:
		if refusal, ok := a.core.childStart(); !ok {
			c.Send(a.script, &msgChildStartError{seq: m.seq, text: refusal})
			return
		}
		a.startChild(m)
	case *msgChildDispose:
		start, ack := a.core.disposeChild(m.seq)
		if ack {
			c.Send(a.script, &msgChildDisposed{seq: m.seq})
		}
		if start {
			a.disposeChild(m.seq)
		}
	case *msgPhase:
		if a.core.narration() {
			a.emit(Event{Type: EventPhase, Title: m.title})
		}
	case *msgLog:
		if a.core.narration() {
			a.emit(Event{Type: EventLog, Message: m.message})
		}
	case *msgAgentStart:
		if a.core.agentStart(m.info) {
			a.emit(Event{Type: EventAgentStart, Agent: m.info})
		}
	case *msgAgentEnd:
		if info, ok := a.core.agentEnd(m.seq); ok {
			a.emit(Event{Type: EventAgentEnd, Agent: info, Outcome: m.outcome})
		}
	case *msgResult:
		if _, won := a.core.claimScript(m.res); won {
			a.settle("workflow settled")
		}
		a.checkDisposed(c)
	}
}

func closeOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// cancel is WORKFLOW.md 3.8's processing of a cancel.
func (a *runActor) cancel(c actor.Context, reason string) {
	if !a.core.cancel(reason) {
		return
	}
	if a.script != nil {
		c.Send(a.script, &msgCancel{reason: a.core.reason})
	}
	a.cancelRun(errors.New(a.core.reason))
	a.grace = time.AfterFunc(a.cfg.grace, func() { a.root.Send(a.self, &graceExpired{}) })
}

// failure is a script failure (WORKFLOW.md 3.10).
func (a *runActor) failure(c actor.Context, text string) {
	if _, won := a.core.claimFailure(text); won {
		a.settle("workflow script gone")
	}
	a.cfg.script.budget.terminate()
}

// settle carries out a claim: reap, close open agent-starts, workflow/end, Done.
func (a *runActor) settle(reapReason string) {
	res := a.core.result
	a.removeWatch()
	if a.grace != nil {
		a.grace.Stop()
	}
	a.reap(reapReason)
	for _, info := range a.core.closeOpen() {
		a.emit(Event{Type: EventAgentEnd, Agent: info, Outcome: OutcomeCancelled})
	}
	a.emit(Event{Type: EventEnd, Result: ResultInfo{StopReason: res.StopReason, Error: res.Error, AgentsStarted: res.AgentsStarted}})
	a.cfg.h.res = res
	close(a.cfg.h.done)
}

func (a *runActor) removeWatch() {
	a.watchRemoved = true
	if a.unwatch != nil {
		a.unwatch()
		a.unwatch = nil
	}
}

// reap cancels the run context and starts disposing every published child.
func (a *runActor) reap(own string) {
	a.cancelRun(errors.New(a.core.reapReason(own)))
	for _, seq := range a.core.reap() {
		a.disposeChild(seq)
	}
}

func (a *runActor) disposeChild(seq int) {
	run := a.children[seq]
	root, self := a.root, a.self
	go func() {
		err := safeDispose(run)
		root.Send(self, &childDisposeDone{seq: seq, err: err})
	}()
}

func safeDispose(run *subagent.Run) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = errors.New(panicText(v))
		}
	}()
	return run.Dispose(context.Background())
}

func (a *runActor) emit(ev Event) {
	a.root.Send(a.cfg.engine, &dispatchEv{h: a.cfg.h, parent: a.cfg.parent, ev: ev})
}

func (a *runActor) startChild(m *msgChildStart) {
	req := m.req
	req.Parent = a.cfg.parentInfo
	rt, provider, parent, ctx := a.cfg.rt, a.cfg.provider, a.cfg.parent, a.runCtx
	root, self, seq := a.root, a.self, m.seq
	p := &pendingStart{}
	a.pendings[p] = struct{}{}
	go func() {
		run, err := safeStart(ctx, rt, provider, req, parent)
		p.run = run
		if p.state.CompareAndSwap(pendingOpen, pendingReported) {
			root.Send(self, &startReturned{seq: seq, run: run, err: err, p: p})
		} else if run != nil { // the run actor stopped without it: abandoned to this goroutine
			_ = safeDispose(run)
		}
	}()
}

func safeStart(ctx context.Context, rt *subagent.Runtime, provider string, req subagent.Request, parent *owner.Agent) (run *subagent.Run, err error) {
	defer func() {
		if v := recover(); v != nil {
			run, err = nil, errors.New(panicText(v))
		}
	}()
	return rt.Start(ctx, provider, req, parent)
}

// pendingStart hands a provider call's returned run over between its goroutine and
// the run actor without a lock: the goroutine reports it (open → reported) unless
// the actor stopped first (open → abandoned), in which case the goroutine disposes
// it; a run reported but never processed (protoactor's Stop drops queued messages)
// is disposed by the actor as it stops.
type pendingStart struct {
	state atomic.Int32
	run   *subagent.Run // written before the state changes from open
}

const (
	pendingOpen int32 = iota
	pendingReported
	pendingAbandoned
)

func (a *runActor) startReturned(c actor.Context, m *startReturned) {
	delete(a.pendings, m.p)
	refusal, closed, publish := a.core.startReturned(m.seq, m.err == nil)
	switch {
	case publish:
		a.children[m.seq] = m.run
		c.Send(a.script, &msgChildStarted{seq: m.seq, childID: m.run.ID()})
		run, root, self, stop := m.run, a.root, a.self, a.forward
		go func() {
			select {
			case <-run.Done():
			case <-stop:
				return
			}
			res, err := run.Result(context.Background())
			root.Send(self, &childResult{seq: m.seq, res: res, err: err})
		}()
	case m.err == nil: // returned after closure: refused and disposed here
		c.Send(a.script, &msgChildStartError{seq: m.seq, text: refusal})
		run, logger := m.run, a.cfg.logger
		go func() {
			if err := safeDispose(run); err != nil {
				logger.Warn("workflow: refused child dispose failed: " + err.Error())
			}
		}()
	case closed:
		c.Send(a.script, &msgChildStartError{seq: m.seq, text: refusal})
	default:
		c.Send(a.script, &msgChildStartError{seq: m.seq, text: "Error: " + m.err.Error()})
	}
}

func (a *runActor) childResult(c actor.Context, m *childResult) {
	if a.core.claimed {
		return
	}
	switch {
	case m.err != nil:
		c.Send(a.script, &msgChildFailed{seq: m.seq, text: "Error: " + m.err.Error()})
	case len(m.res.Structured) > 0 && !json.Valid(m.res.Structured):
		_, err := parseJV(m.res.Structured)
		c.Send(a.script, &msgChildFailed{seq: m.seq, text: "workflow child result could not cross into the script: " + err.Error()})
	default:
		c.Send(a.script, &msgChildSettled{seq: m.seq, res: m.res})
	}
}

// checkDisposed finishes a disposal once the run is claimed and quiescent.
func (a *runActor) checkDisposed(c actor.Context) {
	if a.disposing && a.core.claimed && a.core.quiescent() {
		a.finish(c)
	}
}

// finish ends a disposal: terminate the script, reap again, stop.
func (a *runActor) finish(c actor.Context) {
	if a.finished {
		return
	}
	a.finished = true
	a.cfg.script.budget.terminate()
	a.reap("workflow disposed")
	a.stopTimers()
	c.Stop(c.Self())
}

func (a *runActor) stopScript(c actor.Context) {
	if a.script != nil && !a.scriptStopped {
		c.Stop(a.script)
	}
}

func (a *runActor) stopTimers() {
	for _, t := range []*time.Timer{a.grace, a.disposeTimer} {
		if t != nil {
			t.Stop()
		}
	}
}
