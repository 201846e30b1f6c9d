package registry

import (
	"cmp"
	"slices"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/scope"
)

// record is the registry's row for one job. While the job is live, pid routes to
// its actor and status/reported mirror what the actor committed through
// StopRequested; once settled, the row alone answers for the job.
type record struct {
	job.Meta
	seq        uint64
	owner      *ownerEntry // nil: unowned
	pid        *actor.PID  // live job actor; nil once settled
	status     job.Status
	flags      recordFlags // reported, slot, hasDetail, stream, readInline (record.go)
	detail     string
	finishedAt int64
	output     string
	readOutput func() (string, error) // live: nil once toHooks handed it to the job actor
	out        *job.Record            // the non-consuming output record, if the spec declared one
}

func (r *record) live() bool { return r.pid != nil }

// snapshot returns a fresh snapshot of the record, in one allocation: a settled
// one (or one with a detail) is allocated together with the copies of its finish
// time and detail that its presence-tracked fields point to (there were up to
// three allocations; a kill → settled takes two settled snapshots, the waiter's
// and the listener's). The interior pointers keep the whole box alive while any
// of them is held.
func (r *record) snapshot() *messages.JobSnapshot {
	var s *messages.JobSnapshot
	var detail *string
	var finished *int64
	switch {
	case r.hasDetail():
		b := &detailSnapshot{detail: r.detail, finished: r.finishedAt}
		s, detail, finished = &b.snap, &b.detail, &b.finished
	case r.status.Terminal():
		b := &settledSnapshot{finished: r.finishedAt}
		s, finished = &b.snap, &b.finished
	default:
		s = &messages.JobSnapshot{}
	}
	if !r.status.Terminal() {
		finished = nil
	}
	r.Fill(s, r.status, detail, finished, r.reported())
	return s
}

// settledSnapshot and detailSnapshot are a snapshot with the values its
// FinishedAt (and Detail) point to (160 and 176 B size classes; a snapshot alone
// is 144 B).
type (
	settledSnapshot struct {
		snap     messages.JobSnapshot
		finished int64
	}
	detailSnapshot struct {
		snap     messages.JobSnapshot
		detail   string
		finished int64
	}
)

func (r *record) ownerKey() string {
	if r.owner == nil {
		return ""
	}
	return r.owner.key
}

// ownerEntry is one agent incarnation that has started jobs.
type ownerEntry struct {
	key      string // the owner actor's PID id: unique per incarnation
	pid      *actor.PID
	session  string
	chain    []scope.ID
	cleanup  *scope.Effect // the jobs.ownerCleanup() effect in the owner's scope
	records  []*record     // registration order
	hist     history       // its settled records under a Retention bound, settlement order
	tornDown bool
	teardown *teardown // in progress
}

type teardown struct {
	pending map[string]bool // live job ids not yet settled
	replies []chan<- struct{}
}

// Index is the pure core of lookup and listing: id → record, per-incarnation and
// unowned lists in registration order, and per session its incarnations that have
// records, so that no query scans every record. A session's records are its
// incarnations' lists merged by seq (a session has one incarnation but while a new
// one replaces an old one): a per-session list of records beside the incarnation's
// was 12 B more per record.
type Index struct {
	seq       uint64
	byID      map[string]*record
	bySession map[string][]*ownerEntry // only incarnations with records; no empty list
	unowned   []*record

	// Retention (retention.go): the bounds, the unowned bucket's history, every
	// retained record in settlement order when MaxAge is set, and the scratch list
	// of what one call evicted.
	ret         Retention
	unownedHist history
	aged        history
	evicted     []*record
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{byID: map[string]*record{}, bySession: map[string][]*ownerEntry{}}
}

func (x *Index) add(r *record) {
	x.seq++
	r.seq = x.seq
	x.byID[r.ID] = r
	if r.owner == nil {
		x.unowned = append(x.unowned, r)
		return
	}
	if o := r.owner; len(o.records) == 0 {
		x.bySession[o.session] = append(x.bySession[o.session], o)
	}
	r.owner.records = append(r.owner.records, r)
}

// dropIncarnation takes o (whose records are gone) out of its session's list.
func (x *Index) dropIncarnation(o *ownerEntry) {
	l := slices.DeleteFunc(x.bySession[o.session], func(e *ownerEntry) bool { return e == o })
	if len(l) == 0 {
		delete(x.bySession, o.session)
	} else {
		x.bySession[o.session] = l
	}
}

// sessionRecords returns a session's records in registration order.
func (x *Index) sessionRecords(session string) []*record {
	return x.merge(x.bySession[session], nil)
}

func (x *Index) get(id string) *record { return x.byID[id] }

// removeOwner deletes every record of one incarnation and reports how many it had.
func (x *Index) removeOwner(o *ownerEntry) int {
	n := len(o.records)
	if n == 0 {
		return 0
	}
	x.forget(o)
	for _, r := range o.records {
		delete(x.byID, r.ID)
	}
	x.dropIncarnation(o)
	o.records = nil
	o.hist = history{}
	x.compact(&x.aged) // its entries there are now stale
	return n
}

// list returns the jobs visible to a caller session (its own and the unowned ones)
// in registration order: a merge of ordered lists.
func (x *Index) list(session string) []*record {
	var own []*ownerEntry
	if session != "" {
		own = x.bySession[session]
	}
	return x.merge(own, x.unowned)
}

// merge returns the records of incarnations own and of extra (each list in
// registration order) in registration order.
func (x *Index) merge(own []*ownerEntry, extra []*record) []*record {
	if len(own) == 0 {
		return append(make([]*record, 0, len(extra)), extra...)
	}
	if len(own) == 1 && len(extra) == 0 {
		return append(make([]*record, 0, len(own[0].records)), own[0].records...)
	}
	lists := make([][]*record, 0, len(own)+1)
	n := len(extra)
	for _, o := range own {
		lists = append(lists, o.records)
		n += len(o.records)
	}
	if len(extra) > 0 {
		lists = append(lists, extra)
	}
	out := make([]*record, 0, n)
	for len(out) < n {
		k := -1
		for i, l := range lists {
			if len(l) > 0 && (k < 0 || l[0].seq < lists[k][0].seq) {
				k = i
			}
		}
		out = append(out, lists[k][0])
		lists[k] = lists[k][1:]
	}
	return out
}

// all returns every record in registration order.
func (x *Index) all() []*record {
	out := make([]*record, 0, len(x.byID))
	for _, r := range x.byID {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *record) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

func (x *Index) clear() {
	x.byID = map[string]*record{}
	x.bySession = map[string][]*ownerEntry{}
	x.unowned = nil
	x.unownedHist = history{}
	x.aged, x.evicted = history{}, nil
}
