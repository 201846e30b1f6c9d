package web

import (
	"context"

	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/actors/owner"
)

// Activations lists a session's continuable children from the continuation
// manager m: Manager.List (direct children), with each resident child's epoch and
// queue length from Manager.Status. agent returns the session's live agent
// incarnation (nil: the session has no children to list).
type Activations struct {
	Manager *activation.Manager
	Agent   func(session string) *owner.Agent
}

// Children implements ChildLister.
func (a Activations) Children(ctx context.Context, session string) ([]Child, error) {
	parent := a.Agent(session)
	if parent == nil || a.Manager == nil {
		return []Child{}, nil
	}
	list, err := a.Manager.List(ctx, parent, false)
	if err != nil {
		return nil, err
	}
	out := make([]Child, 0, len(list))
	for _, l := range list {
		c := Child{ID: l.ID, Label: l.Label, Status: l.Status, Diagnostic: l.Diagnostic}
		if l.Status != "ready" {
			if st, ok := a.Manager.Status(ctx, l.ID); ok {
				c.Epoch, c.Queued = st.Header.Epoch, st.Queued
			}
		}
		out = append(out, c)
	}
	return out, nil
}
