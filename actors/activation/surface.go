package activation

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/owner"
)

// childSurface is the default delivery surface of a continuable child's agent: its
// own Activation's inbox. A notice or report to the child (from its jobs, its own
// children) becomes a journaled message of the child's FIFO: Followup and Steer
// wake it, Inject joins the queue without waking it. The verbs only send a message
// to the Activation, so they never block the owner actor that calls them.
type childSurface struct {
	root *actor.RootContext
	pid  *actor.PID
}

func (s *childSurface) Inject(m owner.Message) error {
	s.root.Send(s.pid, &inboxIn{msg: m})
	return nil
}

func (s *childSurface) Steer(m owner.Message) error {
	s.root.Send(s.pid, &inboxIn{msg: m, wake: true})
	return nil
}

func (s *childSurface) Followup(m owner.Message) error {
	s.root.Send(s.pid, &inboxIn{msg: m, wake: true})
	return nil
}
