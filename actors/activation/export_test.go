package activation

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/troupe-rt/troupe/actors/owner"
)

// IndexProblems returns every way the directory's indexes disagree with its
// entries (kids rebuilt from acts; every entry found by its Activation's PID and
// by its child agent, whose session is its id), read on its goroutine.
func (m *Manager) IndexProblems() []string {
	reply := make(chan []string, 1)
	m.root.Send(m.pid, &inspectReq{fn: func(d *directoryActor) { reply <- d.indexProblems() }})
	return <-reply
}

func (d *directoryActor) indexProblems() []string {
	kids := map[string]map[string]*entry{}
	var lost, unfound []string
	for id, e := range d.acts {
		if d.entryOf(e.agent) != e {
			unfound = append(unfound, id)
		}
		if d.byActivation(e.pid) != e {
			lost = append(lost, e.pid.Id)
		}
		if kids[e.parent.PID().Id] == nil {
			kids[e.parent.PID().Id] = map[string]*entry{}
		}
		kids[e.parent.PID().Id][id] = e
	}
	var out []string
	if len(unfound) > 0 {
		out = append(out, fmt.Sprintf("%d entries not found by their child agent (%v)", len(unfound), unfound))
	}
	if len(lost) > 0 {
		out = append(out, fmt.Sprintf("%d entries not found by their Activation's PID (%v)", len(lost), lost))
	}
	listed := map[string]map[string]*entry{}
	for parent, set := range d.kids {
		listed[parent] = map[string]*entry{}
		for i, e := range set {
			listed[parent][e.childID()] = e
			if int(e.kidAt) != i {
				out = append(out, fmt.Sprintf("kids of %s: %s at %d says %d", parent, e.childID(), i, e.kidAt))
			}
		}
		if len(set) == 0 {
			out = append(out, fmt.Sprintf("kids of %s is empty, not removed", parent))
		}
	}
	if !maps.EqualFunc(kids, listed, func(a, b map[string]*entry) bool { return maps.Equal(a, b) }) {
		out = append(out, fmt.Sprintf("kids has %d parents, want %d", len(d.kids), len(kids)))
	}
	return out
}

// ResidentAgent returns the agent of childID's resident Activation, or nil: test
// inspection only (production code gets a child's agent from TurnAgent, in its turn).
func (m *Manager) ResidentAgent(childID string) *owner.Agent {
	if e, ok := m.resident(context.Background(), childID)[childID]; ok {
		return e.agent
	}
	return nil
}

// UnboundSurfaceDelivery is a delivery to a child agent's surface before its
// Activation's PID is bound (childSurface.bind): test inspection of the refusal.
func UnboundSurfaceDelivery() error {
	return (&childSurface{}).Followup(owner.Message{ID: "m", Role: "user", Text: "early"})
}

// DeliverToActivation puts msg straight into childID's resident Activation's
// mailbox, as its child agent's surface does (Steer): queued by the time it
// returns, whatever state the Activation is in. False if none is resident.
func (m *Manager) DeliverToActivation(childID string, msg owner.Message) bool {
	e, ok := m.resident(context.Background(), childID)[childID]
	if ok {
		m.root.Send(e.pid, &inboxIn{msg: msg, wake: true})
	}
	return ok
}

// StallDirectory queues a message that holds the directory, once it reaches it,
// until release is called: test control of what the directory has handled.
func (m *Manager) StallDirectory() (release func()) {
	gate := make(chan struct{})
	m.root.Send(m.pid, &inspectReq{fn: func(*directoryActor) { <-gate }})
	var once sync.Once
	return func() { once.Do(func() { close(gate) }) }
}
