package registry

import (
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/supervision"
)

// The registry's part of the supervision tree (package supervision): it reports its
// own spawn and stop and, for each job, its spawn, its settlement with the cause
// that decided it, and its actor's stop. Every event of a job comes from the
// registry, so they reach the inspector in that order. Nothing is sent when
// Config.Inspector is nil.
//
// A job's settled event is made at its settlement commit (its cause is decided
// there) and sent with its stopped event once its actor has stopped
// (supervision.JobEnded): one message to the inspector where there were two. The
// commit poisons the actor, so the wait is that actor's few queued messages; a
// job's events stay in their order, and every job's are sent before the
// registry's own stop.

// lifecycle is what the registry keeps to report causes. Touched only on the
// registry's goroutine (Receive and HandleFailure).
type lifecycle struct {
	prefix   string                            // "registry/": a job actor's PID id is prefix + job id
	stopping bool                              // the registry is stopping: a job actor's stop is final
	causes   map[string]supervision.Cause      // live jobs whose stop landed: the first of kill or teardown
	crashed  map[string]bool                   // jobs whose actor panicked, until it has stopped
	jobs     actor.SupervisorStrategy          // how a failed job actor is supervised
	ended    map[string]supervision.JobSettled // settled jobs whose actor has not stopped yet: the event waits for its stop
}

func (r *registryActor) inspector() *actor.PID { return r.cfg.Inspector }

// ownLifecycle reports the registry's own spawn and stop.
func (r *registryActor) ownLifecycle(c actor.Context) {
	self := supervision.Ref{Kind: supervision.KindRegistry, ID: c.Self().Id}
	switch c.Message().(type) {
	case *actor.Started:
		r.life.prefix = c.Self().Id + "/"
		supervision.Emit(c, r.inspector(), supervision.Event{Kind: supervision.Spawned, Node: self, Actor: c.Self().Id})
	case *actor.Stopping:
		r.life.stopping = true
	case *actor.Stopped:
		r.runners.Close() // its job actors have stopped: no Cancel starts from now on
		// Every job actor has stopped, so none is left here; one would be sent
		// before the registry's stop all the same (the tree refuses it then).
		for id, e := range r.life.ended {
			delete(r.life.ended, id)
			supervision.EmitJob(c, r.inspector(), e)
		}
		supervision.Emit(c, r.inspector(), supervision.Event{Kind: supervision.Stopped, Node: self, Cause: supervision.CauseTeardown})
	}
}

// jobSpawned reports a job actor spawned for rec.
func (r *registryActor) jobSpawned(c actor.Context, rec *record) {
	if r.inspector() == nil {
		return
	}
	e := supervision.JobSpawned{Registry: c.Self().Id, ID: rec.ID, Actor: rec.pid.Id}
	if rec.owner != nil {
		e.Session = rec.owner.session
	}
	supervision.EmitJob(c, r.inspector(), e)
}

// stopLanded records why a live job is stopping: a kill or a teardown, the first
// that landed. gone records an actor that stopped before settling (cause none).
func (r *registryActor) stopLanded(id string, cause supervision.Cause) {
	if r.inspector() == nil {
		return
	}
	if r.life.causes == nil {
		r.life.causes = map[string]supervision.Cause{}
	}
	if _, ok := r.life.causes[id]; !ok {
		r.life.causes[id] = cause
	}
}

// jobSettled reports a settlement being committed, with its cause: a panic of the
// job's actor, else the kill or teardown that landed first, else a teardown or
// disposal in progress (a Cancel that failed during one), else the producer.
func (r *registryActor) jobSettled(c actor.Context, rec *record) {
	if r.inspector() == nil {
		return
	}
	cause, ok := r.life.causes[rec.ID]
	delete(r.life.causes, rec.ID)
	switch {
	case r.life.crashed[rec.ID]:
		cause = supervision.CausePanic
	case ok:
	case rec.owner != nil && rec.owner.teardown != nil && rec.owner.teardown.pending[rec.ID],
		r.disposing != nil && r.disposing.pending[rec.ID]:
		cause = supervision.CauseTeardown
	default:
		cause = supervision.CauseProducer
	}
	e := supervision.JobSettled{ID: rec.ID, Status: rec.status.Name(), Cause: cause}
	if rec.hasDetail() {
		e.Detail = rec.detail
	}
	if r.life.ended == nil {
		r.life.ended = map[string]supervision.JobSettled{}
	}
	r.life.ended[rec.ID] = e // sent with the job's stop (jobStopped)
}

// jobStopped reports that a job's actor has stopped: after its settlement, or
// after a panic (cause panic).
func (r *registryActor) jobStopped(c actor.Context, id string) {
	if r.inspector() == nil {
		return
	}
	cause := supervision.CauseNone
	if r.life.crashed[id] {
		cause = supervision.CausePanic
		delete(r.life.crashed, id)
	}
	delete(r.life.causes, id)
	stopped := supervision.JobStopped{ID: id, Cause: cause}
	if settled, ok := r.life.ended[id]; ok {
		delete(r.life.ended, id)
		supervision.EmitJob(c, r.inspector(), supervision.JobEnded{Settled: settled, Stopped: stopped})
		return
	}
	supervision.EmitJob(c, r.inspector(), stopped)
}

// HandleFailure makes the registry its job actors' supervisor: it notes the job
// whose actor panicked (its settlement and stop report cause panic), then applies
// supervision.JobStrategy (stop: the job actor's Stopping handler settles it
// failed). protoactor calls it on the registry's goroutine, between messages.
func (r *registryActor) HandleFailure(system *actor.ActorSystem, sup actor.Supervisor, child *actor.PID,
	rs *actor.RestartStatistics, reason any, message any) {
	if r.inspector() != nil && strings.HasPrefix(child.Id, r.life.prefix) {
		if r.life.crashed == nil {
			r.life.crashed = map[string]bool{}
		}
		r.life.crashed[strings.TrimPrefix(child.Id, r.life.prefix)] = true
	}
	r.life.jobs.HandleFailure(system, sup, child, rs, reason, message)
}

// stopCause is the cause a landed stop reports: a kill, else a teardown.
func stopCause(m *job.StopRequested) supervision.Cause {
	if m.Kill != nil {
		return supervision.CauseKill
	}
	return supervision.CauseTeardown
}
