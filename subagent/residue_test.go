package subagent_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/subagent"
)

// A listener registered in an agent's scope leaves nothing behind once that scope
// is disposed: the runtime keeps no (empty) layer per disposed scope.
func TestListenerLayersLeaveWithTheirScope(t *testing.T) {
	rt, global, _ := newRuntime(t)
	for range 50 {
		sc, err := global.Child("agent")
		require.NoError(t, err)
		_, err = rt.Listen(t.Context(), sc, func(subagent.Event) {})
		require.NoError(t, err)
		_, err = rt.Listen(t.Context(), sc, func(subagent.Event) {})
		require.NoError(t, err)
		require.Equal(t, 1, rt.ListenerLayers(t.Context()))
		require.NoError(t, sc.Dispose(context.Background()))
		require.Zero(t, rt.ListenerLayers(t.Context()), "listener layers after the scope's disposal")
	}
}
