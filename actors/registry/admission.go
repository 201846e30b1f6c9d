package registry

import "strconv"

// Admission is the pure core of admission and id allocation (SPEC §2.3, §2.4): a
// bucket of running+stopping jobs per exact owner incarnation plus one shared
// unowned bucket, and a counter per kind. No goroutines, no clock.
type Admission struct {
	limit    int
	buckets  map[string]int // owner incarnation key ("" = unowned) → jobs holding a slot
	counters map[string]uint64
}

// NewAdmission returns an empty admission core with the per-owner limit.
func NewAdmission(limit int) *Admission {
	return &Admission{limit: limit, buckets: map[string]int{}, counters: map[string]uint64{}}
}

// Limit returns the per-owner limit.
func (a *Admission) Limit() int { return a.limit }

// Full reports whether owner's bucket is at or above the limit.
func (a *Admission) Full(owner string) bool { return a.buckets[owner] >= a.limit }

// InFlight returns how many slots owner holds.
func (a *Admission) InFlight(owner string) int { return a.buckets[owner] }

// Take occupies a slot in owner's bucket. Callers check Full first.
func (a *Admission) Take(owner string) { a.buckets[owner]++ }

// Release frees one of owner's slots. The caller releases each job's slot once
// (the record's slot flag guards that).
func (a *Admission) Release(owner string) {
	if n := a.buckets[owner]; n > 1 {
		a.buckets[owner] = n - 1
	} else {
		delete(a.buckets, owner)
	}
}

// NextID allocates the next id of kind: <kind>-N, N from 1, never reused by this core.
// It is called only after the producer's Run succeeded (Rev A).
func (a *Admission) NextID(kind string) string {
	n := a.counters[kind] + 1
	a.counters[kind] = n
	// One allocation, the id itself (kind + "-" + FormatUint was two past 99).
	var buf [64]byte
	b := append(append(buf[:0], kind...), '-')
	return string(strconv.AppendUint(b, n, 10))
}
