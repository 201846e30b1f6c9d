package registry

import (
	"slices"
	"time"

	"github.com/troupe-rt/troupe/messages"
)

// Retention bounds the settled job history (issue 15), opt-in. The zero value keeps
// SPEC's semantics: a settled record stays until its owner incarnation is torn down
// (an unowned one until the service is disposed).
//
// With a bound, a settled record is evicted — gone from every table, as if it had
// never been registered — once it is beyond the bound; a live job is never evicted.
// job_output, job_kill, job_list and every other lookup of an evicted id answer as
// for an unknown id (code job/not-found, "unknown job <id>"). Ids are never reused.
// An eviction changes its owner's set of jobs, so onJobsChanged fires for it.
//
// Memory is then O(live + retained): at most PerOwner settled records per owner
// (plus O(1) per owner), and with MaxAge, O(what settled within MaxAge).
type Retention struct {
	// PerOwner, when positive, keeps at most this many settled records per owner
	// incarnation, and as many unowned ones (one shared bucket, like admission's):
	// the settlement that makes it PerOwner+1 evicts the one settled first. Zero: no
	// count bound. Negative is invalid.
	PerOwner int
	// MaxAge, when positive, evicts a settled record once its finishedAt is MaxAge
	// old by the registry's clock (Config.Now: an injected clock makes it
	// deterministic). There is no timer: expired records are swept, in settlement
	// order, whenever the registry commits a settlement or looks a job up (get,
	// list, read, kill, wait, record, observe), so an expired record is never
	// answered. Zero: no age bound. It must be zero or at least a millisecond (the
	// clock's resolution).
	MaxAge time.Duration
}

// Validate checks a Retention: code job/invalid-config on a bad bound.
func (r Retention) Validate() error {
	if r.PerOwner < 0 {
		return messages.Errorf(messages.CodeInvalidConfig,
			"invalid retention.perOwner: expected zero (unbounded) or a positive integer, got %d", r.PerOwner)
	}
	if r.MaxAge < 0 || (r.MaxAge > 0 && r.MaxAge < time.Millisecond) {
		return messages.Errorf(messages.CodeInvalidConfig,
			"invalid retention.maxAge: expected zero (unbounded) or at least 1ms, got %s", r.MaxAge)
	}
	return nil
}

func (r Retention) bounded() bool { return r.PerOwner > 0 || r.MaxAge > 0 }

// history is a queue of settled records under retention, in settlement order: one
// per owner incarnation, one for the unowned bucket, and the age queue. A record
// evicted through one queue stays in the others as a stale entry (lazy deletion:
// an entry is current while the index still maps its id to it) until it is popped
// or the queue is compacted; n counts the current entries, and a queue is
// compacted as soon as its stale entries outnumber them, so it holds O(n) entries
// and none at all once n is zero.
type history struct {
	q []*record
	n int
}

// current reports whether r is still in the index (not evicted, not removed).
func (x *Index) current(r *record) bool { return x.byID[r.ID] == r }

func (x *Index) historyOf(r *record) *history {
	if r.owner == nil {
		return &x.unownedHist
	}
	return &r.owner.hist
}

// settled enters a record that has just settled into its owner's history and the
// age queue, and evicts what the bounds no longer retain: with PerOwner, the
// owner's oldest settled records beyond it; with MaxAge, every record expired at
// now — swept before r joins, so the settlement that commits r never evicts r.
// It returns the evicted records (valid until the next call). Without a bound it
// does nothing.
func (x *Index) settled(r *record, now int64) []*record {
	if !x.ret.bounded() {
		return nil
	}
	x.evicted = x.evicted[:0]
	x.sweepAged(now)
	h := x.historyOf(r)
	h.q = append(h.q, r)
	h.n++
	if x.ret.MaxAge > 0 {
		x.aged.q = append(x.aged.q, r)
		x.aged.n++
	}
	for x.ret.PerOwner > 0 && h.n > x.ret.PerOwner {
		x.evict(x.pop(h))
	}
	x.compact(h)
	x.compact(&x.aged)
	return x.evicted
}

// sweep evicts every record expired at now (MaxAge) and returns them (valid until
// the next call); nil without an age bound or when none has expired.
func (x *Index) sweep(now int64) []*record {
	if x.ret.MaxAge <= 0 || len(x.aged.q) == 0 {
		return nil
	}
	x.evicted = x.evicted[:0]
	x.sweepAged(now)
	return x.evicted
}

func (x *Index) sweepAged(now int64) {
	if x.ret.MaxAge <= 0 {
		return
	}
	maxAge := x.ret.MaxAge.Milliseconds()
	for len(x.aged.q) > 0 {
		if old := x.aged.q[0]; x.current(old) && now-old.finishedAt < maxAge {
			break
		}
		if old := x.pop(&x.aged); old != nil {
			h := x.historyOf(old)
			x.evict(old)
			x.compact(h)
		}
	}
	x.compact(&x.aged)
}

// pop removes h's first entry and returns it if it is current (nil if stale).
func (x *Index) pop(h *history) *record {
	old := h.q[0]
	h.q[0] = nil
	h.q = h.q[1:]
	if len(h.q) == 0 {
		h.q = nil // a drained queue keeps no backing array
	}
	if !x.current(old) {
		return nil
	}
	return old
}

// compact drops h's stale entries once they outnumber its current ones.
func (x *Index) compact(h *history) {
	if len(h.q)-h.n > len(h.q)/2 {
		h.q = slices.DeleteFunc(h.q, func(r *record) bool { return !x.current(r) })
		if len(h.q) == 0 {
			h.q = nil
		}
	}
}

// forget accounts for the settled records of an incarnation being removed
// (removeOwner): they leave the age queue's count, and its stale entries are
// compacted as above.
func (x *Index) forget(o *ownerEntry) {
	if x.ret.MaxAge <= 0 {
		return
	}
	for _, r := range o.records {
		if r.status.Terminal() {
			x.aged.n--
		}
	}
}

// evict deletes one settled record from every table the index keeps: the id map
// and its incarnation's list (or the unowned list); an incarnation left without
// records leaves its session's list.
func (x *Index) evict(r *record) {
	if r == nil {
		return
	}
	delete(x.byID, r.ID)
	x.evicted = append(x.evicted, r)
	x.historyOf(r).n--
	if x.ret.MaxAge > 0 {
		x.aged.n--
	}
	if r.owner == nil {
		x.unowned = removeSeq(x.unowned, r)
		return
	}
	if r.owner.records = removeSeq(r.owner.records, r); len(r.owner.records) == 0 {
		x.dropIncarnation(r.owner)
	}
}

// removeSeq removes r from l, a list in registration (seq) order, found by binary
// search. The removed slot is cleared so the backing array holds no stale pointer.
func removeSeq(l []*record, r *record) []*record {
	i, ok := slices.BinarySearchFunc(l, r.seq, func(e *record, seq uint64) int {
		switch {
		case e.seq < seq:
			return -1
		case e.seq > seq:
			return 1
		}
		return 0
	})
	if !ok {
		return l
	}
	if i == 0 {
		l[0] = nil
		return l[1:]
	}
	return slices.Delete(l, i, i+1) // clears the vacated tail slot
}

// sweep applies the MaxAge bound before a lookup, so that an expired record is
// never answered: the owners whose records it evicted are told (onJobsChanged).
func (r *registryActor) sweep() {
	if r.idx.ret.MaxAge <= 0 {
		return
	}
	r.announceEvicted(r.idx.sweep(r.cfg.Now()), nil, false)
}

// announceEvicted fires onJobsChanged once for each owner (the unowned bucket
// included) that lost records, except skip when skipping (the settlement's own
// owner, told right after by the commit).
func (r *registryActor) announceEvicted(evicted []*record, skip *ownerEntry, skipping bool) {
	if len(evicted) == 0 {
		return
	}
	var told []*ownerEntry
	unowned := false
	for _, e := range evicted {
		o := e.owner
		switch {
		case skipping && o == skip:
		case o == nil:
			if !unowned {
				unowned = true
				r.fireChanged(nil)
			}
		case !slices.Contains(told, o):
			told = append(told, o)
			r.fireChanged(o)
		}
	}
	clear(evicted) // the scratch list keeps no evicted record alive
}
