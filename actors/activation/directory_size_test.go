package activation

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/scope"
)

// The directory indexes a resident Activation by its child id and in its parent's
// list, not also by its child agent's PID: an entry is found by its agent through
// the agent's session, its child id (agentEntry). Measured as the live heap growth
// of indexing 1,000 entries (made before): ≈ 60 B each, ≈ 110 with an index by
// agent PID besides.
func TestDirectoryIndexesAnEntryByItsIDOnly(t *testing.T) {
	const n = 1000
	sys := actor.NewActorSystem()
	root := scope.NewRoot("test")
	t.Cleanup(func() { require.NoError(t, root.Dispose(context.Background())) })
	parent, err := owner.Spawn(sys.Root, root, "P", nil, owner.Options{})
	require.NoError(t, err)
	entries := make([]*entry, n)
	for i := range entries {
		id := "child-" + strconv.Itoa(i)
		a, err := owner.Spawn(sys.Root, root, id, nil, owner.Options{})
		require.NoError(t, err)
		entries[i] = &entry{carry: carry{id: id, agent: a, parent: parent}, pid: actor.NewPID("nonhost", "activation-"+id+"-1")}
	}
	d := &directoryActor{acts: map[string]*entry{}, kids: map[string][]*entry{}}
	before := liveBytes()
	for _, e := range entries {
		d.index(e)
	}
	per := float64(liveBytes()-before) / n
	runtime.KeepAlive(d)
	t.Logf("%.0f B per indexed entry", per)
	require.Less(t, per, 75.0, "bytes the directory's indexes keep per entry")
	for _, e := range entries {
		require.Same(t, e, d.entryOf(e.agent))
		require.Same(t, e, d.parentEntry(e.agent))
		require.Nil(t, d.agentEntry(e.id, parent.PID()), "another agent of the child's session")
	}
	require.Nil(t, d.entryOf(parent))
}

func liveBytes() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// A directory entry (with the carry its Activation keeps) fits the 224 B size
// class: its stop reason and cwd are interned (8 B each, not 16), which took it
// down from 240 B; the children of one parent share one copy of their cwd.
func TestEntryFits224Bytes(t *testing.T) {
	require.LessOrEqual(t, unsafe.Sizeof(entry{}), uintptr(224))
	e := &entry{carry: carry{cwd: intern(string([]byte("/work/x"))), stop: intern("completed")}}
	f := &entry{carry: carry{cwd: intern(string([]byte("/work/x")))}}
	require.Equal(t, unsafe.StringData(e.cwd.String()), unsafe.StringData(f.cwd.String()), "two copies of one cwd")
	require.Equal(t, "completed", e.stop.String())
	require.Empty(t, f.stop.String())
}
