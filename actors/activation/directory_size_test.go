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
// the agent's session, its child id (agentEntry). Measured as the heap bytes that
// indexing 1,000 entries (made before) allocates, counted by the runtime for the
// indexing goroutine alone (the system is idle meanwhile): the same figure on
// every run, whatever else the machine runs — not the live heap's growth, which
// other goroutines' garbage moved by ±100 B per entry. An index by agent PID
// besides (one more map of 1,000 entries) adds about as much again as the id map.
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
		entries[i] = &entry{carry: carry{agent: a, parent: parent}, pid: actor.NewPID("nonhost", "activation-"+id+"-1")}
	}
	for _, e := range append(entries, &entry{carry: carry{agent: parent}}) {
		_, err := e.agent.Stats(context.Background()) // its owner actor has taken its ownerInit: idle
		require.NoError(t, err)
	}
	var d *directoryActor
	bytes, objects := allocated(func() {
		d = &directoryActor{acts: map[string]*entry{}, kids: map[string][]*entry{}}
		for _, e := range entries {
			d.index(e)
		}
	})
	per := float64(bytes) / n
	t.Logf("indexing %d entries allocates %.1f B and %.3f objects per entry", n, per, float64(objects)/n)
	require.Less(t, per, 160.0, "heap bytes indexing allocates per entry")
	for _, e := range entries {
		require.Same(t, e, d.entryOf(e.agent))
		require.Same(t, e, d.parentEntry(e.agent))
		require.Nil(t, d.agentEntry(e.childID(), parent.PID()), "another agent of the child's session")
	}
	require.Nil(t, d.entryOf(parent))
}

// allocated returns the heap bytes and objects f allocates, on one P as
// testing.AllocsPerRun counts them: the runtime's own counters, exact for what f
// allocates (anything else that runs meanwhile adds to them).
func allocated(f func()) (bytes, objects uint64) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, after.Mallocs - before.Mallocs
}

// perObject returns the heap bytes one alloc() allocates, from 20,000 of them:
// its size class.
func perObject[T any](alloc func() *T) float64 {
	const n = 20000
	hold := make([]*T, n)
	bytes, _ := allocated(func() {
		for i := range hold {
			hold[i] = alloc()
		}
	})
	runtime.KeepAlive(hold)
	return float64(bytes) / n
}

// entrySizeClass is the size class a directory entry (with the carry its
// Activation keeps) fits: 160 B, down from 224 B, since the carry holds no copy of
// the child id (its agent's session), no owned-children set of its own (the
// core's), one interned handle for the header's parent of record, namespace and
// cwd instead of a string and two handles, and no copy of its recorded message's
// id (its pre message's, kept until that turn has run: preState).
const entrySizeClass = 160

// A directory entry fits its size class, by unsafe.Sizeof and by the bytes each
// one allocated takes (the next class, 176 B, reads 176).
func TestEntryFitsItsSizeClass(t *testing.T) {
	require.LessOrEqual(t, unsafe.Sizeof(entry{}), uintptr(entrySizeClass), "unsafe.Sizeof(entry{})")
	require.Less(t, perObject(func() *entry { return new(entry) }), float64(entrySizeClass+8), "heap bytes per entry")
}

// activationSizeClass is the size class an Activation's actor fits: 160 B, down
// from 224 B, since its origin, provider and agent option names are one interned
// handle, not four, its held message is a flag (the carry has the message), its
// history has no log seq (it reads the log's first base messages) and holds its
// in-memory messages behind a pointer (nil until a runner reads them), and its
// running turn is named by the turn's own channel (carry.quiet), not a token.
const activationSizeClass = 160

// An Activation's actor fits its size class, by unsafe.Sizeof and by the bytes
// each one allocated takes (the next class, 176 B, reads 176).
func TestActivationFitsItsSizeClass(t *testing.T) {
	require.LessOrEqual(t, unsafe.Sizeof(activationActor{}), uintptr(activationSizeClass), "unsafe.Sizeof(activationActor{})")
	require.Less(t, perObject(func() *activationActor { return new(activationActor) }), float64(activationSizeClass+8),
		"heap bytes per Activation actor")
}

// The carry's child id is its agent's session, and its header identity is one
// interned value: the children of one parent share one copy of it.
func TestCarryReadsItsIdentityOffItsAgentAndOneInternedRecord(t *testing.T) {
	sys := actor.NewActorSystem()
	root := scope.NewRoot("test")
	t.Cleanup(func() { require.NoError(t, root.Dispose(context.Background())) })
	a, err := owner.Spawn(sys.Root, root, "child-1", nil, owner.Options{})
	require.NoError(t, err)
	rec := func() interned[parentage] {
		return intern(parentage{parentSes: string([]byte("P")), parentKind: "", cwd: string([]byte("/work/x"))})
	}
	e := &entry{carry: carry{agent: a, rec: rec(), stop: intern("completed")}}
	f := &entry{carry: carry{agent: a, rec: rec()}}
	require.Equal(t, "child-1", e.childID())
	require.Equal(t, "P", e.parentSes())
	require.Empty(t, e.parentKind())
	require.Equal(t, "/work/x", e.cwd())
	require.Equal(t, unsafe.StringData(e.cwd()), unsafe.StringData(f.cwd()), "two copies of one cwd")
	require.Equal(t, "completed", e.stop.get())
	require.Empty(t, f.stop.get())
	require.Empty(t, (&entry{}).parentSes(), "the zero record")
}
