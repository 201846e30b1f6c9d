package activation

import (
	"context"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/session"
)

// list_agents (SPEC §6.9): a parent's children from the store's heads, with the
// residency of the live ones.

// Listed is one child in list_agents.
type Listed struct {
	ID         string
	Status     string // running | idle | ready
	Label      string
	Parent     string
	Depth      int
	Diagnostic string // corrupt | unsupported | unavailable, when it could not be read
}

// list is list_agents: parent's continuable children (or all its descendants) from
// the store, with the residency of the live ones. It runs on the caller's goroutine.
// The store's heads are read once (every session, in id order) into an index of children by
// parent session, so descendants cost one pass, not one pass per level or child.
func (m *Manager) list(ctx context.Context, parent *owner.Agent, kind string, descendants bool) ([]Listed, error) {
	ids, err := m.deps.Store.IDs(ctx)
	if err != nil {
		return nil, err
	}
	byParent := map[string][]session.Head{}
	for _, id := range ids {
		if h, err := m.deps.Store.Head(ctx, id); err == nil {
			byParent[h.Header.ParentSession] = append(byParent[h.Header.ParentSession], h)
		}
	}
	out := []Listed{}
	seen := map[string]bool{parent.Session(): true} // a corrupt store's cycle is walked once
	var walk func(parent, kind string)
	walk = func(parent, kind string) {
		for _, s := range byParent[parent] {
			id := s.Header.ID
			if seen[id] || s.Header.ParentKind != kind { // a same-named parent in the other namespace
				continue
			}
			seen[id] = true
			out = append(out, listed(s, parent))
			if descendants {
				walk(id, session.ParentSubagent)
			}
		}
	}
	walk(parent.Session(), kind)
	if err := ctx.Err(); err != nil {
		return nil, job.Aborted(ctx)
	}
	m.addResidency(ctx, out)
	return out, nil
}

// listed is a stored child as list_agents shows it before residency: ready, with
// its label, or a diagnostic when its descriptor cannot be read.
func listed(s session.Head, parent string) Listed {
	l := Listed{ID: s.Header.ID, Status: "ready", Parent: parent, Depth: s.Header.DelegationDepth}
	desc, err := ParseDescriptor(s.Descriptor)
	switch {
	case err != nil && desc.Version == DescriptorVersion:
		l.Diagnostic = "corrupt"
	case err != nil || desc.Mode != "continuable":
		l.Diagnostic = "unsupported"
	default:
		l.Label = desc.Label
	}
	return l
}

// addResidency marks the listed children that have a resident Activation idle or
// running, asking the directory about these ids only.
func (m *Manager) addResidency(ctx context.Context, out []Listed) {
	if len(out) == 0 {
		return
	}
	ids := make([]string, len(out))
	for i, l := range out {
		ids[i] = l.ID
	}
	live := m.resident(ctx, ids...)
	for i := range out {
		e, ok := live[out[i].ID]
		if !ok {
			continue
		}
		if st, ok := m.status(e.pid); ok {
			out[i].Status = "idle"
			if st.Residency == Running {
				out[i].Status = "running"
			}
		}
	}
}
