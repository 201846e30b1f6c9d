package registry

import (
	"log/slog"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/internal/mailbox"
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

// byCaller is embedded in the Client's request messages: true (the Client's
// Config.CallerRuns) makes the request an internal/mailbox Inline message, run by
// the caller's goroutine when the registry is idle.
type byCaller bool

// HandledBySender reports whether the request's caller may run it (mailbox.Inline).
func (b byCaller) HandledBySender() bool { return bool(b) }

// The registry's own request messages (local values; see client.go).
type (
	startReq struct {
		spec  job.Spec
		reply chan<- startRes
		// handoff, set by a Client's start whose caller runs it (Client.runsProducer),
		// is where the new job actor's first run is left for that caller
		// (job.Spawner.Spawn).
		handoff *mailbox.Handoff
		byCaller
	}
	startRes struct {
		id  string
		err error
		// free: the registry keeps no reference to the request (the answer of a
		// start that returned; one that panicked hands the request on to its
		// supervisor with the failure). The client reuses only a freed request.
		free bool
	}
	getReq struct {
		id     string
		caller Caller
		reply  chan<- getRes
		byCaller
	}
	getRes struct {
		snap *messages.JobSnapshot
		err  error
	}
	listReq struct {
		caller Caller
		reply  chan<- ListResult
		byCaller
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
		id     string
		caller Caller
		reply  chan<- recordRes
		byCaller
	}
	recordRes struct {
		rec  *job.Record
		snap *messages.JobSnapshot
		err  error
	}
	observeReq struct {
		id     string
		caller Caller
		reply  chan<- getRes
		byCaller
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

// ListResult answers List and ListAsync.
type ListResult struct {
	Jobs []*messages.JobSnapshot
	Err  error
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
	// Retention bounds the settled history (retention.go); the zero value keeps
	// every settled record until its owner's teardown (SPEC's semantics).
	Retention Retention
	// CallerRuns lets the Client's requests (kill, wait, get, list, record,
	// AwaitSettled; a start or a read when its ctx can never end, see
	// Client.runsProducer) run on their caller's goroutine when the registry is
	// idle (internal/mailbox Inline: the caller handles its own request, and only
	// it, and finds the reply in its channel — no worker woken, no wake of the
	// caller). The registry's handlers never block, so the caller waits no longer
	// than for the reply. troupe sets it when the registry runs on a
	// PoolDispatcher; off, every request is run by Dispatcher, as a seeded schedule
	// (harness.Dispatcher) needs: it decides where and when every run happens.
	CallerRuns bool
}

// registryActor owns admission, ids, routing and listing, the observer layers and
// the agent registry. Everything here is touched only inside Receive.
type registryActor struct {
	cfg     Config
	spawner *job.Spawner
	shared  *job.Shared  // what every job actor of this registry shares
	runners *job.Runners // its job actors' Cancel calls (job.Shared.Runners)
	client  *Client
	adm     *Admission
	idx     *Index
	owners  map[string]*ownerEntry

	regs        map[uint64]*registration
	controllers map[scope.ID]int
	layers      map[scope.ID][]*registration // observers per scope layer, registration order

	agentMounts int
	agents      map[string]agentRec // session → registered instance and its registration number (agents.go)
	creds       credentials         // the wire credentials, derived from the registration numbers (auth.go)

	observers map[string][]chan<- getRes // AwaitSettled callers per live job id

	closed    bool // listeners closed: no onJobDone from now on
	disposing *disposal
	disposed  bool
	refusing  bool       // Shutdown has begun: Start is refused
	forcings  []*forcing // forceAll requests awaiting their jobs' commits

	life lifecycle // what the supervision tree is told (lifecycle.go)
}

func newRegistryActor(cfg Config, client *Client) *registryActor {
	idx := NewIndex()
	idx.ret = cfg.Retention
	return &registryActor{
		cfg:         cfg,
		spawner:     job.NewSpawner(cfg.Dispatcher),
		runners:     job.NewRunners(),
		client:      client,
		adm:         NewAdmission(cfg.MaxConcurrentJobsPerOwner),
		idx:         idx,
		owners:      map[string]*ownerEntry{},
		regs:        map[uint64]*registration{},
		controllers: map[scope.ID]int{},
		layers:      map[scope.ID][]*registration{},
		agents:      map[string]agentRec{},
		creds:       newCredentials(),
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
		rec, err := r.accessAs(m.id, m.caller)
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
		r.sweep()
		recs, err := r.listAs(m.caller)
		if err != nil {
			m.reply <- ListResult{Err: err}
			return
		}
		out := make([]*messages.JobSnapshot, len(recs))
		for i, rec := range recs {
			out[i] = rec.snapshot()
		}
		m.reply <- ListResult{Jobs: out}
	case *observeReq:
		rec, err := r.accessAs(m.id, m.caller)
		switch {
		case err != nil:
			m.reply <- getRes{err: err}
		case rec.live():
			r.observers[m.id] = append(r.observers[m.id], m.reply)
		default:
			m.reply <- getRes{snap: rec.snapshot()}
		}
	case *recordReq:
		rec, err := r.accessAs(m.id, m.caller)
		if err != nil {
			m.reply <- recordRes{err: err}
			return
		}
		m.reply <- recordRes{rec: rec.out, snap: rec.snapshot()}
	case *asCaller:
		r.serveAs(c, m)
	case job.Routable:
		r.forwarded(c, m)
	case *job.StopRequested:
		r.stopRequested(c, m)
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
		m.reply <- r.agentPID(m.session)
	case *agentsMountedReq:
		m.reply <- r.agentMounts > 0
	case *footprintReq:
		m.reply <- r.footprint()
	case *teardownReq:
		r.teardownOwner(c, m.key, m.reply)
	case *owner.Stopped:
		r.unregisterAgent(r.stoppedSession(m), m.PID)
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
		id := strings.TrimPrefix(m.Who.Id, r.life.prefix) // "registry/", set when the registry started
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
				Detail: "Error: job actor stopped before the job settled", Reported: rec.reported()}, r.cfg.Now(), nil, nil)
		}
		r.jobStopped(c, m.id)
	}
}
