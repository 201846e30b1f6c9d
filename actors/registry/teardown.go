package registry

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/job"
)

// Teardown (SPEC §2.11): of one owner incarnation's jobs, and the service
// disposal of every job.

type disposal struct {
	pending map[string]bool
	replies []chan<- struct{}
}

// teardownOwner runs owner disposal (SPEC §2.11) for one exact incarnation: claim and
// cancel each of its live jobs with reason "owner disposed", await their
// settlements, then remove all its records and fire one change.
func (r *registryActor) teardownOwner(c actor.Context, key string, reply chan<- struct{}) {
	o := r.owners[key]
	if o == nil {
		// It never started a job, or its teardown is over and its entry removed:
		// nothing to tear down, and nothing is kept for it. Later starts of that
		// incarnation are refused all the same (see start and agent).
		if reply != nil {
			reply <- struct{}{}
		}
		return
	}
	if o.teardown != nil {
		if reply != nil {
			o.teardown.replies = append(o.teardown.replies, reply)
		}
		return
	}
	o.tornDown = true
	t := &teardown{pending: map[string]bool{}}
	if reply != nil {
		t.replies = append(t.replies, reply)
	}
	o.teardown = t
	for _, rec := range o.records {
		if rec.live() {
			t.pending[rec.ID] = true
			r.toHooks(c, rec, &job.Teardown{Reason: job.ReasonOwnerDisposed})
		}
	}
	if len(t.pending) == 0 {
		c.Send(c.Self(), &removeOwner{key: key})
	}
}

func (r *registryActor) removeOwner(key string) {
	o := r.owners[key]
	if o == nil || o.teardown == nil {
		return
	}
	t := o.teardown
	o.teardown = nil
	if r.idx.removeOwner(o) > 0 {
		r.fireChanged(o)
	}
	// The incarnation is gone from every table: its records, its bucket (freed
	// with its last slot) and now its entry. Its cleanup effect leaves its scope
	// (a teardown that its actor's stop began does not wait for the scope).
	delete(r.owners, key)
	if o.cleanup != nil {
		o.cleanup.Detach()
		o.cleanup = nil
	}
	for _, reply := range t.replies {
		reply <- struct{}{}
	}
}

// dispose is service disposal (SPEC §2.11): close listeners, cancel-for-teardown
// every live job, and finish once all have settled.
func (r *registryActor) dispose(c actor.Context, reply chan<- struct{}) {
	if r.disposed {
		reply <- struct{}{}
		return
	}
	if r.disposing != nil {
		r.disposing.replies = append(r.disposing.replies, reply)
		return
	}
	r.closed = true
	d := &disposal{pending: map[string]bool{}, replies: []chan<- struct{}{reply}}
	r.disposing = d
	for _, rec := range r.idx.all() {
		if rec.live() {
			d.pending[rec.ID] = true
			r.toHooks(c, rec, &job.Teardown{Reason: job.ReasonServiceDisposed})
		}
	}
	if len(d.pending) == 0 {
		c.Send(c.Self(), &finishDispose{})
	}
}

func (r *registryActor) finishDispose() {
	d := r.disposing
	if d == nil {
		return
	}
	var owners []*ownerEntry
	seen := map[*ownerEntry]bool{}
	for _, rec := range r.idx.all() {
		if !seen[rec.owner] {
			seen[rec.owner] = true
			owners = append(owners, rec.owner)
		}
	}
	r.idx.clear()
	for _, o := range owners {
		r.fireChanged(o)
	}
	for _, o := range r.owners {
		if o.cleanup != nil {
			o.cleanup.Detach()
			o.cleanup = nil
		}
		if t := o.teardown; t != nil {
			o.teardown = nil
			for _, reply := range t.replies {
				reply <- struct{}{}
			}
		}
	}
	clear(r.owners) // every record is gone; Stopped and cleanups from now on find none
	r.disposing = nil
	r.disposed = true
	for _, reply := range d.replies {
		reply <- struct{}{}
	}
}
