package registry

import "context"

// Footprint counts every entry the registry keeps, table by table: what a leak
// check compares against what should be live (issue 12's zero residue per
// incarnation). Once every agent incarnation has been disposed and every job
// settled and removed, each count is zero except Kinds (one id counter per kind
// ever started: ids are never reused) and the observer registrations still
// attached (Registrations, Layers, Controllers, AgentMounts).
type Footprint struct {
	Owners   int // incarnations that started jobs and are not yet torn down and removed
	Agents   int // sessions with a registered instance (each with its wire credential)
	Buckets  int // admission buckets holding at least one slot
	Kinds    int // id counters
	Jobs     int // records by id (live and settled, until removal)
	Sessions int // per-session record lists
	Unowned  int // unowned records
	// History counts the entries of the Retention queues (retention.go): each
	// owner's and the unowned bucket's settled records, and the age queue, lazily
	// deleted entries included. Zero without a bound; with one, O(Jobs).
	History   int
	Observers int // jobs with AwaitSettled callers pending
	Causes    int // stop causes kept for the supervision tree
	Crashed   int // crashed job actors not yet stopped
	// Observer registrations (a scope's mounts stay until it is disposed).
	Registrations int
	Layers        int
	Controllers   int
	AgentMounts   int
}

type footprintReq struct{ reply chan<- Footprint }

func (r *registryActor) footprint() Footprint {
	return Footprint{
		Owners:        len(r.owners),
		Agents:        len(r.agents),
		Buckets:       len(r.adm.buckets),
		Kinds:         len(r.adm.counters),
		Jobs:          len(r.idx.byID),
		Sessions:      len(r.idx.bySession),
		Unowned:       len(r.idx.unowned),
		History:       r.historyEntries(),
		Observers:     len(r.observers),
		Causes:        len(r.life.causes),
		Crashed:       len(r.life.crashed),
		Registrations: len(r.regs),
		Layers:        len(r.layers),
		Controllers:   len(r.controllers),
		AgentMounts:   r.agentMounts,
	}
}

// Footprint returns the registry's table sizes, taken in one message (so after
// every message already sent to the registry). It is a diagnostic for leak checks.
func (c *Client) Footprint(ctx context.Context) (Footprint, error) {
	reply := make(chan Footprint, 1)
	c.root.Send(c.pid, &footprintReq{reply: reply})
	select {
	case f := <-reply:
		return f, nil
	case <-c.stopped:
		return Footprint{}, stoppedErr()
	case <-ctx.Done():
		return Footprint{}, context.Cause(ctx)
	}
}

func (r *registryActor) historyEntries() int {
	n := len(r.idx.aged.q) + len(r.idx.unownedHist.q)
	for _, o := range r.owners {
		n += len(o.hist.q)
	}
	return n
}
