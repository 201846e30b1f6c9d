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
	reported   bool
	slot       bool // holds an admission slot
	hasDetail  bool
	stream     bool // the producer has ReadOutput
	detail     string
	finishedAt int64
	output     string
	readOutput func() (string, error) // live: nil once toHooks handed it to the job actor
	out        *job.Record            // the non-consuming output record, if the spec declared one
}

func (r *record) live() bool { return r.pid != nil }

func (r *record) snapshot() *messages.JobSnapshot {
	var detail *string
	var finished *int64
	if r.hasDetail {
		d := r.detail
		detail = &d
	}
	if r.status.Terminal() {
		f := r.finishedAt
		finished = &f
	}
	return r.Snapshot(r.status, detail, finished, r.reported)
}

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

// Index is the pure core of lookup and listing: id → record, and per-session and
// unowned lists in registration order, so that no query scans every record.
type Index struct {
	seq       uint64
	byID      map[string]*record
	bySession map[string][]*record
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
	return &Index{byID: map[string]*record{}, bySession: map[string][]*record{}}
}

func (x *Index) add(r *record) {
	x.seq++
	r.seq = x.seq
	x.byID[r.ID] = r
	if r.owner == nil {
		x.unowned = append(x.unowned, r)
		return
	}
	x.bySession[r.owner.session] = append(x.bySession[r.owner.session], r)
	r.owner.records = append(r.owner.records, r)
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
	list := x.bySession[o.session][:0]
	for _, r := range x.bySession[o.session] {
		if r.owner != o {
			list = append(list, r)
		}
	}
	if len(list) == 0 {
		delete(x.bySession, o.session)
	} else {
		x.bySession[o.session] = list
	}
	o.records = nil
	o.hist = history{}
	x.compact(&x.aged) // its entries there are now stale
	return n
}

// list returns the jobs visible to a caller session (its own and the unowned ones)
// in registration order: a merge of two ordered lists.
func (x *Index) list(session string) []*record {
	var own []*record
	if session != "" {
		own = x.bySession[session]
	}
	out := make([]*record, 0, len(own)+len(x.unowned))
	i, j := 0, 0
	for i < len(own) || j < len(x.unowned) {
		if j == len(x.unowned) || (i < len(own) && own[i].seq < x.unowned[j].seq) {
			out = append(out, own[i])
			i++
		} else {
			out = append(out, x.unowned[j])
			j++
		}
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
	x.bySession = map[string][]*record{}
	x.unowned = nil
	x.unownedHist = history{}
	x.aged, x.evicted = history{}, nil
}
