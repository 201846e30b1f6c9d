package owner

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/scope"
)

// Stopped is sent to the owner's watcher (the job registry) when the owner actor
// stops for any reason, so the jobs of that incarnation are torn down.
type Stopped struct{ PID *actor.PID }

// EffectLabel is the label of the Scope effect that stops the owner actor.
const EffectLabel = "owner.stop()"

var incarnations atomic.Uint64

// Agent is a handle to one live agent incarnation. It is a value the embedder holds;
// the state lives in the owner actor.
type Agent struct {
	session     string
	pid         *actor.PID
	scope       *scope.Scope
	incarnation uint64
}

// Session returns the agent's session id.
func (a *Agent) Session() string { return a.session }

// PID returns the owner actor's PID: the identity of this incarnation.
func (a *Agent) PID() *actor.PID { return a.pid }

// Scope returns the agent's own scope (a child of the scope it was composed under).
func (a *Agent) Scope() *scope.Scope { return a.scope }

// Incarnation returns the process-unique incarnation number.
func (a *Agent) Incarnation() uint64 { return a.incarnation }

// Dispose ends the incarnation: it disposes the agent's scope, which tears down the
// jobs it owns and then stops the owner actor. ctx stops the waiting only.
func (a *Agent) Dispose(ctx context.Context) error { return a.scope.Dispose(ctx) }

func (a *Agent) String() string { return fmt.Sprintf("agent %q (%s)", a.session, a.pid.Id) }

// Spawn starts the owner actor of a new incarnation of session, composed under parent.
// watcher, if non-nil, receives Stopped when the actor stops.
func Spawn(root *actor.RootContext, parent *scope.Scope, session string, watcher *actor.PID) (*Agent, error) {
	inc := incarnations.Add(1)
	sc, err := parent.Child("agent:" + session)
	if err != nil {
		return nil, err
	}
	props := actor.PropsFromProducer(func() actor.Actor { return &ownerActor{watcher: watcher} })
	pid, err := root.SpawnNamed(props, fmt.Sprintf("owner-%d", inc))
	if err != nil {
		return nil, err
	}
	a := &Agent{session: session, pid: pid, scope: sc, incarnation: inc}
	if _, err := sc.Add(EffectLabel, func(ctx context.Context) error {
		return root.StopFuture(pid).Wait()
	}); err != nil {
		root.Stop(pid)
		return nil, err
	}
	return a, nil
}

// ownerActor is the identity of one incarnation. Later issues give it the notice
// inbox, busy/idle status and wake budget; its stop already tears its jobs down.
type ownerActor struct {
	watcher *actor.PID
}

func (o *ownerActor) Receive(c actor.Context) {
	switch c.Message().(type) {
	case *actor.Stopping:
		if o.watcher != nil {
			c.Send(o.watcher, &Stopped{PID: c.Self()})
		}
	}
}
