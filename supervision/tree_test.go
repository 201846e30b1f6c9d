package supervision_test

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/supervision"
)

var (
	registry = supervision.Ref{Kind: supervision.KindRegistry, ID: "registry"}
	dir      = supervision.Ref{Kind: supervision.KindDirectory, ID: "directory"}
	owner1   = supervision.Ref{Kind: supervision.KindOwner, ID: "owner-1"}
	job1     = supervision.Ref{Kind: supervision.KindJob, ID: "bash-1"}
	job2     = supervision.Ref{Kind: supervision.KindJob, ID: "bash-2"}
	act1     = supervision.Ref{Kind: supervision.KindActivation, ID: "activation-c-1"}
)

func spawned(node, parent supervision.Ref) supervision.Event {
	return supervision.Event{Kind: supervision.Spawned, Node: node, Parent: parent, Actor: node.ID}
}

func stopped(node supervision.Ref, cause supervision.Cause) supervision.Event {
	return supervision.Event{Kind: supervision.Stopped, Node: node, Cause: cause}
}

func settled(node supervision.Ref, status string, cause supervision.Cause) supervision.Event {
	return supervision.Event{Kind: supervision.Settled, Node: node, Status: status, Cause: cause}
}

// applyAll numbers events from the tree's next seq and applies them, failing on the
// first refusal.
func applyAll(t *testing.T, tr *supervision.Tree, events ...supervision.Event) {
	t.Helper()
	for _, e := range events {
		e.Seq = tr.Seq() + 1
		require.NoError(t, tr.Apply(e), "%s", e)
	}
}

func refs(s supervision.Snapshot) []string {
	out := make([]string, len(s.Nodes))
	for i, n := range s.Nodes {
		out[i] = n.Ref.String()
	}
	return out
}

func TestTreeApply(t *testing.T) {
	base := []supervision.Event{spawned(registry, supervision.Root), spawned(job1, registry)}
	cases := []struct {
		name  string
		event supervision.Event
		code  messages.Code // "" accepted
		after []string      // the snapshot's nodes when accepted
	}{
		{"spawn under a live parent", spawned(job2, registry), "", []string{"registry/registry", "job/bash-1", "job/bash-2"}},
		{"spawn at the root", spawned(owner1, supervision.Root), "", []string{"registry/registry", "job/bash-1", "owner/owner-1"}},
		{"spawn under an unknown parent", spawned(act1, dir), supervision.CodeUnknownParent, nil},
		{"spawn under itself", spawned(act1, act1), supervision.CodeUnknownParent, nil},
		{"duplicate spawn", spawned(job1, registry), supervision.CodeDuplicate, nil},
		{"no node", spawned(supervision.Root, registry), supervision.CodeBadEvent, nil},
		{"no id", spawned(supervision.Ref{Kind: supervision.KindJob}, registry), supervision.CodeBadEvent, nil},
		{"unknown event kind", supervision.Event{Kind: 9, Node: job1}, supervision.CodeBadEvent, nil},
		{"restart", supervision.Event{Kind: supervision.Restarted, Node: job1, Cause: supervision.CausePanic}, "",
			[]string{"registry/registry", "job/bash-1"}},
		{"restart of an unknown node", supervision.Event{Kind: supervision.Restarted, Node: job2}, supervision.CodeUnknownNode, nil},
		{"settle", settled(job1, "completed", supervision.CauseProducer), "", []string{"registry/registry", "job/bash-1"}},
		{"settle without a status", settled(job1, "", supervision.CauseProducer), supervision.CodeBadEvent, nil},
		{"settle as running", settled(job1, supervision.StatusRunning, supervision.CauseProducer), supervision.CodeBadEvent, nil},
		{"settle of an unknown node", settled(job2, "failed", supervision.CausePanic), supervision.CodeUnknownNode, nil},
		{"stop a leaf", stopped(job1, supervision.CauseNone), "", []string{"registry/registry"}},
		{"stop a parent with a live child", stopped(registry, supervision.CauseTeardown), supervision.CodeOrphans, nil},
		{"stop an unknown node", stopped(owner1, supervision.CauseTeardown), supervision.CodeUnknownNode, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := supervision.NewTree()
			applyAll(t, tr, base...)
			before := tr.Snapshot()
			e := c.event
			e.Seq = tr.Seq() + 1
			err := tr.Apply(e)
			if c.code != "" {
				require.Equal(t, c.code, messages.CodeOf(err), "%v", err)
				require.Equal(t, before, tr.Snapshot(), "a refused event changes nothing")
				return
			}
			require.NoError(t, err)
			require.Equal(t, e.Seq, tr.Seq())
			require.Equal(t, c.after, refs(tr.Snapshot()))
		})
	}
}

func TestTreeRefusesOutOfSequence(t *testing.T) {
	tr := supervision.NewTree()
	for _, seq := range []uint64{0, 2, 7} {
		e := spawned(registry, supervision.Root)
		e.Seq = seq
		require.Equal(t, supervision.CodeOutOfSequence, messages.CodeOf(tr.Apply(e)), "seq %d", seq)
	}
	require.Zero(t, tr.Seq())
	require.Zero(t, tr.Len())
}

func TestTreeSettledTwice(t *testing.T) {
	tr := supervision.NewTree()
	applyAll(t, tr, spawned(registry, supervision.Root), spawned(job1, registry),
		settled(job1, "killed", supervision.CauseKill))
	e := settled(job1, "failed", supervision.CausePanic)
	e.Seq = tr.Seq() + 1
	require.Equal(t, supervision.CodeSettledTwice, messages.CodeOf(tr.Apply(e)))
	n, ok := tr.Snapshot().Node(job1)
	require.True(t, ok)
	require.Equal(t, "killed", n.Status)
	require.Equal(t, supervision.CauseKill, n.Cause)
}

// The snapshot is in pre-order, siblings in spawn order; fields come from the events.
func TestTreeSnapshot(t *testing.T) {
	tr := supervision.NewTree()
	applyAll(t, tr,
		spawned(registry, supervision.Root),
		supervision.Event{Kind: supervision.Spawned, Node: owner1, Actor: "owner-1", Session: "alice"},
		spawned(dir, supervision.Root),
		supervision.Event{Kind: supervision.Spawned, Node: job2, Parent: registry, Actor: "registry/bash-2", Session: "alice"},
		spawned(act1, dir),
		spawned(job1, registry),
		supervision.Event{Kind: supervision.Restarted, Node: act1, Cause: supervision.CausePanic, Detail: "boom"},
		supervision.Event{Kind: supervision.Settled, Node: job2, Status: "failed", Cause: supervision.CausePanic, Detail: "Error: x"},
	)
	s := tr.Snapshot()
	require.Equal(t, uint64(8), s.Seq)
	require.Equal(t, []string{"registry/registry", "job/bash-2", "job/bash-1", "owner/owner-1", "directory/directory",
		"activation/activation-c-1"}, refs(s))
	j, _ := s.Node(job2)
	require.Equal(t, supervision.Node{Ref: job2, Parent: registry, Actor: "registry/bash-2", Session: "alice",
		Status: "failed", Cause: supervision.CausePanic, Detail: "Error: x", Spawned: 4}, j)
	a, _ := s.Node(act1)
	require.Equal(t, 1, a.Restarts)
	require.Equal(t, supervision.StatusRunning, a.Status)
	require.Equal(t, []string{"job/bash-2", "job/bash-1"}, refs(supervision.Snapshot{Nodes: s.Children(registry)}))
	require.Len(t, s.Children(supervision.Root), 3)
	require.Equal(t, "seq 8\n"+
		"registry/registry running\n"+
		"  job/bash-2 failed cause=panic session=alice\n"+
		"  job/bash-1 running\n"+
		"owner/owner-1 running session=alice\n"+
		"directory/directory running\n"+
		"  activation/activation-c-1 running restarts=1\n", s.String())
}

func TestTreeOfRefusesBrokenSnapshots(t *testing.T) {
	_, err := supervision.TreeOf(supervision.Snapshot{Nodes: []supervision.Node{{Ref: job1, Parent: registry}}})
	require.Equal(t, supervision.CodeUnknownParent, messages.CodeOf(err))
	_, err = supervision.TreeOf(supervision.Snapshot{Nodes: []supervision.Node{{Ref: registry}, {Ref: registry}}})
	require.Equal(t, supervision.CodeDuplicate, messages.CodeOf(err))
	_, err = supervision.TreeOf(supervision.Snapshot{Nodes: []supervision.Node{{Ref: supervision.Root}}})
	require.Equal(t, supervision.CodeBadEvent, messages.CodeOf(err))
}

// A tree rebuilt from a snapshot counts the children it had: a stop of a parent
// whose child is live is still refused.
func TestTreeOfKeepsChildren(t *testing.T) {
	tr := supervision.NewTree()
	applyAll(t, tr, spawned(registry, supervision.Root), spawned(job1, registry))
	back, err := supervision.TreeOf(tr.Snapshot())
	require.NoError(t, err)
	e := stopped(registry, supervision.CauseTeardown)
	e.Seq = back.Seq() + 1
	require.Equal(t, supervision.CodeOrphans, messages.CodeOf(back.Apply(e)))
	applyAll(t, back, stopped(job1, supervision.CauseNone), stopped(registry, supervision.CauseTeardown))
	require.Zero(t, back.Len())
}

// A top-level node whose actor id is its id (an owner's "owner-N") stores no
// actor id of its own, and still reports it; a child whose actor id is its bare id
// (not its parent's + "/" + id) keeps it, in the tree and in one rebuilt from a
// snapshot (where parents are linked after every node is added).
func TestTreeActorIDs(t *testing.T) {
	tr := supervision.NewTree()
	applyAll(t, tr, spawned(registry, supervision.Root), spawned(owner1, supervision.Root), spawned(job1, registry),
		supervision.Event{Kind: supervision.Spawned, Node: job2, Parent: registry, Actor: "registry/bash-2"})
	want := map[supervision.Ref]string{registry: "registry", owner1: "owner-1", job1: "bash-1", job2: "registry/bash-2"}
	back, err := supervision.TreeOf(tr.Snapshot())
	require.NoError(t, err)
	for _, s := range []supervision.Snapshot{tr.Snapshot(), back.Snapshot()} {
		for ref, actor := range want {
			n, ok := s.Node(ref)
			require.True(t, ok, "%s", ref)
			require.Equal(t, actor, n.Actor, "%s", ref)
		}
	}
}

func TestProtoRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC)
	events := []supervision.Event{
		{Seq: 1, At: at, Kind: supervision.Spawned, Node: job1, Parent: registry, Actor: "registry/bash-1", Session: "alice"},
		{Seq: 2, Kind: supervision.Restarted, Node: act1, Cause: supervision.CausePanic, Detail: "boom"},
		{Seq: 3, At: at, Kind: supervision.Settled, Node: job1, Status: "killed", Cause: supervision.CauseKill, Detail: "signal: SIGTERM"},
		{Seq: 4, At: at, Kind: supervision.Stopped, Node: owner1, Cause: supervision.CauseTeardown},
	}
	for _, e := range events {
		wire, err := proto.Marshal(e.Proto())
		require.NoError(t, err)
		var p messages.LifecycleEvent
		require.NoError(t, proto.Unmarshal(wire, &p))
		back, err := supervision.EventFromProto(&p)
		require.NoError(t, err)
		require.Equal(t, e, back)
	}
	tr := supervision.NewTree()
	applyAll(t, tr, spawned(registry, supervision.Root),
		supervision.Event{Kind: supervision.Spawned, Node: job1, Parent: registry, Actor: "registry/bash-1", Session: "alice"},
		supervision.Event{Kind: supervision.Restarted, Node: job1},
		settled(job1, "failed", supervision.CausePanic))
	snap := tr.Snapshot()
	wire, err := proto.Marshal(snap.Proto())
	require.NoError(t, err)
	var p messages.TreeSnapshot
	require.NoError(t, proto.Unmarshal(wire, &p))
	back, err := supervision.SnapshotFromProto(&p)
	require.NoError(t, err)
	require.Equal(t, snap, back)
}

func TestFromProtoRefusesUnknownEnums(t *testing.T) {
	for _, p := range []*messages.LifecycleEvent{
		{Kind: 0, NodeKind: "job", NodeId: "bash-1"},
		{Kind: 5, NodeKind: "job", NodeId: "bash-1"},
		{Kind: messages.LifecycleEventKind_LIFECYCLE_EVENT_KIND_STOPPED, Cause: 5},
		{Kind: messages.LifecycleEventKind_LIFECYCLE_EVENT_KIND_STOPPED, Cause: 256},
	} {
		_, err := supervision.EventFromProto(p)
		require.Equal(t, supervision.CodeBadEvent, messages.CodeOf(err), "%v", p)
	}
	_, err := supervision.SnapshotFromProto(&messages.TreeSnapshot{Nodes: []*messages.TreeNode{{Kind: "job", Id: "x", Cause: 9}}})
	require.Equal(t, supervision.CodeBadEvent, messages.CodeOf(err))
}

// The tree against a naive model that recomputes everything from the list of
// accepted events: on any event sequence, both accept and refuse alike (with the
// same code), and their snapshots agree. Folding the accepted events after any
// snapshot into TreeOf(snapshot) gives the final snapshot, over the wire as well.
func TestTreeMatchesNaiveModel(t *testing.T) {
	kinds := []supervision.Kind{"a", "b"}
	ids := []string{"1", "2", "3"}
	rapid.Check(t, func(rt *rapid.T) {
		ref := rapid.Custom(func(t *rapid.T) supervision.Ref {
			if rapid.IntRange(0, 19).Draw(t, "rootish") == 0 {
				return supervision.Root
			}
			return supervision.Ref{Kind: rapid.SampledFrom(kinds).Draw(t, "kind"), ID: rapid.SampledFrom(ids).Draw(t, "id")}
		})
		tr := supervision.NewTree()
		var accepted []supervision.Event
		var snaps []supervision.Snapshot // after each accepted event
		n := rapid.IntRange(1, 80).Draw(rt, "events")
		for i := range n {
			e := supervision.Event{
				Kind:   supervision.EventKind(rapid.IntRange(0, 5).Draw(rt, "eventKind")),
				Node:   ref.Draw(rt, "node"),
				Parent: ref.Draw(rt, "parent"),
				Cause:  supervision.Cause(rapid.IntRange(0, 4).Draw(rt, "cause")),
				Status: rapid.SampledFrom([]string{"", supervision.StatusRunning, "completed", "failed"}).Draw(rt, "status"),
			}
			if e.Kind == supervision.Spawned {
				// Actor ids as protoactor names children (the parent's + "/" + id, at any
				// depth), which the tree derives instead of storing, and others.
				parentActor := "pid-" + e.Parent.ID
				if p, ok := tr.Snapshot().Node(e.Parent); ok {
					parentActor = p.Actor
				}
				e.Actor = rapid.SampledFrom([]string{"pid-" + e.Node.ID, "", parentActor + "/" + e.Node.ID,
					"other/" + e.Node.ID, parentActor + "/"}).Draw(rt, "actor")
				e.Session = rapid.SampledFrom([]string{"", "alice"}).Draw(rt, "session")
			}
			e.Seq = tr.Seq() + 1
			if rapid.IntRange(0, 19).Draw(rt, "badSeq") == 0 {
				e.Seq += uint64(rapid.IntRange(1, 3).Draw(rt, "skip"))
			}
			want := modelCode(accepted, e)
			err := tr.Apply(e)
			require.Equal(rt, want, messages.CodeOf(err), "event %d %s: %v", i, e, err)
			if err == nil {
				accepted = append(accepted, e)
				snaps = append(snaps, tr.Snapshot())
			}
			require.Equal(rt, modelSnapshot(accepted), tr.Snapshot(), "after event %d %s", i, e)
		}
		if len(accepted) == 0 {
			return
		}
		final := tr.Snapshot()
		k := rapid.IntRange(0, len(accepted)-1).Draw(rt, "from")
		var p messages.TreeSnapshot
		wire, err := proto.Marshal(snaps[k].Proto())
		require.NoError(rt, err)
		require.NoError(rt, proto.Unmarshal(wire, &p))
		from, err := supervision.SnapshotFromProto(&p)
		require.NoError(rt, err)
		fold, err := supervision.TreeOf(from)
		require.NoError(rt, err)
		for _, e := range accepted[k+1:] {
			require.NoError(rt, fold.Apply(e), "%s", e)
		}
		require.Equal(rt, final, fold.Snapshot())
	})
}

// The model: everything recomputed from the accepted events, in the core's order
// of checks.

func modelLive(acc []supervision.Event, r supervision.Ref) (spawn int, ok bool) {
	spawn = -1
	for i, e := range acc {
		if e.Node != r {
			continue
		}
		switch e.Kind {
		case supervision.Spawned:
			spawn = i
		case supervision.Stopped:
			spawn = -1
		}
	}
	return spawn, spawn >= 0
}

func modelCode(acc []supervision.Event, e supervision.Event) messages.Code {
	if e.Seq != uint64(len(acc))+1 {
		return supervision.CodeOutOfSequence
	}
	if e.Node.Kind == "" || e.Node.ID == "" {
		return supervision.CodeBadEvent
	}
	spawn, live := modelLive(acc, e.Node)
	switch e.Kind {
	case supervision.Spawned:
		if live {
			return supervision.CodeDuplicate
		}
		if _, ok := modelLive(acc, e.Parent); !e.Parent.IsRoot() && !ok {
			return supervision.CodeUnknownParent
		}
	case supervision.Restarted:
		if !live {
			return supervision.CodeUnknownNode
		}
	case supervision.Settled:
		if !live {
			return supervision.CodeUnknownNode
		}
		if e.Status == "" || e.Status == supervision.StatusRunning {
			return supervision.CodeBadEvent
		}
		for _, x := range acc[spawn:] {
			if x.Node == e.Node && x.Kind == supervision.Settled {
				return supervision.CodeSettledTwice
			}
		}
	case supervision.Stopped:
		if !live {
			return supervision.CodeUnknownNode
		}
		for _, n := range modelSnapshot(acc).Nodes {
			if n.Parent == e.Node {
				return supervision.CodeOrphans
			}
		}
	default:
		return supervision.CodeBadEvent
	}
	return ""
}

func modelSnapshot(acc []supervision.Event) supervision.Snapshot {
	var live []supervision.Node
	for i, e := range acc {
		if e.Kind != supervision.Spawned {
			continue
		}
		if spawn, ok := modelLive(acc, e.Node); !ok || spawn != i {
			continue
		}
		n := supervision.Node{Ref: e.Node, Parent: e.Parent, Actor: e.Actor, Session: e.Session,
			Status: supervision.StatusRunning, Spawned: e.Seq}
		for _, x := range acc[i+1:] {
			if x.Node != e.Node {
				continue
			}
			switch x.Kind {
			case supervision.Restarted:
				n.Restarts++
			case supervision.Settled:
				n.Status, n.Cause, n.Detail = x.Status, x.Cause, x.Detail
			}
		}
		live = append(live, n)
	}
	slices.SortFunc(live, func(a, b supervision.Node) int { return cmp.Compare(a.Spawned, b.Spawned) })
	out := supervision.Snapshot{Seq: uint64(len(acc)), Nodes: []supervision.Node{}}
	var walk func(supervision.Ref)
	walk = func(r supervision.Ref) {
		for _, n := range live {
			if n.Parent == r {
				out.Nodes = append(out.Nodes, n)
				walk(n.Ref)
			}
		}
	}
	walk(supervision.Root)
	return out
}
