package activation

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/supervision"
)

// The directory as its Activations' supervisor: a crashed Activation restarts from
// the store once its cancelled turn has returned, within the restart intensity.

// DefaultRestartGrace is how long a crashed Activation's restart waits for its
// cancelled turn to return (Deps.RestartGrace).
const DefaultRestartGrace = time.Second

// HandleFailure makes the directory its Activations' supervisor (DESIGN
// "Supervision"): the message being handled is answered with ACTIVATION_FAILED,
// and the Activation restarts — its actor is reset in place (resume) and restores
// from the store, with the turn in flight recorded aborted and the queued messages kept —
// unless its restart intensity is spent (Deps.Restarts, by default more than 3
// failures within 10 s, decided by supervision.Decide); then it stops.
func (d *directoryActor) HandleFailure(sys *actor.ActorSystem, sup actor.Supervisor, child *actor.PID,
	rs *actor.RestartStatistics, reason any, message any) {
	id := ""
	if e := d.byActivation(child); e != nil {
		id = e.childID()
	}
	err := messages.Errorf(CodeActivationFailed,
		"subagent %q activation failed while handling the message (%v); it restarts from its persisted session", id, reason)
	switch m := message.(type) {
	case *submit:
		m.answer(acceptRes{err: err})
	case *interrupt:
		m.reply(err)
	case *report:
		m.reply(acceptRes{err: err})
	}
	restart, recent := supervision.Decide(d.failures[child.Id], time.UnixMilli(d.m.now()), d.m.deps.Restarts)
	if !restart {
		delete(d.failures, child.Id)
		d.m.logger.Warn(fmt.Sprintf("subagent: activation %s failed too often and stops: %v", id, reason))
		d.stopping(child, supervision.CausePanic)
		sup.StopChildren(child)
		return
	}
	if d.failures == nil {
		d.failures = map[string][]time.Time{}
	}
	d.failures[child.Id] = recent
	d.m.logger.Warn(fmt.Sprintf("subagent: activation %s panicked and restarts from its persisted session: %v", id, reason))
	if e := d.byActivation(child); e != nil && e.carry.quiet != nil {
		select {
		case <-e.carry.quiet:
		default:
			// A turn is in flight: cancel it and restart once it has returned, so the
			// new incarnation takes its epoch after the old turn is over (the failed
			// actor stays suspended meanwhile; its mailbox keeps what arrives). A
			// runner that ignores cancellation gets RestartGrace; then the restart goes
			// ahead and holds turns until the old one returns (start: Hold).
			e.carry.cancel(&Cancel{Kind: "parent"})
			q, root, self, grace := e.carry.quiet, d.m.root, d.m.pid, d.m.deps.RestartGrace
			if grace <= 0 {
				grace = DefaultRestartGrace
			}
			go func() {
				t := time.NewTimer(grace)
				defer t.Stop()
				select {
				case <-q:
				case <-t.C:
				}
				root.Send(self, &restartAfterTurn{sys: sys, pid: child, sup: sup, reason: reason})
			}()
			return
		}
	}
	d.activationRestarted(child, reason)
	d.resume(sys, sup, child)
}

// resume restarts a crashed Activation: Started is delivered to it again as a
// system message, ahead of everything its mailbox holds (system messages run even
// while it is suspended), and it resets itself in place on it
// (activationActor.Receive); then its mailbox is resumed. Its actor is never
// re-created: its producer runs only at its spawn (directoryActor.activationProps).
func (d *directoryActor) resume(sys *actor.ActorSystem, sup actor.Supervisor, child *actor.PID) {
	p, _ := sys.ProcessRegistry.Get(child) // dead letters once it has stopped
	p.SendSystemMessage(child, &actor.Started{})
	sup.ResumeChildren(child)
}

// restartAfterTurn restarts a crashed Activation whose cancelled turn has returned
// (see HandleFailure), unless it stopped meanwhile.
type restartAfterTurn struct {
	sys    *actor.ActorSystem
	pid    *actor.PID
	sup    actor.Supervisor
	reason any
}

func (d *directoryActor) restartAfterTurn(m *restartAfterTurn) {
	if d.byActivation(m.pid) == nil {
		return // stopped (a drain or a disposal) while it waited
	}
	d.activationRestarted(m.pid, m.reason)
	d.resume(m.sys, m.sup, m.pid)
}
