package owner

import (
	"context"
	"strconv"
	"testing"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/scope"
)

// An Agent handle is 24 B, the pointers it needs: its session is read off its
// scope's label and its incarnation number off its owner actor's name. Before, it
// held copies of both (48 B, with its session string and incarnation number).
func TestAgentIsItsThreePointers(t *testing.T) {
	require.LessOrEqual(t, unsafe.Sizeof(Agent{}), uintptr(24), "unsafe.Sizeof(Agent{})")

	sys := actor.NewActorSystem()
	root := scope.NewRoot("test")
	t.Cleanup(func() { require.NoError(t, root.Dispose(context.Background())) })
	sp := NewSpawner(sys.Root, nil, Options{})
	var last uint64
	for _, session := range []string{"s1", "agent:s2", "owner-3", "ü"} {
		a, err := sp.Spawn(root, session, nil, nil)
		require.NoError(t, err)
		require.Equal(t, session, a.Session())
		require.Equal(t, "agent:"+session, a.Scope().Label())
		require.Greater(t, a.Incarnation(), last, "incarnation numbers grow")
		last = a.Incarnation()
		require.Equal(t, "owner-"+strconv.FormatUint(a.Incarnation(), 10), a.PID().Id)
		require.Equal(t, `agent "`+session+`" (`+a.PID().Id+`)`, a.String())
		require.NoError(t, a.Dispose(t.Context()))
	}
	var zero Agent // not Spawn's: no session, no incarnation
	require.Empty(t, zero.Session())
	require.Zero(t, zero.Incarnation())
}
