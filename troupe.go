// Package troupe is an actor-model runtime, on protoactor-go, for the long-running
// work of LLM agent systems: background jobs with first-wins settlement, owned by
// agent incarnations, fenced by session, and torn down with them.
//
// The embedder's contract:
//  1. New(Config) starts a System: an actor system with the job registry actor.
//  2. Attach a job controller in the Scope your agents are composed under
//     (Jobs().AttachController) and mount the agent registry (Jobs().MountAgents).
//  3. NewAgent spawns an agent incarnation's owner actor; RegisterAgent makes it
//     the live instance of its session, which may then own jobs.
//  4. Jobs().Start runs a producer as a job; Read, List, Kill, Wait address it by id,
//     fenced by the caller's session id.
//  5. Shutdown(ctx) refuses new work, tears every job down, stops the actors and
//     waits; it is idempotent and honours ctx's deadline.
package troupe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/actors/controller"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/cluster"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/scope"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/supervision"
)

// DefaultMaxConcurrentJobsPerOwner is SPEC §2.4's default admission limit.
const DefaultMaxConcurrentJobsPerOwner = 10

// deadLetterThrottle bounds how long protoactor's dead-letter throttle goroutine
// outlives the last dead letter (its default is 1 s).
const deadLetterThrottle = 10 * time.Millisecond

const maxSafeInteger = 1<<53 - 1

// Config configures a System. The zero value is valid and means the defaults.
type Config struct {
	// MaxConcurrentJobsPerOwner is the admission limit per exact owner incarnation
	// (and for the shared unowned bucket). nil means 10; a present value must be a
	// positive safe integer.
	MaxConcurrentJobsPerOwner *int64
	// Logger receives troupe's warnings (SPEC's "jobs: …" texts). nil means slog.Default().
	Logger *slog.Logger
	// Clock stamps startedAt and finishedAt. nil means time.Now.
	Clock func() time.Time
	// Dispatcher runs every troupe actor's mailbox. nil means the System's own
	// PoolDispatcher (closed by Shutdown); tests pass a seeded dispatcher to replay a
	// schedule. The supervision inspector always runs on the System's pool (one
	// worker when Dispatcher is set), never on its senders' goroutines. On a
	// PoolDispatcher (nil, or one of the embedder's), a Jobs() request made while
	// the registry is idle is run by its caller's goroutine instead (see
	// registry.Config.CallerRuns); any other dispatcher runs every request itself.
	Dispatcher actor.Dispatcher
	// ActorSystemOptions are passed to protoactor's NewActorSystem after troupe's own
	// (a discarding protoactor logger and a 10 ms dead-letter throttle).
	ActorSystemOptions []actor.ConfigOption
	// SettleTimeout is opt-in (zero: off, SPEC's semantics stand): a job that stays
	// stopping longer than this after a kill (or a teardown cancel) landed — its
	// Done never sends — settles failed with job.TextSettleTimeout, frees its slot,
	// and is logged; its work may be orphaned. A negative value is invalid.
	SettleTimeout time.Duration
	// AfterFunc arms the SettleTimeout timers: it calls f once after d and returns
	// the timer's stop. nil means time.AfterFunc; tests pass a fake clock's.
	AfterFunc func(d time.Duration, f func()) (stop func() bool)
	// Retention is opt-in bounded job history (zero: off, SPEC's semantics stand —
	// a settled record stays until its owner is torn down): at most PerOwner
	// settled records per owner incarnation (and as many unowned), and none older
	// than MaxAge by Clock. An evicted job is gone from every table; looking it up
	// answers as for an unknown id ("unknown job <id>", job/not-found).
	Retention Retention
}

// Retention bounds the settled job history; see registry.Retention.
type Retention = registry.Retention

// DefaultConfig returns the defaults with every optional value left unset.
func DefaultConfig() Config { return Config{} }

// Validate checks every present value.
func (c Config) Validate() error {
	if p := c.MaxConcurrentJobsPerOwner; p != nil && (*p < 1 || *p > maxSafeInteger) {
		return messages.Errorf(messages.CodeInvalidConfig,
			"invalid maxConcurrentJobsPerOwner: expected a positive safe integer, got %d", *p)
	}
	if c.SettleTimeout < 0 {
		return messages.Errorf(messages.CodeInvalidConfig,
			"invalid settleTimeout: expected zero (off) or a positive duration, got %s", c.SettleTimeout)
	}
	return c.Retention.Validate()
}

// System is one troupe runtime: a protoactor actor system, its global Scope and
// the job registry.
type System struct {
	actors *actor.ActorSystem
	root   *scope.Scope
	jobs   *registry.Client
	watch  *job.Watcher
	tree   *supervision.Inspector
	// agents spawns the owner actors of NewAgent's default configuration (one
	// Props for all of them).
	agents *owner.Spawner

	logger     *slog.Logger
	dispatcher actor.Dispatcher
	pool       *PoolDispatcher // the inspector's (and the default) dispatcher, closed by Shutdown

	member *cluster.Node // JoinCluster's; StartContinuations places children through it

	stopped  chan struct{}
	shutdown sync.Once
	done     chan struct{}
	err      error
}

// New validates cfg and starts a System.
func New(cfg Config) (*System, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	limit := int64(DefaultMaxConcurrentJobsPerOwner)
	if cfg.MaxConcurrentJobsPerOwner != nil {
		limit = *cfg.MaxConcurrentJobsPerOwner
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	clock := cfg.Clock
	if clock == nil {
		clock = time.Now
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	opts := append([]actor.ConfigOption{
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }),
		actor.WithDeadLetterThrottleInterval(deadLetterThrottle),
	}, cfg.ActorSystemOptions...)
	var pool *PoolDispatcher
	if cfg.Dispatcher == nil {
		pool = NewPoolDispatcher(0)
		cfg.Dispatcher = pool
	} else {
		pool = NewPoolDispatcher(1) // the inspector's only
	}
	s := &System{
		pool:    pool,
		actors:  actor.NewActorSystem(opts...),
		root:    scope.NewRoot("global"),
		watch:   job.NewWatcher(),
		stopped: make(chan struct{}),
		done:    make(chan struct{}),

		logger:     logger,
		dispatcher: cfg.Dispatcher,
	}
	// The inspector first: every other actor reports its lifecycle to it.
	tree, err := supervision.StartInspector(s.actors, supervision.InspectorConfig{Clock: clock, Logger: logger, Dispatcher: pool})
	if err != nil {
		s.watch.Close()
		s.actors.Shutdown()
		pool.Close()
		return nil, err
	}
	s.tree = tree
	// A request to the idle registry is run by its caller (registry.Config.CallerRuns)
	// only on troupe's own pool, which promises nothing about which goroutine runs
	// an actor; any other dispatcher (a seeded schedule) runs every request itself.
	_, callerRuns := cfg.Dispatcher.(*PoolDispatcher)
	jobs, err := registry.Spawn(s.actors, registry.Config{
		MaxConcurrentJobsPerOwner: int(limit),
		RootScope:                 s.root,
		Logger:                    logger,
		Now:                       func() int64 { return clock().UnixMilli() },
		Dispatcher:                cfg.Dispatcher,
		Watcher:                   s.watch,
		Inspector:                 tree.PID(),
		SettleTimeout:             cfg.SettleTimeout,
		AfterFunc:                 cfg.AfterFunc,
		Retention:                 cfg.Retention,
		CallerRuns:                callerRuns,
	}, s.stopped)
	if err != nil {
		_ = tree.Stop(context.Background())
		s.watch.Close()
		s.actors.Shutdown()
		pool.Close()
		return nil, err
	}
	s.jobs = jobs
	var props func(*actor.Props) *actor.Props
	if d := s.dispatcher; d != nil {
		props = func(p *actor.Props) *actor.Props { return p.Configure(actor.WithDispatcher(d)) }
	}
	s.agents = owner.NewSpawner(s.actors.Root, jobs.PID(), owner.Options{Logger: logger, Props: props, Inspector: tree.PID()})
	return s, nil
}

// Scope returns the global scope: registrations here serve every owner.
func (s *System) Scope() *scope.Scope { return s.root }

// Jobs returns the job registry.
func (s *System) Jobs() *registry.Client { return s.jobs }

// Tree returns the supervision inspector: a snapshot of the live actor tree and the
// stream of lifecycle events (see package supervision).
func (s *System) Tree() *supervision.Inspector { return s.tree }

// Actors returns the underlying protoactor actor system.
func (s *System) Actors() *actor.ActorSystem { return s.actors }

// NewAgent spawns the owner actor of a new incarnation of session, composed under
// parent (nil: the global scope), with its delivery surface in opts (at most one
// Options). It is not registered: call Jobs().RegisterAgent. Agents of the default
// configuration (opts without Props or Inspector) share one Props (owner.Spawner).
func (s *System) NewAgent(parent *scope.Scope, session string, opts ...owner.Options) (*owner.Agent, error) {
	if parent == nil {
		parent = s.root
	}
	var o owner.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.Props == nil && o.Inspector == nil {
		return s.agents.Spawn(parent, session, o.Surface, o.Logger)
	}
	if o.Logger == nil {
		o.Logger = s.logger
	}
	if o.Props == nil && s.dispatcher != nil {
		d := s.dispatcher
		o.Props = func(p *actor.Props) *actor.Props { return p.Configure(actor.WithDispatcher(d)) }
	}
	if o.Inspector == nil {
		o.Inspector = s.tree.PID()
	}
	return owner.Spawn(s.actors.Root, parent, session, s.jobs.PID(), o)
}

// StartContinuations makes the continuation manager of s (SPEC §6; package
// activation): children's agents are spawned under the global scope and
// registered under their session ids, and Shutdown drains every Activation
// (child-first) before the actors stop. surface, if set, gives each child agent
// its delivery surface (nil, or a nil result: the child's own Activation inbox).
// store nil leaves the manager without persistence (PERSISTENCE_UNAVAILABLE).
// After JoinCluster the manager places every child through the cluster
// (activation.WithPlacement) and the member runs the children it owns on it.
func (s *System) StartContinuations(store session.Store, runtime *subagent.Runtime, runner subagent.TurnRunner,
	surface func(childID string) owner.Surface, opts ...activation.Option) (*activation.Manager, error) {
	if s.member != nil {
		opts = append([]activation.Option{activation.WithPlacement(s.member.Placement())}, opts...)
	}
	m, err := activation.Start(activation.Host{
		Actors:    s.actors,
		Scope:     s.root,
		Jobs:      s.jobs,
		Inspector: s.tree.PID(),
		NewAgent: func(session string, o owner.Options) (*owner.Agent, error) {
			return s.NewAgent(nil, session, o)
		},
		Dispatcher: s.continuationDispatcher(),
	}, store, runtime, runner, surface, opts...)
	if err == nil && s.member != nil {
		s.member.Bind(m)
	}
	return m, err
}

// continuationDispatcher is the dispatcher of the continuation manager's
// directory and Activations: the System's own pool (warm worker stacks for their
// store calls; a run that waits on a commit or on the registry is what the pool's
// escape workers are for), or nil — protoactor's goroutine per run — when a test
// set Config.Dispatcher: their runs wait on the registry's replies
// (RegisteredAgent, RegisterAgent), which a one-worker seeded schedule would never
// run.
func (s *System) continuationDispatcher() actor.Dispatcher {
	if s.dispatcher != actor.Dispatcher(s.pool) {
		return nil
	}
	return s.pool
}

// StartController starts the job-controller actor (the human surface: job.kill,
// job.list, job.follow; package controller), stopped with the global scope. It
// attaches no job controller (SPEC §1.3 rule 25).
func (s *System) StartController(cfg controller.Config) (*controller.Controller, error) {
	return controller.Spawn(s.jobs, s.root, s.tree.PID(), cfg)
}

// Shutdown stops the system in two phases: first it refuses new work — a Start
// made once Shutdown has been called fails with troupe/stopped — and tears down
// (the global scope's agents and registrations, then every job, SPEC §2.11's service
// disposal), then it stops the actors and waits for them. It is idempotent; every
// call waits for the same shutdown.
//
// When ctx ends first, every job still live — a Cancel that blocks, a Done that
// never sends — is settled failed with job.TextShutdownDeadline (its work may be
// orphaned: troupe cannot reach into a producer), its slot is freed, and Shutdown
// returns a job/shutdown-timeout error naming those jobs (it matches ctx's error
// too). The rest of the stop then runs on; a producer goroutine stuck in its own
// Cancel stays stuck until that Cancel returns.
func (s *System) Shutdown(ctx context.Context) error {
	s.shutdown.Do(func() {
		s.jobs.CloseAdmission() // queued before this call returns: later Starts are refused
		go s.stop()
	})
	select {
	case <-s.done:
		return s.err
	case <-ctx.Done():
	}
	return s.forceStop(ctx)
}

// forceGrace bounds Shutdown's wait, after its deadline, for the forced settlements
// (each a message to a job actor that never waits) and for the rest of the stop.
const forceGrace = 2 * time.Second

// forceStop settles every live job failed (Shutdown's deadline has passed), waits a
// short grace for the stop to finish, and reports what was forced.
func (s *System) forceStop(ctx context.Context) error {
	grace, cancel := context.WithTimeout(context.Background(), forceGrace)
	defer cancel()
	ids, err := s.jobs.ForceFailLiveOnShutdown(grace, job.TextShutdownDeadline,
		"jobs: job %s did not stop before the shutdown deadline; job record forced failed and work may be orphaned")
	if err != nil && !errors.Is(err, messages.ErrStopped) {
		return &messages.Error{Code: messages.CodeShutdownTimeout,
			Message: "shutdown deadline passed and the job registry did not answer: " + err.Error(), Cause: errors.Join(ctxCause(ctx), err)}
	}
	select {
	case <-s.done:
	case <-grace.Done():
	}
	if len(ids) == 0 {
		select {
		case <-s.done:
			return s.err
		default:
		}
		return &messages.Error{Code: messages.CodeShutdownTimeout,
			Message: "shutdown deadline passed before the teardown finished: " + ctx.Err().Error(), Cause: ctxCause(ctx)}
	}
	return &messages.Error{Code: messages.CodeShutdownTimeout,
		Message: fmt.Sprintf("shutdown deadline passed: %d job(s) did not stop in time and were forced failed (work may be orphaned): %s",
			len(ids), strings.Join(ids, ", ")),
		Details: map[string]string{"jobIds": strings.Join(ids, ",")}, Cause: ctxCause(ctx)}
}

// ctxCause is ctx's error joined with its cause when that differs, so errors.Is
// matches both.
func ctxCause(ctx context.Context) error {
	err := ctx.Err()
	if c := context.Cause(ctx); c != nil && c != err {
		return errors.Join(err, c)
	}
	return err
}

func (s *System) stop() {
	defer close(s.done)
	bg := context.Background()
	// Phase 1: agents first (their jobs are torn down by identity), then the service.
	rootErr := s.root.Dispose(bg)
	_ = s.jobs.Dispose(bg)
	// Phase 2: stop the registry (and with it any job actor) and wait.
	if err := s.actors.Root.PoisonFuture(s.jobs.PID()).Wait(); err != nil && rootErr == nil {
		rootErr = err
	}
	// Last, the inspector: it applies the registry's own stop first.
	if err := s.tree.Stop(bg); err != nil && rootErr == nil {
		rootErr = err
	}
	close(s.stopped)
	s.watch.Close()
	s.actors.Shutdown()
	s.pool.Close()
	s.err = rootErr
}
