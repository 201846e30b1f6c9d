package registry

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/troupe-rt/troupe/actors/job"
)

// settle marks r settled at finishedAt, as commitSettlement does, and enters it.
func settle(x *Index, r *record, finishedAt, now int64) []string {
	r.status, r.finishedAt = job.Completed, finishedAt
	return ids(x.settled(r, now))
}

func TestRetentionPerOwnerEvictsTheFirstSettledBeyondTheBound(t *testing.T) {
	x := NewIndex()
	x.ret = Retention{PerOwner: 2}
	a := &ownerEntry{key: "owner-1", session: "s1"}
	rs := []*record{rec("a-1", a), rec("a-2", a), rec("a-3", a), rec("a-4", a), rec("u-1", nil), rec("u-2", nil), rec("u-3", nil)}
	for _, r := range rs {
		x.add(r)
	}
	require.Empty(t, settle(x, rs[1], 1, 1)) // a-2 first
	require.Empty(t, settle(x, rs[0], 2, 2))
	require.Equal(t, []string{"a-2"}, settle(x, rs[3], 3, 3), "the third settled evicts the first settled, not the first registered")
	require.Equal(t, []string{"a-1", "a-3", "a-4"}, ids(x.sessionRecords("s1")), "a live job is never evicted")
	require.Equal(t, []string{"a-1", "a-3", "a-4"}, ids(a.records))
	require.Nil(t, x.get("a-2"))
	require.Equal(t, []string{"a-1"}, settle(x, rs[2], 4, 4))
	require.Equal(t, []string{"a-3", "a-4"}, ids(a.records))
	require.Equal(t, 2, a.hist.n)
	require.Len(t, a.hist.q, 2)

	// The unowned bucket is one owner of its own.
	require.Empty(t, settle(x, rs[4], 5, 5))
	require.Empty(t, settle(x, rs[5], 6, 6))
	require.Equal(t, []string{"u-1"}, settle(x, rs[6], 7, 7))
	require.Equal(t, []string{"u-2", "u-3"}, ids(x.unowned))
	require.Equal(t, []string{"a-3", "a-4", "u-2", "u-3"}, ids(x.all()))
	require.Nil(t, x.aged.q, "no age queue without MaxAge")
}

func TestRetentionMaxAgeSweepsInSettlementOrder(t *testing.T) {
	x := NewIndex()
	x.ret = Retention{MaxAge: 10 * time.Millisecond}
	a := &ownerEntry{key: "owner-1", session: "s1"}
	a1, u1, a2 := rec("a-1", a), rec("u-1", nil), rec("a-2", a)
	for _, r := range []*record{a1, u1, a2} {
		x.add(r)
	}
	require.Empty(t, settle(x, a1, 100, 100))
	require.Empty(t, settle(x, u1, 105, 105))
	require.Empty(t, x.sweep(109))
	require.Equal(t, []string{"a-1"}, ids(x.sweep(110)), "expired at exactly MaxAge")
	require.Equal(t, []string{"u-1", "a-2"}, ids(x.list("s1")))
	// A record already expired when it settles is not evicted by its own commit...
	require.Equal(t, []string{"u-1"}, settle(x, a2, 90, 115))
	require.Equal(t, []string{"a-2"}, ids(x.list("s1")), "u-1 expired at 115 too")
	// ... but by the next sweep.
	require.Equal(t, []string{"a-2"}, ids(x.sweep(115)))
	require.Empty(t, x.byID)
	require.Empty(t, x.bySession)
	require.Empty(t, x.unowned)
	require.Empty(t, a.records)
	require.Nil(t, x.aged.q)
	require.Nil(t, x.unownedHist.q)
	require.Zero(t, x.aged.n)
}

func TestRetentionValidate(t *testing.T) {
	require.NoError(t, Retention{}.Validate())
	require.NoError(t, Retention{PerOwner: 1, MaxAge: time.Millisecond}.Validate())
	for _, bad := range []Retention{{PerOwner: -1}, {MaxAge: -time.Second}, {MaxAge: time.Microsecond}} {
		err := bad.Validate()
		require.Error(t, err)
		require.Contains(t, err.Error(), "invalid retention.")
	}
}

// TestRetentionIndexProperty drives the index with random registrations,
// settlements, sweeps and teardowns under random bounds, and checks after every
// step that the bounds hold, that no table keeps an evicted record, that nothing
// live or within the bounds was evicted, and that every queue stays O(retained).
func TestRetentionIndexProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		x := NewIndex()
		x.ret = Retention{
			PerOwner: rapid.IntRange(0, 4).Draw(t, "perOwner"),
			MaxAge:   time.Duration(rapid.IntRange(0, 20).Draw(t, "maxAgeMs")) * time.Millisecond,
		}
		owners := []*ownerEntry{{key: "o-1", session: "s1"}, {key: "o-2", session: "s1"}, {key: "o-3", session: "s2"}}
		removed := map[*ownerEntry]bool{}
		var now int64
		var live []*record
		n := 0
		// settledOf is each owner's (nil: unowned) current settled records in order.
		settledOf := map[*ownerEntry][]*record{}
		check := func() {
			all := x.all()
			require.Len(t, all, len(x.byID))
			byOwner := map[*ownerEntry]int{}
			for _, r := range all {
				if r.status.Terminal() {
					byOwner[r.owner]++
				}
			}
			for o, k := range byOwner {
				if x.ret.PerOwner > 0 {
					require.LessOrEqual(t, k, x.ret.PerOwner, "owner %v", o)
				}
				if x.ret.bounded() {
					require.Equal(t, k, x.historyOf(&record{owner: o}).n)
				}
			}
			for _, h := range append([]*history{&x.unownedHist, &x.aged}, func() []*history {
				var hs []*history
				for _, o := range owners {
					if !removed[o] {
						hs = append(hs, &o.hist)
					}
				}
				return hs
			}()...) {
				require.LessOrEqual(t, len(h.q), 2*h.n, "a queue holds O(current) entries")
			}
			for _, r := range live {
				require.Same(t, r, x.get(r.ID), "a live job is never evicted")
			}
			// Every list holds exactly the current records.
			count := len(x.unowned)
			for s, l := range x.bySession {
				require.NotEmpty(t, l)
				for _, o := range l {
					require.NotEmpty(t, o.records, "an incarnation in its session's list has records")
					require.Equal(t, s, o.session)
				}
				count += len(x.sessionRecords(s))
			}
			require.Equal(t, len(x.byID), count)
			for _, o := range owners {
				for _, r := range o.records {
					require.Same(t, r, x.get(r.ID))
				}
			}
		}
		t.Repeat(map[string]func(*rapid.T){
			"add": func(t *rapid.T) {
				i := rapid.IntRange(-1, len(owners)-1).Draw(t, "owner")
				var o *ownerEntry
				if i >= 0 {
					if o = owners[i]; removed[o] {
						t.Skip("torn down")
					}
				}
				n++
				r := rec("j-"+strconv.Itoa(n), o)
				x.add(r)
				live = append(live, r)
			},
			"settle": func(t *rapid.T) {
				if len(live) == 0 {
					t.Skip("none live")
				}
				i := rapid.IntRange(0, len(live)-1).Draw(t, "job")
				r := live[i]
				live = slices.Delete(live, i, i+1)
				now += int64(rapid.IntRange(0, 8).Draw(t, "elapsed"))
				evicted := settle(x, r, now, now)
				require.NotContains(t, evicted, r.ID)
				for _, id := range evicted {
					require.Nil(t, x.get(id))
				}
				h := settledOf[r.owner]
				h = append(h, r)
				if k := x.ret.PerOwner; k > 0 && len(h) > k {
					// The count bound evicts the first settled ones that are still current.
					for _, old := range h[:len(h)-k] {
						require.Nil(t, x.get(old.ID))
					}
					h = h[len(h)-k:]
				}
				settledOf[r.owner] = h
				clear(x.evicted)
			},
			"sweep": func(t *rapid.T) {
				now += int64(rapid.IntRange(0, 8).Draw(t, "elapsed"))
				x.sweep(now)
				if x.ret.MaxAge > 0 {
					for _, r := range x.byID {
						if r.status.Terminal() {
							require.Less(t, now-r.finishedAt, x.ret.MaxAge.Milliseconds(), "%s expired but kept", r.ID)
						}
					}
				}
				clear(x.evicted)
			},
			"removeOwner": func(t *rapid.T) {
				o := rapid.SampledFrom(owners).Draw(t, "owner")
				for _, r := range o.records {
					if !r.status.Terminal() {
						t.Skip("teardown removes an owner once its jobs settled")
					}
				}
				x.removeOwner(o)
				removed[o] = true
				delete(settledOf, o)
			},
			"": func(t *rapid.T) { check() },
		})
		// Once every job has settled and every incarnation has gone, a sweep past
		// every age leaves nothing in any queue.
		for _, r := range live {
			now++
			settle(x, r, now, now)
		}
		live = nil
		for _, o := range owners {
			if !removed[o] {
				x.removeOwner(o)
				removed[o] = true
			}
		}
		check()
		require.Empty(t, x.bySession)
		x.sweep(now + 1_000_000)
		clear(x.evicted)
		check()
		require.Zero(t, x.aged.n)
		if x.ret.MaxAge > 0 {
			require.Empty(t, x.byID, "past every age, nothing is retained")
			require.Nil(t, x.aged.q, "a queue of stale entries only is compacted away")
			require.Nil(t, x.unownedHist.q)
		}
	})
}
