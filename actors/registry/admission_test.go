package registry

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"pgregory.net/rapid"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestAdmissionBuckets(t *testing.T) {
	type op struct {
		take     bool // else release
		owner    string
		inFlight int // InFlight(owner) afterwards
		full     bool
	}
	cases := []struct {
		name  string
		limit int
		ops   []op
	}{
		{
			name:  "fill to the limit, release one, take again",
			limit: 2,
			ops: []op{
				{true, "a", 1, false},
				{true, "a", 2, true},
				{false, "a", 1, false},
				{true, "a", 2, true},
				{false, "a", 1, false},
				{false, "a", 0, false},
			},
		},
		{
			name:  "limit 1",
			limit: 1,
			ops: []op{
				{true, "a", 1, true},
				{false, "a", 0, false},
				{true, "a", 1, true},
			},
		},
		{
			name:  "owners have separate buckets",
			limit: 1,
			ops: []op{
				{true, "a", 1, true},
				{true, "b", 1, true},
				{true, "", 1, true}, // the shared unowned bucket
				{false, "b", 0, false},
				{false, "", 0, false},
			},
		},
		{
			name:  "same session, different incarnation keys: separate buckets",
			limit: 2,
			ops: []op{
				{true, "owner-1", 1, false},
				{true, "owner-1", 2, true},
				{true, "owner-2", 1, false},
			},
		},
		{
			name:  "release of an empty bucket stays at zero",
			limit: 3,
			ops: []op{
				{false, "a", 0, false},
				{true, "a", 1, false},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAdmission(tc.limit)
			require.Equal(t, tc.limit, a.Limit())
			for i, o := range tc.ops {
				if o.take {
					require.False(t, a.Full(o.owner), "op %d: the caller checks Full before Take", i)
					a.Take(o.owner)
				} else {
					a.Release(o.owner)
				}
				require.Equal(t, o.inFlight, a.InFlight(o.owner), "op %d InFlight(%q)", i, o.owner)
				require.Equal(t, o.full, a.Full(o.owner), "op %d Full(%q)", i, o.owner)
			}
		})
	}
}

func TestAdmissionReleaseForgetsEmptyBuckets(t *testing.T) {
	a := NewAdmission(2)
	for i := range 100 {
		o := "owner-" + strconv.Itoa(i)
		a.Take(o)
		a.Release(o)
	}
	require.Empty(t, a.buckets, "an owner with no slot in flight keeps no bucket")
}

func TestAdmissionIDs(t *testing.T) {
	a := NewAdmission(10)
	for _, want := range []string{"bash-1", "bash-2", "subagent-1", "bash-3", "workflow-1", "subagent-2", "pty-send-1"} {
		kind := want[:strings.LastIndexByte(want, '-')]
		require.Equal(t, want, a.NextID(kind))
	}
	for range 96 {
		a.NextID("pty-send")
	}
	require.Equal(t, "pty-send-98", a.NextID("pty-send"))
	require.Equal(t, "pty-send-99", a.NextID("pty-send"))
	require.Equal(t, "pty-send-100", a.NextID("pty-send"))

	// Ids do not depend on slots: releasing or a full bucket changes no counter.
	a.Take("")
	a.Release("")
	require.Equal(t, "bash-4", a.NextID("bash"))

	// A recreated registry starts its counters again at 1 (SPEC §1.3 rule 28).
	require.Equal(t, "bash-1", NewAdmission(10).NextID("bash"))
}

// admissionModel is the dumb reference: a map of owner → live job ids, and every id
// ever issued.
type admissionModel struct {
	limit  int
	live   map[string][]string // owner → ids holding a slot
	counts map[string]int      // kind → ids issued
	issued map[string]bool
}

var (
	modelOwners = []string{"", "owner-1", "owner-2", "owner-3"}
	modelKinds  = []string{"bash", "subagent", "pty-send", "a", "a-1"} // "a-1-1" must not collide
)

func TestAdmissionMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.IntRange(1, 4).Draw(t, "limit")
		a := NewAdmission(limit)
		m := &admissionModel{limit: limit, live: map[string][]string{}, counts: map[string]int{}, issued: map[string]bool{}}

		t.Repeat(map[string]func(*rapid.T){
			"start": func(t *rapid.T) {
				owner := rapid.SampledFrom(modelOwners).Draw(t, "owner")
				kind := rapid.SampledFrom(modelKinds).Draw(t, "kind")
				full := len(m.live[owner]) >= m.limit
				require.Equal(t, full, a.Full(owner), "Full(%q)", owner)
				if full {
					return // capacity rejection: no slot, no id
				}
				a.Take(owner)
				id := a.NextID(kind)
				m.counts[kind]++
				require.Equal(t, fmt.Sprintf("%s-%d", kind, m.counts[kind]), id)
				require.False(t, m.issued[id], "id %s issued twice", id)
				m.issued[id] = true
				m.live[owner] = append(m.live[owner], id)
			},
			"settle": func(t *rapid.T) {
				var owners []string
				for _, o := range modelOwners {
					if len(m.live[o]) > 0 {
						owners = append(owners, o)
					}
				}
				if len(owners) == 0 {
					t.Skip("nothing in flight")
				}
				owner := rapid.SampledFrom(owners).Draw(t, "owner")
				i := rapid.IntRange(0, len(m.live[owner])-1).Draw(t, "job")
				a.Release(owner)
				m.live[owner] = append(m.live[owner][:i], m.live[owner][i+1:]...)
			},
			"": func(t *rapid.T) {
				for _, o := range modelOwners {
					n := len(m.live[o])
					require.LessOrEqual(t, a.InFlight(o), limit, "owner %q over the limit", o)
					require.Equal(t, n, a.InFlight(o), "InFlight(%q)", o)
					require.Equal(t, n >= limit, a.Full(o), "Full(%q)", o)
				}
			},
		})
	})
}

// An id costs one allocation, the string itself, at any counter value.
func TestNextIDAllocatesOnlyTheID(t *testing.T) {
	a := NewAdmission(10)
	for range 1000 {
		a.NextID("bash")
	}
	require.Equal(t, 1.0, testing.AllocsPerRun(100, func() { a.NextID("bash") }))
	require.Equal(t, "bash-1102", a.NextID("bash")) // AllocsPerRun calls it 101 times
}
