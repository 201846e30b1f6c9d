package registry_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/troupetest"
)

// An agent that owns no job is found by its PID through the agent registry's
// reverse index when its actor stops: it leaves the registry, and a same-session
// replacement registered before it stopped stays registered until it stops itself.
func TestStoppedAgentWithoutJobsLeavesTheRegistry(t *testing.T) {
	sys, _ := troupetest.Served(t)
	root := sys.Actors().Root

	first := troupetest.Agent(t, sys, "s")
	second := troupetest.Agent(t, sys, "s") // replaces first
	other := troupetest.Agent(t, sys, "t")
	require.True(t, sys.Jobs().RegisteredAgent(context.Background(), "s").Equal(second.PID()))

	require.NoError(t, root.StopFuture(first.PID()).Wait()) // its Stopped is queued at the registry
	require.True(t, sys.Jobs().RegisteredAgent(context.Background(), "s").Equal(second.PID()), "the replacement stays")

	require.NoError(t, root.StopFuture(second.PID()).Wait())
	require.Nil(t, sys.Jobs().RegisteredAgent(context.Background(), "s"))
	require.True(t, sys.Jobs().RegisteredAgent(context.Background(), "t").Equal(other.PID()))

	again := troupetest.Agent(t, sys, "s") // the session registers afresh
	require.True(t, sys.Jobs().RegisteredAgent(context.Background(), "s").Equal(again.PID()))
	require.NoError(t, root.StopFuture(again.PID()).Wait())
	require.Nil(t, sys.Jobs().RegisteredAgent(context.Background(), "s"))
}
