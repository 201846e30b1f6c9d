package activation

import (
	"context"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
)

// Placement puts a Manager's continuable children in a cluster (package cluster
// fills it): Start, Followup and Interrupt called on the Manager go to the
// member that owns the child, whose own Manager runs it with StartHere,
// FollowupHere and InterruptHere. The embedder's code is the same for one
// process or many; only the Option differs.
type Placement struct {
	// Start places a new child of parent (speaking in kind, "" or
	// session.ParentSubagent) and accepts its first prompt there.
	Start func(ctx context.Context, parent *owner.Agent, kind, provider, label, childID string, req subagent.Request) (string, string, error)
	// Followup sends content to childID wherever it lives, as parent.
	Followup func(ctx context.Context, parent *owner.Agent, kind, childID, content string, source session.Source) (string, error)
	// Interrupt interrupts childID wherever it lives, as parent (the direct
	// parent only: a cluster request carries one parent's credential).
	Interrupt func(ctx context.Context, parent *owner.Agent, kind, childID string) error
}

// WithPlacement places the Manager's children through p (a cluster).
func WithPlacement(p *Placement) Option { return func(d *Deps) { d.Placement = p } }

// placed reports whether calls go through the Placement, and in which
// namespace parent speaks (after the checks every Start, Followup and Interrupt
// makes: the manager is available and parent is its session's live instance).
func (m *Manager) placed(ctx context.Context, parent *owner.Agent) (string, bool, error) {
	if m.deps.Placement == nil {
		return "", false, nil
	}
	if parent == nil {
		return "", true, unauthorized("a continuable subagent requires the exact live parent agent")
	}
	kind, live, err := m.speaker(ctx, parent)
	if err != nil {
		return "", true, err
	}
	if !live {
		return "", true, unauthorized("agent %q is not the live instance of its session", parent.Session())
	}
	return kind, true, nil
}
