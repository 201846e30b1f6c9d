package activation

import (
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/subagent"
)

// childSurface is the default delivery surface of a continuable child's agent: its
// own Activation's inbox. A notice or report to the child (from its jobs, its own
// children) becomes a journaled message of the child's FIFO: Followup and Steer
// wake it, Inject joins the queue without waking it. The verbs only send a message
// to the Activation, so they never block the owner actor that calls them.
//
// The agent is made before its Activation is spawned (the Activation's carry holds
// the agent), so the Activation's PID is published to the surface once, right
// after the spawn (bind): the surface holds protoactor's own PID of the Activation,
// not a copy of it. No delivery can reach the surface before that: the agent owns
// no job and no child yet, and only the directory, which is spawning it, has its
// handle. A delivery that found it unbound anyway would be refused, not lost
// silently (errUnbound).
type childSurface struct {
	root *actor.RootContext
	pid  atomic.Pointer[actor.PID]
}

// bind publishes the Activation's PID; it is called once, by the directory.
func (s *childSurface) bind(pid *actor.PID) { s.pid.Store(pid) }

func (s *childSurface) send(m *inboxIn) error {
	pid := s.pid.Load()
	if pid == nil {
		return errUnbound()
	}
	s.root.Send(pid, m)
	return nil
}

// errUnbound refuses a delivery to a child agent whose Activation is not spawned
// yet (not reached: see childSurface).
func errUnbound() error {
	return messages.Errorf(subagent.CodeContinuationUnavailable,
		"the continuable subagent's Activation is not spawned yet: the delivery is refused")
}

func (s *childSurface) Inject(m owner.Message) error { return s.send(&inboxIn{msg: m}) }

func (s *childSurface) Steer(m owner.Message) error { return s.send(&inboxIn{msg: m, wake: true}) }

func (s *childSurface) Followup(m owner.Message) error { return s.send(&inboxIn{msg: m, wake: true}) }
