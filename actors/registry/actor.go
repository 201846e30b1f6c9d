package registry

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/internal/fault"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/scope"
	"github.com/troupe-rt/troupe/supervision"
)

// Owner names the owner of a job as observers see it: the session id and the exact
// incarnation. The zero value means an unowned job (DSH's `undefined`).
type Owner struct {
	Session string
	PID     *actor.PID
}

// JobDoneFunc observes a settled job (SPEC §2.9 step 8). It runs on the registry
// actor: it must not block or wait for a registry reply (use ListAsync).
type JobDoneFunc func(snap *messages.JobSnapshot, owner Owner)

// JobsChangedFunc observes a change in an owner's set of jobs (SPEC §2.10). It runs
// on the registry actor under the same rules as JobDoneFunc.
type JobsChangedFunc func(owner Owner)

// The registry's own request messages (local values; see client.go).
type (
	startReq struct {
		spec  job.Spec
		reply chan<- startRes
	}
	startRes struct {
		id  string
		err error
	}
	getReq struct {
		id, caller string
		reply      chan<- getRes
	}
	getRes struct {
		snap *messages.JobSnapshot
		err  error
	}
	listReq struct {
		caller string
		reply  chan<- ListResult
	}
	regKind   int
	attachReq struct {
		kind    regKind
		token   uint64
		scope   *scope.Scope
		done    JobDoneFunc
		changed JobsChangedFunc
		reply   chan<- error
	}
	detachReq struct {
		token uint64
		reply chan<- struct{}
	}
	agentReq struct {
		agent      *owner.Agent
		replaces   *owner.Agent // ReplaceAgent: the incarnation a displaces (its handle is the authority)
		unregister bool
		reply      chan<- error
	}
	credentialReq struct {
		agent *owner.Agent
		reply chan<- credentialRes
	}
	credentialRes struct {
		secret []byte
		err    error
	}
	agentsMountedReq struct{ reply chan<- bool }
	lookupAgentReq   struct {
		session string
		reply   chan<- *actor.PID
	}
	teardownReq struct {
		key   string
		reply chan<- struct{}
	}
	removeOwner   struct{ key string }
	disposeReq    struct{ reply chan<- struct{} }
	finishDispose struct{}
	jobGone       struct{ id string }
	recordReq     struct {
		id, caller string
		reply      chan<- recordRes
	}
	recordRes struct {
		rec  *job.Record
		snap *messages.JobSnapshot
		err  error
	}
	observeReq struct {
		id, caller string
		reply      chan<- getRes
	}
	// closeAdmission refuses every later Start (Shutdown's first step).
	closeAdmission struct{}
	// forceAllReq force-fails every live job and answers, once each has committed,
	// with their ids in registration order.
	forceAllReq struct {
		fail  job.ForceFail
		reply chan<- []string
	}
)

type forcing struct {
	pending map[string]bool
	ids     []string
	reply   chan<- []string
}

const (
	regController regKind = iota
	regJobDone
	regJobsChanged
	regAgents
)

// ListResult answers List and ListAsync.
type ListResult struct {
	Jobs []*messages.JobSnapshot
	Err  error
}

type registration struct {
	kind    regKind
	scope   scope.ID
	done    JobDoneFunc
	changed JobsChangedFunc
}

// Config configures the registry actor.
type Config struct {
	MaxConcurrentJobsPerOwner int
	RootScope                 *scope.Scope // the global layer
	Logger                    *slog.Logger
	Now                       func() int64 // Unix milliseconds
	Dispatcher                actor.Dispatcher
	Watcher                   *job.Watcher
	// Inspector receives the lifecycle events of the registry and its jobs (see
	// lifecycle.go); nil sends none.
	Inspector *actor.PID
	// SettleTimeout, when positive, force-fails a job that stays stopping longer than
	// this after a kill or teardown cancel landed (job.TextSettleTimeout). Zero: never.
	SettleTimeout time.Duration
	// AfterFunc arms the SettleTimeout timers (nil: time.AfterFunc); tests inject one.
	AfterFunc func(d time.Duration, f func()) (stop func() bool)
}

// registryActor owns admission, ids, routing and listing, the observer layers and
// the agent registry. Everything here is touched only inside Receive.
type registryActor struct {
	cfg     Config
	spawner *job.Spawner
	shared  *job.Shared // what every job actor of this registry shares
	client  *Client
	adm     *Admission
	idx     *Index
	owners  map[string]*ownerEntry

	regs        map[uint64]*registration
	controllers map[scope.ID]int
	layers      map[scope.ID][]*registration // observers per scope layer, registration order

	agentMounts int
	agents      map[string]*actor.PID // session → registered instance
	agentOf     map[string]string     // registered instance's PID Id → its session (agents reversed)
	secrets     map[string][]byte     // session → the wire credential of its registered instance (auth.go)

	observers map[string][]chan<- getRes // AwaitSettled callers per live job id

	closed    bool // listeners closed: no onJobDone from now on
	disposing *disposal
	disposed  bool
	refusing  bool       // Shutdown has begun: Start is refused
	forcings  []*forcing // forceAll requests awaiting their jobs' commits

	life lifecycle // what the supervision tree is told (lifecycle.go)
}

type disposal struct {
	pending map[string]bool
	replies []chan<- struct{}
}

func newRegistryActor(cfg Config, client *Client) *registryActor {
	return &registryActor{
		cfg:         cfg,
		spawner:     job.NewSpawner(cfg.Dispatcher),
		client:      client,
		adm:         NewAdmission(cfg.MaxConcurrentJobsPerOwner),
		idx:         NewIndex(),
		owners:      map[string]*ownerEntry{},
		regs:        map[uint64]*registration{},
		controllers: map[scope.ID]int{},
		layers:      map[scope.ID][]*registration{},
		agents:      map[string]*actor.PID{},
		agentOf:     map[string]string{},
		secrets:     map[string][]byte{},
		observers:   map[string][]chan<- getRes{},
		life:        lifecycle{jobs: supervision.JobStrategy()},
	}
}

func errDisposed() error {
	return &messages.Error{Code: messages.CodeDisposed, Message: "jobs service disposed"}
}

func (r *registryActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *startReq:
		r.startReq(c, m)
	case *getReq:
		rec, err := r.access(m.id, m.caller)
		if err != nil {
			m.reply <- getRes{err: err}
			return
		}
		m.reply <- getRes{snap: rec.snapshot()}
	case *listReq:
		if r.disposed {
			m.reply <- ListResult{Err: errDisposed()}
			return
		}
		recs := r.idx.list(m.caller)
		out := make([]*messages.JobSnapshot, len(recs))
		for i, rec := range recs {
			out[i] = rec.snapshot()
		}
		m.reply <- ListResult{Jobs: out}
	case *observeReq:
		rec, err := r.access(m.id, m.caller)
		switch {
		case err != nil:
			m.reply <- getRes{err: err}
		case rec.live():
			r.observers[m.id] = append(r.observers[m.id], m.reply)
		default:
			m.reply <- getRes{snap: rec.snapshot()}
		}
	case *recordReq:
		rec, err := r.access(m.id, m.caller)
		if err != nil {
			m.reply <- recordRes{err: err}
			return
		}
		m.reply <- recordRes{rec: rec.out, snap: rec.snapshot()}
	case *job.Read:
		r.read(c, m)
	case *job.Kill:
		r.kill(c, m)
	case *job.Wait:
		r.wait(c, m)
	case *job.WaitEnd:
		if rec := r.idx.get(m.ID); rec != nil && rec.live() {
			c.Send(rec.pid, m)
		}
	case *job.CountWaiters:
		if rec := r.idx.get(m.ID); rec != nil && rec.live() {
			c.Send(rec.pid, m)
			return
		}
		m.Reply <- 0
	case *job.StopRequested:
		r.stopRequested(m)
	case *job.Settled:
		r.settled(c, m)
	case *attachReq:
		m.reply <- r.attach(m)
	case *detachReq:
		r.detach(m.token)
		m.reply <- struct{}{}
	case *agentReq:
		m.reply <- r.agent(c, m)
	case *credentialReq:
		m.reply <- r.credential(m.agent)
	case *lookupAgentReq:
		m.reply <- r.agents[m.session]
	case *agentsMountedReq:
		m.reply <- r.agentMounts > 0
	case *footprintReq:
		m.reply <- r.footprint()
	case *teardownReq:
		r.teardownOwner(c, m.key, m.reply)
	case *owner.Stopped:
		r.unregisterAgent(r.sessionOf(m.PID), m.PID)
		r.teardownOwner(c, m.PID.Id, nil)
	case *removeOwner:
		r.removeOwner(m.key)
	case *disposeReq:
		r.dispose(c, m.reply)
	case *closeAdmission:
		r.refusing = true
	case *forceAllReq:
		r.forceAll(c, m)
	case *finishDispose:
		r.finishDispose()
	case *actor.Terminated:
		// A job actor stopped. Normally it handed its job over first; if not, its
		// Settled (sent from its Stopping handler) is already queued ahead of this
		// self-sent check, which then finds the record settled.
		id := strings.TrimPrefix(m.Who.Id, c.Self().Id+"/")
		if rec := r.idx.get(id); rec != nil && rec.live() && !r.life.stopping {
			c.Send(c.Self(), &jobGone{id: id}) // which reports the stop after the settlement
			return
		} else if rec != nil {
			r.plantedReleaseOnTerminated(rec)
		}
		r.jobStopped(c, id)
	case *actor.Started, *actor.Stopping, *actor.Stopped:
		r.ownLifecycle(c)
	default:
		if !r.plantedReceive(m) {
			r.receiveProto(c)
		}
	case *jobGone:
		if rec := r.idx.get(m.id); rec != nil && rec.live() {
			r.stopLanded(m.id, supervision.CauseNone)
			r.commitSettlement(c, rec, job.Decision{Status: job.Failed, HasDetail: true,
				Detail: "Error: job actor stopped before the job settled", Reported: rec.reported}, r.cfg.Now(), nil, nil)
		}
		r.jobStopped(c, m.id)
	}
}

// sessionOf returns the session of an owner PID: from its owner entry (it owns
// jobs) or from the agent registry's reverse index; "" if it is neither.
func (r *registryActor) sessionOf(pid *actor.PID) string {
	if o := r.owners[pid.Id]; o != nil {
		return o.session
	}
	if s, ok := r.agentOf[pid.Id]; ok {
		if p := r.agents[s]; p != nil && p.Equal(pid) {
			return s
		}
	}
	return ""
}

// registerAgent makes pid the registered instance of session s, replacing (and
// unindexing) any previous one — the caller has checked the registration rule
// (agent). A new instance gets a fresh wire credential; the old one's is revoked.
func (r *registryActor) registerAgent(s string, pid *actor.PID) {
	old := r.agents[s]
	if old != nil && old.Equal(pid) {
		return // registered already: the credential stays
	}
	if old != nil {
		delete(r.agentOf, old.Id)
	}
	r.agents[s] = pid
	r.agentOf[pid.Id] = s
	r.secrets[s] = mintSecret()
}

// unregisterAgent removes pid from the agent registry if it is the instance
// registered for s (a same-session replacement stays).
func (r *registryActor) unregisterAgent(s string, pid *actor.PID) {
	if p := r.agents[s]; p != nil && p.Equal(pid) {
		delete(r.agents, s)
		delete(r.agentOf, pid.Id)
		delete(r.secrets, s)
	}
}

// serves is the controller gate (SPEC §2.10): a global controller serves everyone;
// otherwise a controller somewhere on the owner's scope chain. Unowned jobs have
// no chain, so only a global controller serves them.
func (r *registryActor) serves(chain []scope.ID) bool {
	if r.controllers[r.cfg.RootScope.ID()] > 0 {
		return true
	}
	for _, id := range chain {
		if r.controllers[id] > 0 {
			return true
		}
	}
	return false
}

const maxSafeInteger = 1<<53 - 1

// start runs SPEC §2.2's preflight in order, then Run, then the registration commit.
// startReq answers a start request, also when the registry fails on it: the panic
// goes on to the guardian (which resumes the registry) after the caller is told.
func (r *registryActor) startReq(c actor.Context, m *startReq) {
	answered := false
	defer func() {
		if !answered {
			m.reply <- startRes{err: messages.Errorf(messages.CodeRegistryFailed,
				"the job registry failed while starting the job; nothing was started (the registry goes on)")}
		}
	}()
	id, err := r.start(c, m.spec)
	m.reply <- startRes{id: id, err: err}
	answered = true
}

func (r *registryActor) start(c actor.Context, spec job.Spec) (string, error) {
	if r.refusing {
		return "", &messages.Error{Code: messages.CodeStopped, Message: TextShuttingDown}
	}
	if r.disposing != nil || r.disposed {
		return "", errDisposed()
	}
	var chain []scope.ID
	if spec.Owner != nil {
		chain = spec.Owner.Scope().Chain()
	}
	if !r.serves(chain) {
		return "", &messages.Error{Code: messages.CodeNoController, Message: TextNoController}
	}
	if spec.Kind == "" {
		return "", messages.Errorf(messages.CodeInvalidSpec, "invalid job kind: expected a non-empty string")
	}
	if !job.ValidKind(spec.Kind) {
		// Step 2 goes on: a kind is also the id prefix and the job actor's name, so
		// one with '/', spaces or a newline would break ids, actor paths and job_list rows.
		return "", messages.Errorf(messages.CodeInvalidSpec, "invalid job kind: expected a short identifier matching %s, got %s",
			job.KindPattern, job.QuoteBounded(spec.Kind, 2*job.MaxKindBytes))
	}
	if spec.Label == "" {
		return "", messages.Errorf(messages.CodeInvalidSpec, "invalid job label: expected a non-empty string")
	}
	spec.Label = job.CleanLabel(spec.Label) // one line, valid UTF-8, cut at MaxLabelBytes
	if l := spec.OutputLimitBytes; l != nil && (*l < 1 || *l > maxSafeInteger) {
		return "", messages.Errorf(messages.CodeInvalidSpec, "invalid outputLimitBytes: expected a positive safe integer, got %d", *l)
	}
	if spec.Run == nil {
		return "", messages.Errorf(messages.CodeInvalidSpec, "invalid job run: expected a function")
	}
	var oe *ownerEntry
	if a := spec.Owner; a != nil {
		if r.agentMounts == 0 {
			return "", &messages.Error{Code: messages.CodeNoAgentRegistry, Message: TextNoAgentRegistry}
		}
		notLive := messages.Errorf(messages.CodeOwnerNotLive,
			"agent %q is not the registered agent instance (background job owner must be live)", a.Session())
		if p := r.agents[a.Session()]; p == nil || !p.Equal(a.PID()) {
			return "", notLive
		}
		oe = r.owners[a.PID().Id]
		if oe != nil && oe.tornDown {
			return "", notLive
		}
		if oe == nil {
			// The entry exists only with its cleanup effect in the owner's scope: a
			// scope whose disposal has begun refuses it, and nothing is kept.
			key := a.PID().Id
			eff, err := a.Scope().Add(OwnerCleanupLabel, func(ctx context.Context) error {
				return r.client.teardownOwner(ctx, key)
			})
			if err != nil {
				return "", notLive
			}
			oe = &ownerEntry{key: key, pid: a.PID(), session: a.Session(), chain: chain, cleanup: eff}
			r.owners[key] = oe
		}
	}
	key := ""
	if oe != nil {
		key = oe.key
	}
	if r.adm.Full(key) {
		return "", messages.Errorf(messages.CodeCapacity,
			"background job limit reached for this owner (limit: %d); use job_kill to stop an unneeded job, wait for it to finish, then retry", r.adm.Limit())
	}
	var hooks job.Hooks
	if err := job.Protect(func() (e error) { hooks, e = spec.Run(); return }); err != nil {
		return "", &messages.Error{Code: messages.CodeRunFailed, Message: job.ErrorText(err), Cause: err}
	}
	if hooks.Done == nil || hooks.Cancel == nil {
		if hooks.Cancel != nil {
			_ = job.Protect(func() error { return hooks.Cancel("invalid job hooks") })
		}
		missing := "Done"
		if hooks.Cancel == nil {
			missing = "Cancel"
		}
		return "", messages.Errorf(messages.CodeInvalidSpec, "invalid job hooks: %s is nil (a producer must return Cancel and Done)", missing)
	}
	id := r.adm.NextID(spec.Kind)
	r.adm.Take(key)
	// From here to the commit a panic (a bug; PointStartCrash in tests) must leave
	// nothing half-registered: the slot is freed, the producer cancelled and its
	// actor stopped; the id stays used (ids are never reused). The registry's
	// guardian resumes it, and Receive answers the caller.
	var pid *actor.PID
	committed := false
	defer func() {
		if committed {
			return
		}
		r.adm.Release(key)
		if pid != nil {
			c.Stop(pid)
		}
		_ = job.Protect(func() error { return hooks.Cancel(ReasonRegistryFailed) })
	}()
	if fault.Point(PointStartCrash) {
		panic("jobs: planted crash in the middle of admission (" + PointStartCrash + ")")
	}
	rec := &record{
		Meta: job.Meta{
			ID: id, Kind: spec.Kind, Label: spec.Label, OutputLimitBytes: spec.OutputLimitBytes,
			StartedAt: r.cfg.Now(),
		},
		owner:  oe,
		status: job.Running,
		slot:   true,
		stream: hooks.ReadOutput != nil,
		out:    spec.Record,
	}
	if oe != nil {
		rec.OwnerSession = &oe.session // shared: an owner's session never changes
	}
	if rec.out != nil {
		rec.out.Bind(id, r.cfg.Logger)
	}
	if r.shared == nil {
		r.shared = &job.Shared{Registry: c.Self(), Watcher: r.cfg.Watcher, Logger: r.cfg.Logger, Now: r.cfg.Now,
			SettleTimeout: r.cfg.SettleTimeout, AfterFunc: r.cfg.AfterFunc}
	}
	pid, err := r.spawner.Spawn(c, &job.Config{Meta: &rec.Meta, Hooks: hooks, Shared: r.shared}, id)
	if err != nil {
		// Ids are never reused by one registry, so the name is free; this is a bug.
		panic(fmt.Sprintf("jobs: spawning job actor %s: %v", id, err))
	}
	rec.pid = pid
	r.idx.add(rec)
	committed = true
	r.jobSpawned(c, rec)
	r.fireChanged(oe)
	return id, nil
}

// access is the unknown-id check, then the session fence (SPEC §2.5).
func (r *registryActor) access(id, caller string) (*record, error) {
	if r.disposed {
		return nil, errDisposed()
	}
	rec := r.idx.get(id)
	if rec == nil {
		// The id is the caller's (the model's job_id): echoed bounded and valid.
		id = job.CleanID(id)
		return nil, &messages.Error{Code: messages.CodeNotFound, Message: "unknown job " + id,
			Details: map[string]string{"jobId": id, "sessionId": caller}}
	}
	if rec.owner != nil && rec.owner.session != caller {
		return nil, &messages.Error{Code: messages.CodeForeign, Message: "job " + id + " belongs to another session",
			Details: map[string]string{"jobId": id, "sessionId": caller}}
	}
	return rec, nil
}

func (r *registryActor) read(c actor.Context, m *job.Read) {
	rec, err := r.access(m.ID, m.Caller)
	if err != nil {
		m.Reply <- job.ReadResult{Err: err}
		return
	}
	if rec.live() {
		c.Send(rec.pid, m)
		return
	}
	text := rec.output
	if rec.stream {
		if err := job.Protect(func() (e error) { text, e = rec.readOutput(); return }); err != nil {
			m.Reply <- job.ReadResult{Err: &messages.Error{Code: messages.CodeReadFailed, Message: job.ErrorText(err), Cause: err}}
			return
		}
		text = job.ValidText(text)
	}
	rec.reported = true
	m.Reply <- job.ReadResult{Text: text, Snapshot: rec.snapshot()}
}

func (r *registryActor) kill(c actor.Context, m *job.Kill) {
	rec, err := r.access(m.ID, m.Caller)
	if err != nil {
		m.Reply <- job.KillResult{Err: err}
		return
	}
	if rec.live() {
		// Cleaned once, here: the producer's Cancel and the recorded reason get the
		// same valid, bounded text (job.MaxReasonBytes).
		m.Reason = job.CleanReason(m.Reason)
		c.Send(rec.pid, m)
		return
	}
	if !m.NoClaim {
		rec.reported = true
	}
	m.Reply <- job.KillResult{Result: messages.KillResult_KILL_RESULT_ALREADY_FINISHED, Snapshot: rec.snapshot()}
}

func (r *registryActor) wait(c actor.Context, m *job.Wait) {
	rec, err := r.access(m.ID, m.Caller)
	if err != nil {
		m.Reply <- job.WaitResult{Err: err}
		return
	}
	if m.Timeout <= 0 {
		m.Reply <- job.WaitResult{Err: messages.Errorf(messages.CodeInvalidWaitTimeout,
			"invalid wait timeout: expected a positive number of milliseconds, got %s", jsonMillis(m.Timeout))}
		return
	}
	if rec.live() {
		c.Send(rec.pid, m)
		return
	}
	rec.reported = true
	m.Reply <- job.WaitResult{Snapshot: rec.snapshot()}
}

// jsonMillis renders a duration in milliseconds as JSON.stringify renders the number.
func jsonMillis(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', -1, 64)
}

func (r *registryActor) stopRequested(m *job.StopRequested) {
	rec := r.idx.get(m.ID)
	if rec == nil {
		return
	}
	if rec.live() {
		rec.status = job.Stopping
		rec.reported = m.Reported
		r.stopLanded(rec.ID, stopCause(m))
	}
	// SPEC §2.7: set stopping, fire onJobsChanged, then return requested — the
	// change is announced before the killer learns of it (as start's is). The
	// snapshot is the one this message committed (§1.3 rule 6).
	snap := rec.snapshot()
	r.fireChanged(rec.owner)
	if m.Kill != nil {
		m.Kill.Reply <- job.KillResult{Result: messages.KillResult_KILL_RESULT_REQUESTED, Snapshot: snap}
	}
}

func (r *registryActor) settled(c actor.Context, m *job.Settled) {
	rec := r.idx.get(m.ID)
	if rec == nil || !rec.live() {
		// Only after jobGone force-failed the record: answer the waiters anyway.
		for _, w := range m.Waiters {
			if rec != nil {
				w <- job.WaitResult{Snapshot: rec.snapshot()}
			} else {
				w <- job.WaitResult{Err: errDisposed()}
			}
		}
		return
	}
	r.commitSettlement(c, rec, m.Decision, m.FinishedAt, m.Waiters, m.ReadOutput)
}

// commitSettlement is SPEC §2.9 from the registry's side, in its fixed order: record
// (with the claim decided by the job's core), snapshot, release waiters, free the
// slot, changed, then — unless listeners are closed — done, announced last.
func (r *registryActor) commitSettlement(c actor.Context, rec *record, d job.Decision, finishedAt int64,
	waiters []chan<- job.WaitResult, readOutput func() (string, error)) {
	fault.Yield(PointSettleCommit)
	pid := rec.pid
	rec.pid = nil
	rec.status = d.Status
	rec.hasDetail, rec.detail = d.HasDetail, d.Detail
	rec.finishedAt = finishedAt
	rec.reported = d.Reported
	rec.output = d.Output
	rec.readOutput = readOutput
	if rec.out != nil {
		rec.out.Seal() // appends made before the outcome are in; later ones are dropped
	}
	r.jobSettled(c, rec)
	if rec.slot {
		rec.slot = false
		r.adm.Release(rec.ownerKey())
	}
	for _, w := range waiters {
		w <- job.WaitResult{Snapshot: rec.snapshot()}
	}
	c.Poison(pid)
	r.fireChanged(rec.owner)
	if !r.plantedAlreadyAnnounced(rec.ID) && !r.closed {
		r.fireDone(rec)
	}
	for _, o := range r.observers[rec.ID] {
		o <- getRes{snap: rec.snapshot()}
	}
	delete(r.observers, rec.ID)
	if o := rec.owner; o != nil && o.teardown != nil && o.teardown.pending[rec.ID] {
		delete(o.teardown.pending, rec.ID)
		if len(o.teardown.pending) == 0 {
			// Removal commits after the queries this settlement's observers sent.
			c.Send(c.Self(), &removeOwner{key: o.key})
		}
	}
	if d := r.disposing; d != nil && d.pending[rec.ID] {
		delete(d.pending, rec.ID)
		if len(d.pending) == 0 {
			c.Send(c.Self(), &finishDispose{})
		}
	}
	r.forced(rec.ID)
}

// forceAll sends every live job a ForceFail (Shutdown's deadline) and answers once
// all of them have committed their settlement, with their ids.
func (r *registryActor) forceAll(c actor.Context, m *forceAllReq) {
	f := &forcing{pending: map[string]bool{}, reply: m.reply}
	for _, rec := range r.idx.all() {
		if rec.live() {
			f.pending[rec.ID] = true
			f.ids = append(f.ids, rec.ID)
			fail := m.fail
			fail.Warn = fmt.Sprintf(m.fail.Warn, rec.ID)
			c.Send(rec.pid, &fail)
		}
	}
	if len(f.pending) == 0 {
		m.reply <- f.ids
		return
	}
	r.forcings = append(r.forcings, f)
}

// forced records id's commit for the pending forceAll requests.
func (r *registryActor) forced(id string) {
	if len(r.forcings) == 0 {
		return
	}
	kept := r.forcings[:0]
	for _, f := range r.forcings {
		delete(f.pending, id)
		if len(f.pending) == 0 {
			f.reply <- f.ids
			continue
		}
		kept = append(kept, f)
	}
	clear(r.forcings[len(kept):])
	r.forcings = kept
}

func ownerOf(o *ownerEntry) Owner {
	if o == nil {
		return Owner{}
	}
	return Owner{Session: o.session, PID: o.pid}
}

// layersFor returns the observer layers for an owner: the global layer, then the
// owner's scope chain from the farthest ancestor down (SPEC §1.3 rule 12).
func (r *registryActor) layersFor(o *ownerEntry) []scope.ID {
	root := r.cfg.RootScope.ID()
	if o == nil {
		return []scope.ID{root}
	}
	if len(o.chain) > 0 && o.chain[0] == root {
		return o.chain
	}
	return append([]scope.ID{root}, o.chain...)
}

func (r *registryActor) fireChanged(o *ownerEntry) {
	who := ownerOf(o)
	for _, layer := range r.layersFor(o) {
		for _, reg := range r.layers[layer] {
			if reg.kind != regJobsChanged {
				continue
			}
			if err := job.Protect(func() error { reg.changed(who); return nil }); err != nil {
				r.cfg.Logger.Warn("jobs: onJobsChanged listener threw: " + err.Error())
			}
		}
	}
}

func (r *registryActor) fireDone(rec *record) {
	who := ownerOf(rec.owner)
	for _, layer := range r.layersFor(rec.owner) {
		for _, reg := range r.layers[layer] {
			if reg.kind != regJobDone {
				continue
			}
			snap := rec.snapshot()
			if err := job.Protect(func() error { reg.done(snap, who); return nil }); err != nil {
				r.cfg.Logger.Warn(fmt.Sprintf("jobs: onJobDone listener threw for %s: %s", rec.ID, err.Error()))
			}
		}
	}
}

func (r *registryActor) attach(m *attachReq) error {
	reg := &registration{kind: m.kind, scope: m.scope.ID(), done: m.done, changed: m.changed}
	r.regs[m.token] = reg
	switch m.kind {
	case regController:
		r.controllers[reg.scope]++
	case regAgents:
		r.agentMounts++
	default:
		r.layers[reg.scope] = append(r.layers[reg.scope], reg)
	}
	return nil
}

func (r *registryActor) detach(token uint64) {
	reg := r.regs[token]
	if reg == nil {
		return
	}
	delete(r.regs, token)
	switch reg.kind {
	case regController:
		if r.controllers[reg.scope]--; r.controllers[reg.scope] <= 0 {
			delete(r.controllers, reg.scope)
		}
	case regAgents:
		if r.agentMounts--; r.agentMounts == 0 {
			clear(r.agents)
			clear(r.agentOf)
			clear(r.secrets)
		}
	default:
		l := r.layers[reg.scope]
		for i, x := range l {
			if x == reg {
				l = append(l[:i:i], l[i+1:]...)
				break
			}
		}
		if len(l) == 0 {
			delete(r.layers, reg.scope)
		} else {
			r.layers[reg.scope] = l
		}
	}
}

// agent registers or unregisters an instance under the registration rule: a
// session's live registered instance is displaced only by a replace that holds its
// handle (ReplaceAgent); otherwise it must be unregistered (disposed) first.
func (r *registryActor) agent(c actor.Context, m *agentReq) error {
	s := m.agent.Session()
	if s == "" {
		return owner.ErrEmptySession() // "" is the no-caller identity, never an agent's
	}
	if m.unregister {
		r.unregisterAgent(s, m.agent.PID())
		return nil
	}
	if r.agentMounts == 0 {
		return &messages.Error{Code: messages.CodeNoAgentRegistry, Message: TextNoAgentRegistry}
	}
	if o := r.owners[m.agent.PID().Id]; (o != nil && o.tornDown) || m.agent.Scope().Disposed() || !r.alive(c, m.agent.PID()) {
		return messages.Errorf(messages.CodeOwnerNotLive, "agent %q has been torn down and cannot be registered again", s)
	}
	if err := r.mayRegister(s, m.agent.PID(), m.replaces); err != nil {
		return err
	}
	r.registerAgent(s, m.agent.PID())
	return nil
}

// alive reports whether pid's actor still runs on this node. An owner actor sends
// its Stopped once it is out of protoactor's process registry, so after that
// Stopped is processed, its incarnation reads dead here: the registry keeps no
// tombstone of its own.
func (r *registryActor) alive(c actor.Context, pid *actor.PID) bool {
	_, ok := c.ActorSystem().ProcessRegistry.GetLocal(pid.Id)
	return ok
}

// teardownOwner runs owner disposal (SPEC §2.11) for one exact incarnation: claim and
// cancel each of its live jobs with reason "owner disposed", await their
// settlements, then remove all its records and fire one change.
func (r *registryActor) teardownOwner(c actor.Context, key string, reply chan<- struct{}) {
	o := r.owners[key]
	if o == nil {
		// It never started a job, or its teardown is over and its entry removed:
		// nothing to tear down, and nothing is kept for it. Later starts of that
		// incarnation are refused all the same (see start and agent).
		if reply != nil {
			reply <- struct{}{}
		}
		return
	}
	if o.teardown != nil {
		if reply != nil {
			o.teardown.replies = append(o.teardown.replies, reply)
		}
		return
	}
	o.tornDown = true
	t := &teardown{pending: map[string]bool{}}
	if reply != nil {
		t.replies = append(t.replies, reply)
	}
	o.teardown = t
	for _, rec := range o.records {
		if rec.live() {
			t.pending[rec.ID] = true
			c.Send(rec.pid, &job.Teardown{Reason: job.ReasonOwnerDisposed})
		}
	}
	if len(t.pending) == 0 {
		c.Send(c.Self(), &removeOwner{key: key})
	}
}

func (r *registryActor) removeOwner(key string) {
	o := r.owners[key]
	if o == nil || o.teardown == nil {
		return
	}
	t := o.teardown
	o.teardown = nil
	if r.idx.removeOwner(o) > 0 {
		r.fireChanged(o)
	}
	// The incarnation is gone from every table: its records, its bucket (freed
	// with its last slot) and now its entry. Its cleanup effect leaves its scope
	// (a teardown that its actor's stop began does not wait for the scope).
	delete(r.owners, key)
	if o.cleanup != nil {
		o.cleanup.Detach()
		o.cleanup = nil
	}
	for _, reply := range t.replies {
		reply <- struct{}{}
	}
}

// dispose is service disposal (SPEC §2.11): close listeners, cancel-for-teardown
// every live job, and finish once all have settled.
func (r *registryActor) dispose(c actor.Context, reply chan<- struct{}) {
	if r.disposed {
		reply <- struct{}{}
		return
	}
	if r.disposing != nil {
		r.disposing.replies = append(r.disposing.replies, reply)
		return
	}
	r.closed = true
	d := &disposal{pending: map[string]bool{}, replies: []chan<- struct{}{reply}}
	r.disposing = d
	for _, rec := range r.idx.all() {
		if rec.live() {
			d.pending[rec.ID] = true
			c.Send(rec.pid, &job.Teardown{Reason: job.ReasonServiceDisposed})
		}
	}
	if len(d.pending) == 0 {
		c.Send(c.Self(), &finishDispose{})
	}
}

func (r *registryActor) finishDispose() {
	d := r.disposing
	if d == nil {
		return
	}
	var owners []*ownerEntry
	seen := map[*ownerEntry]bool{}
	for _, rec := range r.idx.all() {
		if !seen[rec.owner] {
			seen[rec.owner] = true
			owners = append(owners, rec.owner)
		}
	}
	r.idx.clear()
	for _, o := range owners {
		r.fireChanged(o)
	}
	for _, o := range r.owners {
		if o.cleanup != nil {
			o.cleanup.Detach()
			o.cleanup = nil
		}
		if t := o.teardown; t != nil {
			o.teardown = nil
			for _, reply := range t.replies {
				reply <- struct{}{}
			}
		}
	}
	clear(r.owners) // every record is gone; Stopped and cleanups from now on find none
	r.disposing = nil
	r.disposed = true
	for _, reply := range d.replies {
		reply <- struct{}{}
	}
}

// PointSettleCommit is the fault point at the start of every settlement commit: an
// installed fault.Injector counts one hit per commit.
const PointSettleCommit = "registry.settle.commit"

// PointStartCrash is the fault point where the registry panics in the middle of an
// admission: after the id and the slot are taken and the producer runs, before the
// job is registered (TESTING.md's "registry restart mid-admission").
const PointStartCrash = "registry.start.crash"

// ReasonRegistryFailed is the cancel reason of a producer whose start the registry
// failed to complete.
const ReasonRegistryFailed = "job registry failed"

// Texts whose verbatim prefix SPEC pins (§1.3 rule 23); the hint names troupe's API.
const (
	TextNoController    = "background jobs unavailable: no job controller serves this agent (attach a controller in the agent's scope: mount troupe's job tools there, or call Jobs.AttachController)"
	TextNoAgentRegistry = "background job ownership requires the agent registry (mount it with Jobs.MountAgents)"
	// TextShuttingDown refuses a Start made after Shutdown began.
	TextShuttingDown = "troupe system is shutting down: no new jobs are admitted"
	// OwnerCleanupLabel is the label of the owner-disposal effect in an owner's scope.
	OwnerCleanupLabel = "jobs.ownerCleanup()"
)
