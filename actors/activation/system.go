package activation

import (
	"context"
	"time"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
)

// Start makes the continuation manager of sys: children's agents are spawned under
// the global scope and registered under their session ids, and shutting the system
// down drains every Activation (child-first) before the actors stop. surface, if
// set, gives each child agent its delivery surface.
func Start(sys *troupe.System, store session.Store, runtime *subagent.Runtime, runner subagent.TurnRunner,
	surface func(childID string) owner.Surface) (*Manager, error) {
	deps := Deps{
		Store:   store,
		Runtime: runtime,
		Runner:  runner,
		Jobs:    sys.Jobs(),
		Now:     func() int64 { return time.Now().UnixMilli() },
		NewAgent: func(id string) (*owner.Agent, error) {
			var opts owner.Options
			if surface != nil {
				opts.Surface = surface(id)
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
