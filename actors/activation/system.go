package activation

import (
	"context"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/scope"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/supervision"
)

// Option adjusts the manager's dependencies in Start.
type Option func(*Deps)

// WithCwd sets how a top-level parent's working directory is found; it is copied
// into the header of each child it starts (SPEC §6.8).
func WithCwd(cwd func(parent *owner.Agent) string) Option { return func(d *Deps) { d.Cwd = cwd } }

// WithRestartIntensity bounds an Activation's restarts after panics: past
// in.MaxRestarts failures within in.Within it stops (the default: 3 within 10 s).
func WithRestartIntensity(in supervision.Intensity) Option {
	return func(d *Deps) { d.Restarts = in }
}

// WithLogger sets where the manager's warnings go (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(d *Deps) { d.Logger = l } }

// Host is what the continuation manager needs from the system it runs in: the
// pieces, not the system (the facade, troupe.System.StartContinuations, fills it;
// this package does not import the facade).
type Host struct {
	// Actors runs the directory and its Activations.
	Actors *actor.ActorSystem
	// Scope is the global scope: the manager's drain is registered there, so that
	// disposing it (the system's shutdown) drains every Activation, child-first.
	Scope *scope.Scope
	// Jobs is the agent service (Deps.Jobs): the children's agents register there.
	Jobs *registry.Client
	// Inspector receives the directory's and the Activations' lifecycle events.
	Inspector *actor.PID
	// NewAgent spawns the owner actor of a new incarnation of session under the
	// global scope, with opts (troupe.System.NewAgent); it does not register it.
	NewAgent func(session string, opts owner.Options) (*owner.Agent, error)
	// Dispatcher, if set, runs the directory's and the Activations' mailboxes
	// (Deps.Dispatcher): the system's own, so that their runs, which read and write
	// the store, start on warm worker stacks and not on a fresh goroutine each.
	Dispatcher actor.Dispatcher
}

// Start makes the continuation manager of the system h describes: children's
// agents are spawned under the global scope and registered under their session
// ids, and disposing h.Scope drains every Activation (child-first) before the
// actors stop. surface, if set, gives each child agent its delivery surface; by
// default a child's agent delivers into its own Activation's inbox (a notice
// becomes a turn of the child). store nil leaves the manager without persistence
// (PERSISTENCE_UNAVAILABLE).
func Start(h Host, store session.Store, runtime *subagent.Runtime, runner subagent.TurnRunner,
	surface func(childID string) owner.Surface, opts ...Option) (*Manager, error) {
	deps := Deps{
		Store:      store,
		Runtime:    runtime,
		Runner:     runner,
		Jobs:       h.Jobs,
		Inspector:  h.Inspector,
		Dispatcher: h.Dispatcher,
		Now:        func() int64 { return time.Now().UnixMilli() },
		NewAgent: func(id string, inbox owner.Surface) (*owner.Agent, error) {
			opts := owner.Options{Surface: inbox}
			if surface != nil {
				if s := surface(id); s != nil {
					opts.Surface = s
				}
			}
			a, err := h.NewAgent(id, opts)
			if err != nil {
				return nil, err
			}
			if err := h.Jobs.RegisterAgent(context.Background(), a); err != nil {
				_ = a.Dispose(context.Background())
				return nil, err
			}
			return a, nil
		},
	}
	for _, o := range opts {
		o(&deps)
	}
	m, err := NewManager(h.Actors, deps)
	if err != nil {
		return nil, err
	}
	root := h.Actors.Root
	if _, err := h.Scope.Add("continuations.drain()", func(ctx context.Context) error {
		err := m.Drain(ctx)
		_ = root.StopFuture(m.pid).Wait()
		return err
	}); err != nil {
		_ = root.StopFuture(m.pid).Wait()
		return nil, err
	}
	return m, nil
}
