package registry

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/internal/fault"
)

// The settlement commit (SPEC §2.9's order) of a job actor's decision, and the
// forced failures of Shutdown's deadline.

type forcing struct {
	pending map[string]bool
	ids     []string
	reply   chan<- []string
}

func (r *registryActor) settled(c actor.Context, m *job.Settled) {
	rec := r.idx.get(m.ID)
	if rec == nil || !rec.live() {
		// Only after jobGone force-failed the record: answer the waiters anyway.
		for _, w := range m.Waiters {
			if rec != nil {
				w <- job.WaitResult{Snapshot: rec.snapshot()}
			} else {
				w <- job.WaitResult{Err: errDisposed()}
			}
		}
		return
	}
	r.commitSettlement(c, rec, m.Decision, m.FinishedAt, m.Waiters, m.ReadOutput)
}

// commitSettlement is SPEC §2.9 from the registry's side, in its fixed order: record
// (with the claim decided by the job's core), snapshot, release waiters, free the
// slot, changed, then — unless listeners are closed — done, announced last.
func (r *registryActor) commitSettlement(c actor.Context, rec *record, d job.Decision, finishedAt int64,
	waiters []chan<- job.WaitResult, readOutput func() (string, error)) {
	fault.Yield(PointSettleCommit)
	pid := rec.pid
	rec.pid = nil
	rec.status = d.Status
	rec.setHasDetail(d.HasDetail)
	rec.detail = d.Detail
	rec.finishedAt = finishedAt
	rec.setReported(d.Reported)
	rec.output = d.Output
	rec.readOutput = readOutput
	if rec.out != nil {
		rec.out.Seal() // appends made before the outcome are in; later ones are dropped
	}
	r.jobSettled(c, rec)
	if rec.slot() {
		rec.setSlot(false)
		r.adm.Release(rec.ownerKey())
	}
	for _, w := range waiters {
		w <- job.WaitResult{Snapshot: rec.snapshot()}
	}
	r.announceEvicted(r.idx.settled(rec, r.cfg.Now()), rec.owner, true)
	r.fireChanged(rec.owner)
	if !r.plantedAlreadyAnnounced(rec.ID) && !r.closed {
		r.fireDone(rec)
	}
	// The job actor's stop after the listeners: its mailbox run (and the worker it
	// wakes) is no part of the settlement, and a completion notice sent by a done
	// listener has then reached an idle owner's surface (the notice is run here, on
	// this goroutine: internal/mailbox Inline) or been queued before it.
	c.Poison(pid)
	for _, o := range r.observers[rec.ID] {
		o <- getRes{snap: rec.snapshot()}
	}
	delete(r.observers, rec.ID)
	if o := rec.owner; o != nil && o.teardown != nil && o.teardown.pending[rec.ID] {
		delete(o.teardown.pending, rec.ID)
		if len(o.teardown.pending) == 0 {
			// Removal commits after the queries this settlement's observers sent.
			c.Send(c.Self(), &removeOwner{key: o.key})
		}
	}
	if d := r.disposing; d != nil && d.pending[rec.ID] {
		delete(d.pending, rec.ID)
		if len(d.pending) == 0 {
			c.Send(c.Self(), &finishDispose{})
		}
	}
	r.forced(rec.ID)
}

// forceAll sends every live job a ForceFail (Shutdown's deadline) and answers once
// all of them have committed their settlement, with their ids.
func (r *registryActor) forceAll(c actor.Context, m *forceAllReq) {
	f := &forcing{pending: map[string]bool{}, reply: m.reply}
	for _, rec := range r.idx.all() {
		if rec.live() {
			f.pending[rec.ID] = true
			f.ids = append(f.ids, rec.ID)
			fail := m.fail
			fail.Warn = fmt.Sprintf(m.fail.Warn, rec.ID)
			r.toHooks(c, rec, &fail)
		}
	}
	if len(f.pending) == 0 {
		m.reply <- f.ids
		return
	}
	r.forcings = append(r.forcings, f)
}

// forced records id's commit for the pending forceAll requests.
func (r *registryActor) forced(id string) {
	if len(r.forcings) == 0 {
		return
	}
	kept := r.forcings[:0]
	for _, f := range r.forcings {
		delete(f.pending, id)
		if len(f.pending) == 0 {
			f.reply <- f.ids
			continue
		}
		kept = append(kept, f)
	}
	clear(r.forcings[len(kept):])
	r.forcings = kept
}

// PointSettleCommit is the fault point at the start of every settlement commit: an
// installed fault.Injector counts one hit per commit.
const PointSettleCommit = "registry.settle.commit"
