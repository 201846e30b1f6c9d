package registry

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/internal/mailbox"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/scope"
	"github.com/troupe-rt/troupe/supervision"
)

// Client is the handle to the job registry actor: every method is a message to it
// (or, routed by it, to a job actor) and waits for the one reply. It is safe for
// concurrent use. Every method that waits takes ctx first: when ctx ends before
// the reply, it returns a job/aborted error (messages.ErrAborted) that also
// matches ctx's error (context.Canceled or context.DeadlineExceeded) and its cause
// with errors.Is; Wait keeps SPEC's job/wait-aborted (§1.3 rule 10). A request
// already sent may still take effect after an abort unless its method says
// otherwise. Methods that wait for a reply must not be called from an observer
// (JobDoneFunc, JobsChangedFunc), which runs on the registry itself; use ListAsync
// there. With Config.CallerRuns, a request made while the registry is idle is
// handled on the caller's goroutine before the method waits (its own request only,
// never another caller's): the handler's work is the registry's usual step, which
// never blocks, so the caller waits no longer than it would for the reply. A Start,
// whose step calls the producer's Run, is run so only for a ctx that can never end
// (runsProducer): a misbehaving producer's blocking hook must not keep a caller
// whose ctx ended from returning; that caller also runs the new job actor's
// Started (an OnSettle producer's: the subscription) once its send returns, so
// the actor is idle when Start returns (job.Spawner.Spawn). A Read
// whose ctx can end is run so unless its
// answer would call a ReadOutput not declared non-blocking (job.Hooks.ReadNonBlocking),
// which the registry, knowing the job, hands to its worker (registryActor.handOff).
type Client struct {
	root    *actor.RootContext
	pid     *actor.PID
	reads   sync.Pool // freed readCalls, reused by Read
	kills   sync.Pool // freed killCalls, reused by Kill
	settles sync.Pool // answered settleCalls, reused by AwaitSettled
	stopped <-chan struct{}
	tokens  atomic.Uint64
	calls   sync.Pool // answered startCalls, reused by Start
	runs    byCaller  // Config.CallerRuns: requests are run by their callers when the registry is idle
}

// Spawn starts the registry actor. stopped must be closed once the actor system
// no longer runs it, so no caller waits forever on a reply that cannot come.
func Spawn(system *actor.ActorSystem, cfg Config, stopped <-chan struct{}) (*Client, error) {
	c := &Client{root: system.Root, stopped: stopped, runs: byCaller(cfg.CallerRuns)}
	// The registry supervises its job actors itself (registryActor.HandleFailure).
	// With callers running requests, a job actor's stop runs the registry's
	// Terminated too when the registry is idle (mailbox.NewTerminatedBySender).
	mb := mailbox.Producer
	if cfg.CallerRuns {
		mb = mailbox.ProducerTerminatedBySender
	}
	props := actor.PropsFromProducer(func() actor.Actor { return newRegistryActor(cfg, c) },
		actor.WithGuardian(supervision.RegistryStrategy()), actor.WithMailbox(mb))
	if cfg.Dispatcher != nil {
		props = props.Configure(actor.WithDispatcher(cfg.Dispatcher))
	}
	pid, err := system.Root.SpawnNamed(props, "registry")
	if err != nil {
		return nil, err
	}
	c.pid = pid
	return c, nil
}

// PID returns the registry actor's PID.
func (c *Client) PID() *actor.PID { return c.pid }

// Root is the root context of the registry's actor system: what the packages
// built on the registry (the job controller, the job tools' notice listener) send
// and spawn with.
func (c *Client) Root() *actor.RootContext { return c.root }

func stoppedErr() error {
	return &messages.Error{Code: messages.CodeStopped, Message: "troupe system is shut down"}
}

// await waits for the one reply on ch; a reply already there wins over the
// system's stop and ctx's end.
func await[T any](ctx context.Context, c *Client, ch <-chan T) (T, error) {
	var err error
	select {
	case v := <-ch:
		return v, nil
	case <-c.stopped:
		err = stoppedErr()
	case <-ctx.Done():
		err = job.Aborted(ctx)
	}
	select {
	case v := <-ch:
		return v, nil
	default:
		var zero T
		return zero, err
	}
}

// runsProducer reports whether a request whose handler calls a producer's hook
// (a start's Run, its job actor's Started's OnSettle; a kill's Cancel on the
// job actor, Kill.Handoff) may be run by its caller: only when
// the registry lets callers run requests (Config.CallerRuns) and ctx can never end.
// Those hooks never block (SPEC §1.3 rule 9), but a misbehaving producer's may, and
// a caller whose ctx can end must still return at that end (job/aborted) while the
// registry is stuck in the hook, which it could not do from inside the hook. A
// caller whose ctx never ends waits for the hook's return either way. The other
// requests (kill, wait, get, list, record, AwaitSettled) call no producer hook on
// the registry and are run by any caller; a Read is decided by the registry
// (registryActor.handOff).
func (c *Client) runsProducer(ctx context.Context) byCaller {
	return c.runs && ctx.Done() == nil
}

// awaitYielding is await for a reply the registry usually has ready within one
// handler run (a live read). A request the caller ran itself (Config.CallerRuns,
// the registry idle) has its reply in ch already: it is taken at once. Otherwise
// it first yields the processor once, so that the worker the request just made
// runnable on this processor (the registry's, or the job actor's a read was routed
// to) runs it and sends the reply into ch's buffer while no one waits on ch — no
// park of the caller, no wake of it — and takes that reply; if it is not there yet
// (the worker runs elsewhere, or the registry is busy), it waits as await does.
// The yield only changes when the caller runs, never what it receives.
func awaitYielding[T any](ctx context.Context, c *Client, ch <-chan T) (T, error) {
	select {
	case v := <-ch:
		return v, nil
	default:
	}
	runtime.Gosched()
	select {
	case v := <-ch:
		return v, nil
	default:
		return await(ctx, c, ch)
	}
}

// Start runs SPEC §2.2: preflight, the producer's Run, then registration. It returns
// the new id (`<kind>-N`) or a coded error; on error nothing is registered. A Start
// aborted by ctx after it was sent may still register its job (it is listed).
func (c *Client) Start(ctx context.Context, spec job.Spec) (string, error) {
	if ctx.Err() != nil {
		return "", job.Aborted(ctx)
	}
	call, _ := c.calls.Get().(*startCall)
	if call == nil {
		reply := make(chan startRes, 1)
		call = &startCall{req: startReq{reply: reply, byCaller: c.runs}, reply: reply}
	}
	call.req.spec = spec
	// The start runs the producer's Run, and its job actor's Started the producer's
	// OnSettle: only a caller with no ctx to honour runs them (see runsProducer).
	call.req.byCaller = c.runsProducer(ctx)
	call.req.handoff = nil
	if call.req.byCaller {
		call.handoff.Reset()
		call.req.handoff = &call.handoff
	}
	h := call.req.handoff
	c.root.Send(c.pid, &call.req)
	if h != nil {
		if run := h.Take(); run != nil {
			// The start spawned the job actor and left its first run (its Started)
			// here: this goroutine makes it (job.Spawner.Spawn), so the actor is idle
			// when Start returns.
			run()
		}
	}
	res, err := await(ctx, c, call.reply)
	if err != nil {
		// The registry may still answer (or read the request): the call is dropped.
		return "", err
	}
	if res.free {
		call.req.spec = job.Spec{} // the pool holds no producer, owner or record
		c.calls.Put(call)
	}
	return res.id, res.err
}

// startCall is one Start's request and its reply channel, reused across Starts:
// the registry answers a startReq exactly once, and an answer marked free says it
// keeps no reference to the request (startReq's handler reads its spec and reply
// before that answer, and nothing after). A call whose wait ended without the
// answer (an abort, a stopped registry) or whose start panicked is never reused.
// The pool is the Client's (Client.calls), not the process's: a channel made in a
// synctest bubble is used only with the system made in that bubble (whose actors
// are the only ones that can send on it), never by another system's Start.
type startCall struct {
	req     startReq
	reply   chan startRes
	handoff mailbox.Handoff // the new job actor's first run left for this caller (startReq.handoff)
}

// Get returns a non-consuming snapshot of a job visible to caller (AsAgent, or
// NoCaller; see Caller: an agent that is not its session's registered instance is
// refused job/unauthenticated). It never touches the read cursor or the claim.
func (c *Client) Get(ctx context.Context, id string, caller Caller) (*messages.JobSnapshot, error) {
	if ctx.Err() != nil {
		return nil, job.Aborted(ctx)
	}
	reply := make(chan getRes, 1)
	c.root.Send(c.pid, &getReq{id: id, caller: caller, reply: reply, byCaller: c.runs})
	res, err := await(ctx, c, reply)
	if err != nil {
		return nil, err
	}
	return res.snap, res.err
}

// AwaitSettled waits until the job has settled and its settlement step — observers
// included — has run, and returns the settled snapshot. Unlike Wait it claims
// nothing and counts as no waiter: it is an observation, for UIs and tests.
func (c *Client) AwaitSettled(ctx context.Context, id string, caller Caller) (*messages.JobSnapshot, error) {
	if ctx.Err() != nil {
		return nil, job.Aborted(ctx)
	}
	call, _ := c.settles.Get().(*settleCall)
	if call == nil {
		reply := make(chan getRes, 1)
		call = &settleCall{req: observeReq{reply: reply, byCaller: c.runs}, reply: reply}
	}
	call.req.id, call.req.caller = id, caller
	c.root.Send(c.pid, &call.req)
	select {
	case res := <-call.reply:
		call.req.id, call.req.caller = "", Caller{}
		c.settles.Put(call)
		return res.snap, res.err
	case <-c.stopped:
		return nil, stoppedErr()
	case <-ctx.Done():
		return nil, job.Aborted(ctx) // the registry may still answer: the call is dropped
	}
}

// settleCall is one AwaitSettled's request and its reply channel, reused once
// answered: the registry answers an observeReq exactly once, and by then holds
// neither the request (read when it arrives) nor the channel (an observer's entry
// is deleted when it is answered). A call whose wait ended without the answer is
// never reused. The pool is the Client's, not the process's (see readCall).
type settleCall struct {
	req   observeReq
	reply chan getRes
}

// Record returns a job's output record (nil if the job declared none) and a
// snapshot, under read's fence. It touches neither the read cursor nor the claim.
func (c *Client) Record(ctx context.Context, id string, caller Caller) (*job.Record, *messages.JobSnapshot, error) {
	if ctx.Err() != nil {
		return nil, nil, job.Aborted(ctx)
	}
	reply := make(chan recordRes, 1)
	c.root.Send(c.pid, &recordReq{id: id, caller: caller, reply: reply, byCaller: c.runs})
	res, err := await(ctx, c, reply)
	if err != nil {
		return nil, nil, err
	}
	return res.rec, res.snap, res.err
}

// List returns the jobs visible to caller in registration order: its session's own
// and every unowned job.
func (c *Client) List(ctx context.Context, caller Caller) ([]*messages.JobSnapshot, error) {
	if ctx.Err() != nil {
		return nil, job.Aborted(ctx)
	}
	res, err := await(ctx, c, c.ListAsync(caller))
	if err != nil {
		return nil, err
	}
	return res.Jobs, res.Err
}

// ListAsync sends a list query and returns where its answer will arrive. The query
// is queued before ListAsync returns, so an observer that calls it sees every
// commit made before it was called (SPEC §1.3 rule 12).
func (c *Client) ListAsync(caller Caller) <-chan ListResult {
	reply := make(chan ListResult, 1)
	c.root.Send(c.pid, &listReq{caller: caller, reply: reply, byCaller: c.runs})
	return reply
}

// Read returns the job's new output and a snapshot taken after the read (SPEC §2.6):
// the consuming delta for a stream kind; for a final-output kind "" while live and
// the final output, idempotently, after settlement. A read of a settled job claims
// its completion report. A read whose ctx ended before the job actor took it up
// reads nothing (a stream's delta stays for the next read).
func (c *Client) Read(ctx context.Context, id string, caller Caller) (string, *messages.JobSnapshot, error) {
	if ctx.Err() != nil {
		return "", nil, job.Aborted(ctx)
	}
	call, _ := c.reads.Get().(*readCall)
	if call == nil {
		call = newReadCall(c.runs)
	}
	call.as.caller = caller
	// Any read may be run by its caller: the registry hands to its worker one whose
	// ctx can end and whose answer calls a ReadOutput not declared non-blocking
	// (registryActor.handOff), which it alone can tell, knowing the job.
	call.as.byCaller, call.as.onCaller = c.runs, false
	call.read = job.Read{ID: id, Ctx: ctx, Reply: call.reply}
	c.root.Send(c.pid, &call.as)
	res, err := awaitYielding(ctx, c, call.reply)
	if err != nil {
		// The registry may still take the request up and answer it: the call is dropped.
		return "", nil, err
	}
	if res.Free {
		call.as.caller = Caller{}
		call.read = job.Read{} // the pool holds no context, id or agent
		c.reads.Put(call)
	}
	return res.Text, res.Snapshot, res.Err
}

// readCall is one Read's request (the asCaller envelope and the job.Read it
// carries) and its reply channel, reused across Reads. The registry answers a read
// exactly once; an answer marked Free (job.ReadResult.Free) says nothing holds the
// request or the channel any more (the registry answered it itself: it was not
// routed to a job actor, whose answer is never marked). A call whose wait ended
// without its answer (an abort, a stopped registry), or answered unfreed, is never
// reused. The pool is the Client's, not the process's: a channel made in a
// synctest bubble serves only the system made in that bubble.
type readCall struct {
	as    asCaller
	read  job.Read
	reply chan job.ReadResult
}

func newReadCall(runs byCaller) *readCall {
	call := &readCall{reply: make(chan job.ReadResult, 1)}
	call.as.msg, call.as.byCaller = &call.read, runs
	return call
}

// KillOptions are a kill's options (SPEC §1.3 rule 3). The zero value claims the
// completion report and gives no reason.
type KillOptions struct {
	Reason  string
	NoClaim bool
}

// Kill asks a job's producer to stop: the producer's Cancel runs first, and if it
// fails nothing changes and its error is returned. It returns requested (the job is
// stopping) or already-finished, with a snapshot taken in the same step. The
// producer's Cancel runs on its own goroutine: one that blocks holds up only its
// job, and Kill returns at ctx's end (job/aborted). A kill whose ctx ended before
// its Cancel started changes nothing; one whose Cancel was already running lands
// when (if) that Cancel returns.
func (c *Client) Kill(ctx context.Context, id string, caller Caller, opts KillOptions) (messages.KillResult, *messages.JobSnapshot, error) {
	if ctx.Err() != nil {
		return 0, nil, job.Aborted(ctx)
	}
	call, _ := c.kills.Get().(*killCall)
	if call == nil {
		call = newKillCall(c.runs)
	}
	call.as.caller = caller
	call.kill = job.Kill{ID: id, Reason: opts.Reason, NoClaim: opts.NoClaim, Ctx: ctx, Reply: call.reply}
	if c.runsProducer(ctx) { // its Cancel may block despite its declaration: never on a caller whose ctx can end
		call.handoff.Reset()
		call.kill.Handoff = &call.handoff
	}
	c.root.Send(c.pid, &call.as)
	if run := call.handoff.Take(); run != nil {
		// The kill reached an idle job actor, which left its run here: this
		// goroutine makes it (job.Kill.Handoff), and the answer is then in reply.
		run()
	}
	res, err := await(ctx, c, call.reply)
	if err != nil {
		// The registry or the job actor may still take the kill up and answer it: the
		// call is dropped.
		return 0, nil, err
	}
	if res.Free {
		call.as.caller = Caller{}
		call.kill = job.Kill{} // the pool holds no context, id, reason or agent
		c.kills.Put(call)
	}
	return res.Result, res.Snapshot, res.Err
}

// killCall is one Kill's request (the asCaller envelope and the job.Kill it
// carries) and its reply channel, reused across Kills. A kill is answered exactly
// once; an answer marked Free (job.KillResult.Free) says nothing holds the request
// or the channel any more. A call whose wait ended without its answer (an abort, a
// stopped registry), or answered unfreed, is never reused. The pool is the
// Client's, not the process's (see readCall).
type killCall struct {
	as      asCaller
	kill    job.Kill
	reply   chan job.KillResult
	handoff mailbox.Handoff // the job actor's run left for this caller (job.Kill.Handoff)
}

func newKillCall(runs byCaller) *killCall {
	call := &killCall{reply: make(chan job.KillResult, 1)}
	call.as.msg, call.as.byCaller = &call.kill, runs
	return call
}

// Wait waits up to timeout for the job to settle (SPEC §2.8, §1.3 rules 10–11). On
// settlement it returns the settled snapshot (and claims the report); when timeout
// passes it returns the live snapshot and claims nothing; when ctx ends first it
// fails with job/wait-aborted and the job keeps running.
func (c *Client) Wait(ctx context.Context, id string, timeout time.Duration, caller Caller) (*messages.JobSnapshot, error) {
	wctx, cancel := context.WithTimeoutCause(ctx, timeout, job.ErrWaitTimeout)
	defer cancel()
	reply := make(chan job.WaitResult, 1)
	token := c.tokens.Add(1)
	c.root.Send(c.pid, &asCaller{caller: caller, msg: &job.Wait{ID: id, Timeout: timeout, Token: token, Ctx: wctx, Reply: reply}, byCaller: c.runs})
	select {
	case res := <-reply:
		return res.Snapshot, res.Err
	case <-c.stopped:
		return nil, stoppedErr()
	case <-wctx.Done():
		c.root.Send(c.pid, &asCaller{msg: &job.WaitEnd{ID: id, Token: token}, byCaller: c.runs})
	}
	// The job actor answers a WaitEnd in its next message (it never waits on a
	// producer hook), so this wait is short; ctx has ended, so it is not bounded by it.
	res, err := await(context.Background(), c, reply)
	if err != nil {
		return nil, err
	}
	return res.Snapshot, res.Err
}

// Waiters returns how many waits are pending on a job (test inspection).
func (c *Client) Waiters(ctx context.Context, id string) (int, error) {
	if ctx.Err() != nil {
		return 0, job.Aborted(ctx)
	}
	reply := make(chan int, 1)
	c.root.Send(c.pid, &asCaller{msg: &job.CountWaiters{ID: id, Reply: reply}, byCaller: c.runs})
	return await(ctx, c, reply)
}

// Dispose is service disposal (SPEC §2.11): no onJobDone from now on, every live job
// cancelled with reason "jobs service disposed", all settlements awaited, the store
// emptied. Later calls fail with job/disposed. ctx stops the waiting only.
func (c *Client) Dispose(ctx context.Context) error {
	reply := make(chan struct{}, 1)
	c.root.Send(c.pid, &disposeReq{reply: reply})
	select {
	case <-reply:
		return nil
	case <-c.stopped:
		return nil
	case <-ctx.Done():
		return job.Aborted(ctx)
	}
}

// CloseAdmission makes every Start sent after it fail with troupe/stopped
// (Shutdown's first step). It does not wait.
func (c *Client) CloseAdmission() { c.root.Send(c.pid, &closeAdmission{}) }

// ForceFailLive settles every job still live failed with detail (work may be
// orphaned; warn, a format with one %s for the job id, is logged per job), frees
// their slots, and returns their ids in registration order once each has
// committed. It is Shutdown's last resort at its deadline: ctx bounds the wait.
func (c *Client) ForceFailLive(ctx context.Context, detail, warn string) ([]string, error) {
	return c.forceFailLive(ctx, job.ForceFail{Detail: detail, Warn: warn})
}

// ForceFailLiveOnShutdown is ForceFailLive for Shutdown: a job whose producer was
// never asked to stop is also cancelled once, best effort, with reason
// job.ReasonServiceDisposed (its answer changes nothing).
func (c *Client) ForceFailLiveOnShutdown(ctx context.Context, detail, warn string) ([]string, error) {
	return c.forceFailLive(ctx, job.ForceFail{Detail: detail, Warn: warn, Reason: job.ReasonServiceDisposed})
}

func (c *Client) forceFailLive(ctx context.Context, fail job.ForceFail) ([]string, error) {
	reply := make(chan []string, 1)
	c.root.Send(c.pid, &forceAllReq{fail: fail, reply: reply})
	return await(ctx, c, reply)
}

func (c *Client) teardownOwner(ctx context.Context, key string) error {
	reply := make(chan struct{}, 1)
	c.root.Send(c.pid, &teardownReq{key: key, reply: reply})
	select {
	case <-reply:
	case <-c.stopped:
	case <-ctx.Done():
		return job.Aborted(ctx)
	}
	return nil
}

// AttachController attaches a job controller in sc (SPEC §2.10): starts are served
// for owners composed under sc (for every owner when sc is the global scope). The
// returned effect detaches it (Run; idempotent); disposing sc detaches it too.
func (c *Client) AttachController(ctx context.Context, sc *scope.Scope, name string) (*scope.Effect, error) {
	return c.register(ctx, sc, "jobs.controller("+name+")", &attachReq{kind: regController})
}

// OnJobDone registers a completion observer in sc's layer.
func (c *Client) OnJobDone(ctx context.Context, sc *scope.Scope, fn JobDoneFunc) (*scope.Effect, error) {
	return c.register(ctx, sc, "jobs.onJobDone()", &attachReq{kind: regJobDone, done: fn})
}

// OnJobsChanged registers a change observer in sc's layer.
func (c *Client) OnJobsChanged(ctx context.Context, sc *scope.Scope, fn JobsChangedFunc) (*scope.Effect, error) {
	return c.register(ctx, sc, "jobs.onJobsChanged()", &attachReq{kind: regJobsChanged, changed: fn})
}

// MountAgents mounts the agent registry (session id → registered instance) for as
// long as the returned effect and sc live. Without it, owned starts fail.
func (c *Client) MountAgents(ctx context.Context, sc *scope.Scope) (*scope.Effect, error) {
	return c.register(ctx, sc, "agents.mount()", &attachReq{kind: regAgents})
}

// register attaches req and adds its detaching effect to sc. An attach aborted by
// ctx is detached again (the detach is queued behind it), so none is left behind.
func (c *Client) register(ctx context.Context, sc *scope.Scope, label string, req *attachReq) (*scope.Effect, error) {
	if ctx.Err() != nil {
		return nil, job.Aborted(ctx)
	}
	req.token = c.tokens.Add(1)
	req.scope = sc
	reply := make(chan error, 1)
	req.reply = reply
	c.root.Send(c.pid, req)
	if err, werr := await(ctx, c, reply); werr != nil || err != nil {
		if werr != nil {
			c.root.Send(c.pid, &detachReq{token: req.token, reply: make(chan struct{}, 1)})
		}
		return nil, firstErr(werr, err)
	}
	eff, err := sc.Add(label, func(ctx context.Context) error { return c.detach(ctx, req.token) })
	if err != nil {
		_ = c.detach(context.Background(), req.token)
		return nil, err
	}
	return eff, nil
}

func (c *Client) detach(ctx context.Context, token uint64) error {
	reply := make(chan struct{}, 1)
	c.root.Send(c.pid, &detachReq{token: token, reply: reply})
	select {
	case <-reply:
	case <-c.stopped:
	case <-ctx.Done():
		return job.Aborted(ctx)
	}
	return nil
}

// RegisterAgent makes a the registered instance of its session. It fails with
// job/agent-registered while another live instance is registered for the session:
// that one must leave the registry first (be unregistered, disposed, or its owner
// actor stop), or be displaced by ReplaceAgent with its handle. Registering a again
// is a no-op. Disposing a's scope unregisters it. A registration aborted by ctx is
// undone (the unregister is queued behind it).
func (c *Client) RegisterAgent(ctx context.Context, a *owner.Agent) error {
	return c.registerAgent(ctx, a, nil)
}

// ReplaceAgent makes a the registered instance of its session in place of old, the
// instance registered now: holding old's handle is the authority to displace it.
// old stays live (a stale incarnation, SPEC §1.3 rule 26) but no longer speaks for
// the session, and its wire credential is revoked. If no instance is registered,
// it registers a; if another one than old is, it fails with job/agent-registered.
func (c *Client) ReplaceAgent(ctx context.Context, old, a *owner.Agent) error {
	if old == nil || old.PID() == nil {
		return invalidAgent()
	}
	return c.registerAgent(ctx, a, old)
}

// WireCredential returns the credential that authenticates a's session in wire
// requests (messages.GetRequest.caller_credential and friends): a secret the
// registry minted when a was registered, valid while a stays registered. It fails
// with job/owner-not-live unless a is its session's registered instance. Hand it
// only to the code that speaks for a (its own actor, a peer acting for it).
func (c *Client) WireCredential(ctx context.Context, a *owner.Agent) ([]byte, error) {
	if a == nil || a.PID() == nil {
		return nil, invalidAgent()
	}
	if ctx.Err() != nil {
		return nil, job.Aborted(ctx)
	}
	reply := make(chan credentialRes, 1)
	c.root.Send(c.pid, &credentialReq{agent: a, reply: reply})
	res, err := await(ctx, c, reply)
	if err != nil {
		return nil, err
	}
	return res.secret, res.err
}

func invalidAgent() error {
	return messages.Errorf(messages.CodeOwnerNotLive, "not an agent instance: agents are made by System.NewAgent (owner.Spawn)")
}

func (c *Client) registerAgent(ctx context.Context, a, replaces *owner.Agent) error {
	if a != nil && a.Session() == "" {
		return owner.ErrEmptySession() // "" is the no-caller identity, never an agent's
	}
	if a == nil || a.PID() == nil || a.Scope() == nil {
		return invalidAgent()
	}
	if ctx.Err() != nil {
		return job.Aborted(ctx)
	}
	reply := make(chan error, 1)
	c.root.Send(c.pid, &agentReq{agent: a, replaces: replaces, reply: reply})
	if err, werr := await(ctx, c, reply); werr != nil || err != nil {
		if werr != nil {
			c.root.Send(c.pid, &agentReq{agent: a, unregister: true, reply: make(chan error, 1)})
		}
		return firstErr(werr, err)
	}
	_, err := a.Scope().AddDisposer(&unregistration{c: c, a: a})
	if err != nil {
		c.root.Send(c.pid, &agentReq{agent: a, unregister: true, reply: make(chan error, 1)})
		return err
	}
	return nil
}

// unregistration is the effect of a's scope that unregisters a (16 B; a closure of
// both was 24).
type unregistration struct {
	c *Client
	a *owner.Agent
}

func (u *unregistration) Dispose(ctx context.Context) error { return u.c.UnregisterAgent(ctx, u.a) }

func (*unregistration) Label() string { return "agents.unregister()" }

// RegisteredAgent returns the PID of the instance registered for session, or nil
// (also when no agent registry is mounted, and when ctx ends or the system stops
// before the answer: a lookup has no error of its own).
func (c *Client) RegisteredAgent(ctx context.Context, session string) *actor.PID {
	if ctx.Err() != nil {
		return nil
	}
	reply := make(chan *actor.PID, 1)
	c.root.Send(c.pid, &lookupAgentReq{session: session, reply: reply})
	pid, _ := await(ctx, c, reply)
	return pid
}

// AgentsMounted reports whether an agent registry is mounted (false when ctx ends
// or the system stops before the answer).
func (c *Client) AgentsMounted(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	reply := make(chan bool, 1)
	c.root.Send(c.pid, &agentsMountedReq{reply: reply})
	ok, _ := await(ctx, c, reply)
	return ok
}

// UnregisterAgent removes a from the agent registry if it is the registered instance.
func (c *Client) UnregisterAgent(ctx context.Context, a *owner.Agent) error {
	if a == nil || a.PID() == nil {
		return invalidAgent()
	}
	if ctx.Err() != nil {
		return job.Aborted(ctx)
	}
	reply := make(chan error, 1)
	c.root.Send(c.pid, &agentReq{agent: a, unregister: true, reply: reply})
	if err, werr := await(ctx, c, reply); werr != nil || err != nil {
		return firstErr(werr, err)
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
