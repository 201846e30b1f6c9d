package activation

import (
	"fmt"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/supervision"
)

// The directory's part of the supervision tree (package supervision): its own
// spawn and stop, and each Activation's spawn, restarts and stop — every event of an
// Activation comes from the directory, its supervisor, so they arrive in order.
// Nothing is sent when Deps.Inspector is nil.

// lifecycle is what the directory keeps to report its Activations' stops.
type lifecycle struct {
	prefix   string                       // "directory/": an Activation's PID id is prefix + its node id
	shutdown bool                         // the directory is stopping: its Activations stop with it
	causes   map[string]supervision.Cause // Activation PID id → why the directory is stopping it
}

func (d *directoryActor) inspector() *actor.PID { return d.m.deps.Inspector }

func (d *directoryActor) activationRef(pid *actor.PID) supervision.Ref {
	return supervision.Ref{Kind: supervision.KindActivation, ID: strings.TrimPrefix(pid.Id, d.life.prefix)}
}

// ownLifecycle reports the directory's own spawn and stop.
func (d *directoryActor) ownLifecycle(c actor.Context) {
	self := supervision.Ref{Kind: supervision.KindDirectory, ID: c.Self().Id}
	switch c.Message().(type) {
	case *actor.Started:
		d.life.prefix = c.Self().Id + "/"
		supervision.Emit(c, d.inspector(), supervision.Event{Kind: supervision.Spawned, Node: self, Actor: c.Self().Id})
	case *actor.Stopping:
		d.life.shutdown = true
	case *actor.Stopped:
		supervision.Emit(c, d.inspector(), supervision.Event{Kind: supervision.Stopped, Node: self, Cause: supervision.CauseTeardown})
	}
}

func (d *directoryActor) activationSpawned(c actor.Context, pid *actor.PID, session string) {
	supervision.Emit(c, d.inspector(), supervision.Event{Kind: supervision.Spawned, Node: d.activationRef(pid),
		Parent: supervision.Ref{Kind: supervision.KindDirectory, ID: c.Self().Id}, Actor: pid.Id, Session: session})
}

// activationRestarted is called from HandleFailure, on the directory's goroutine
// between two messages: the root context sends in the same order as c would.
func (d *directoryActor) activationRestarted(pid *actor.PID, reason any) {
	supervision.Emit(d.m.root, d.inspector(), supervision.Event{Kind: supervision.Restarted, Node: d.activationRef(pid),
		Cause: supervision.CausePanic, Detail: fmt.Sprint(reason)})
}

// stopping records why the directory stops an Activation: a crash past the restart
// intensity (panic), a forced disposal or a rollback (teardown). An Activation that
// settled and was released stops with cause none.
func (d *directoryActor) stopping(pid *actor.PID, cause supervision.Cause) {
	if d.inspector() == nil {
		return
	}
	if d.life.causes == nil {
		d.life.causes = map[string]supervision.Cause{}
	}
	d.life.causes[pid.Id] = cause
}

func (d *directoryActor) activationStopped(c actor.Context, pid *actor.PID) {
	if d.inspector() == nil {
		return
	}
	cause, ok := d.life.causes[pid.Id]
	delete(d.life.causes, pid.Id)
	if !ok && d.life.shutdown {
		cause = supervision.CauseTeardown
	}
	supervision.Emit(c, d.inspector(), supervision.Event{Kind: supervision.Stopped, Node: d.activationRef(pid), Cause: cause})
}
