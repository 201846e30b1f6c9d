package registry

import (
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/troupe-rt/troupe/actors/job"
)

func rec(id string, o *ownerEntry) *record {
	return &record{Meta: job.Meta{ID: id}, owner: o}
}

func ids(rs []*record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func TestIndexListMergesOwnAndUnownedInRegistrationOrder(t *testing.T) {
	x := NewIndex()
	a := &ownerEntry{key: "owner-1", session: "s1"}
	b := &ownerEntry{key: "owner-2", session: "s2"}
	a2 := &ownerEntry{key: "owner-3", session: "s1"} // a same-session replacement of a
	for _, r := range []*record{
		rec("u-1", nil),
		rec("a-1", a),
		rec("b-1", b),
		rec("u-2", nil),
		rec("a-2", a),
		rec("a2-1", a2),
		rec("a-3", a),
		rec("u-3", nil),
	} {
		x.add(r)
	}

	cases := []struct {
		session string
		want    []string
	}{
		// Listing is keyed by session: both incarnations of s1 show.
		{"s1", []string{"u-1", "a-1", "u-2", "a-2", "a2-1", "a-3", "u-3"}},
		{"s2", []string{"u-1", "b-1", "u-2", "u-3"}},
		{"", []string{"u-1", "u-2", "u-3"}}, // no agent: unowned only
		{"s9", []string{"u-1", "u-2", "u-3"}},
	}
	for _, tc := range cases {
		t.Run("session="+tc.session, func(t *testing.T) {
			require.Equal(t, tc.want, ids(x.list(tc.session)))
		})
	}
	require.Equal(t, []string{"u-1", "a-1", "b-1", "u-2", "a-2", "a2-1", "a-3", "u-3"}, ids(x.all()))
	require.Equal(t, []string{"a-1", "a-2", "a-3"}, ids(a.records), "per-incarnation list")
	require.Equal(t, []string{"a2-1"}, ids(a2.records))

	for _, id := range []string{"u-1", "a-2", "a2-1"} {
		require.Equal(t, id, x.get(id).ID)
	}
	require.Nil(t, x.get("nope-1"))
}

func TestIndexListOnlyUnownedOrOnlyOwn(t *testing.T) {
	x := NewIndex()
	require.Empty(t, x.list("s1"))
	require.Empty(t, x.list(""))
	require.Empty(t, x.all())

	a := &ownerEntry{key: "k", session: "s1"}
	x.add(rec("a-1", a))
	x.add(rec("a-2", a))
	require.Equal(t, []string{"a-1", "a-2"}, ids(x.list("s1")))
	require.Empty(t, x.list(""))

	y := NewIndex()
	y.add(rec("u-1", nil))
	y.add(rec("u-2", nil))
	require.Equal(t, []string{"u-1", "u-2"}, ids(y.list("s1")))
}

func TestIndexRemoveOwnerRemovesExactlyThatIncarnation(t *testing.T) {
	x := NewIndex()
	old := &ownerEntry{key: "owner-1", session: "s1"}
	cur := &ownerEntry{key: "owner-2", session: "s1"}
	other := &ownerEntry{key: "owner-3", session: "s2"}
	empty := &ownerEntry{key: "owner-4", session: "s1"}
	x.add(rec("old-1", old))
	x.add(rec("u-1", nil))
	x.add(rec("cur-1", cur))
	x.add(rec("old-2", old))
	x.add(rec("other-1", other))
	x.add(rec("cur-2", cur))

	require.Zero(t, x.removeOwner(empty), "an incarnation without records")
	require.Equal(t, []string{"old-1", "u-1", "cur-1", "old-2", "cur-2"}, ids(x.list("s1")))

	require.Equal(t, 2, x.removeOwner(old))
	require.Nil(t, x.get("old-1"))
	require.Nil(t, x.get("old-2"))
	require.Empty(t, old.records)
	require.Equal(t, []string{"u-1", "cur-1", "cur-2"}, ids(x.list("s1")), "the replacement keeps its records")
	require.Equal(t, []*ownerEntry{cur}, x.bySession["s1"], "a removed incarnation leaves its session's list")
	require.Equal(t, []string{"cur-1", "cur-2"}, ids(cur.records))
	require.Equal(t, []string{"u-1", "other-1"}, ids(x.list("s2")))
	require.Equal(t, []string{"u-1", "cur-1", "other-1", "cur-2"}, ids(x.all()))

	require.Zero(t, x.removeOwner(old), "removal happens once")

	require.Equal(t, 2, x.removeOwner(cur))
	require.Equal(t, []string{"u-1"}, ids(x.list("s1")), "owner teardown never removes unowned jobs")
	require.NotContains(t, x.bySession, "s1", "an emptied session list is dropped")
	require.Equal(t, []string{"u-1", "other-1"}, ids(x.all()))
	require.Len(t, x.byID, 2)
}

func TestIndexClear(t *testing.T) {
	x := NewIndex()
	a := &ownerEntry{key: "k", session: "s1"}
	x.add(rec("a-1", a))
	x.add(rec("u-1", nil))
	x.clear()
	require.Empty(t, x.all())
	require.Empty(t, x.list("s1"))
	require.Nil(t, x.get("a-1"))

	// Registration order continues across a clear.
	x.add(rec("u-2", nil))
	x.add(rec("a-2", &ownerEntry{key: "k2", session: "s1"}))
	require.Equal(t, []string{"u-2", "a-2"}, ids(x.list("s1")))
}

// TestIndexMatchesModel checks the index against a flat list filtered on every query.
func TestIndexMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		x := NewIndex()
		owners := []*ownerEntry{
			{key: "o1", session: "s1"},
			{key: "o2", session: "s1"}, // same session as o1
			{key: "o3", session: "s2"},
			{key: "o4", session: "s3"},
		}
		var model []*record // registration order, removed records dropped
		next := 0

		t.Repeat(map[string]func(*rapid.T){
			"add": func(t *rapid.T) {
				i := rapid.IntRange(-1, len(owners)-1).Draw(t, "owner") // -1: unowned
				var o *ownerEntry
				if i >= 0 {
					o = owners[i]
				}
				next++
				r := rec("job-"+strconv.Itoa(next), o)
				x.add(r)
				model = append(model, r)
			},
			"removeOwner": func(t *rapid.T) {
				o := rapid.SampledFrom(owners).Draw(t, "owner")
				n := 0
				model = slices.DeleteFunc(model, func(r *record) bool {
					if r.owner == o {
						n++
						return true
					}
					return false
				})
				require.Equal(t, n, x.removeOwner(o))
			},
			"": func(t *rapid.T) {
				require.Equal(t, ids(model), ids(x.all()))
				for _, s := range []string{"", "s1", "s2", "s3", "s4"} {
					var want []*record
					for _, r := range model {
						if r.owner == nil || (s != "" && r.owner.session == s) {
							want = append(want, r)
						}
					}
					require.Equal(t, ids(want), ids(x.list(s)), "list(%q)", s)
				}
				for _, r := range model {
					require.Same(t, r, x.get(r.ID))
				}
				require.Len(t, x.byID, len(model))
			},
		})
	})
}
