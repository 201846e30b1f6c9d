package activation

import (
	"context"
	"github.com/troupe-rt/troupe/supervision"
	"log/slog"
	"time"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
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

// Start makes the continuation manager of sys: children's agents are spawned under
// the global scope and registered under their session ids, and shutting the system
// down drains every Activation (child-first) before the actors stop. surface, if
// set, gives each child agent its delivery surface; by default a child's agent
// delivers into its own Activation's inbox (a notice becomes a turn of the child).
// store nil leaves the manager without persistence (PERSISTENCE_UNAVAILABLE).
func Start(sys *troupe.System, store session.Store, runtime *subagent.Runtime, runner subagent.TurnRunner,
	surface func(childID string) owner.Surface, opts ...Option) (*Manager, error) {
	deps := Deps{
		Store:     store,
		Runtime:   runtime,
		Runner:    runner,
		Jobs:      sys.Jobs(),
		Inspector: sys.Tree().PID(),
		Now:       func() int64 { return time.Now().UnixMilli() },
		NewAgent: func(id string, inbox owner.Surface) (*owner.Agent, error) {
			opts := owner.Options{Surface: inbox}
			if surface != nil {
				if s := surface(id); s != nil {
					opts.Surface = s
				}
			}
			a, err := sys.NewAgent(nil, id, opts)
			if err != nil {
				return nil, err
			}
			if err := sys.Jobs().RegisterAgent(a); err != nil {
				_ = a.Dispose(context.Background())
				return nil, err
			}
			return a, nil
		},
	}
	for _, o := range opts {
		o(&deps)
	}
	m, err := NewManager(sys.Actors(), deps)
	if err != nil {
		return nil, err
	}
	root := sys.Actors().Root
	if _, err := sys.Scope().Add("continuations.drain()", func(ctx context.Context) error {
		err := m.Drain(ctx)
		_ = root.StopFuture(m.pid).Wait()
		return err
	}); err != nil {
		_ = root.StopFuture(m.pid).Wait()
		return nil, err
	}
	return m, nil
}
