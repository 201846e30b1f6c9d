package registry_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/troupetest"
)

// An agent that owns no job leaves the agent registry when its actor stops (its
// Stopped names its session): and a same-session
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

// heldDispatcher holds the first run of a mailbox it is given until the test
// takes it from the channel, and runs every later one on its own goroutine.
type heldDispatcher struct {
	first chan func()
	open  atomic.Bool
}

func (d *heldDispatcher) Schedule(fn func()) {
	if d.open.Load() {
		go fn()
		return
	}
	d.first <- fn
}

func (d *heldDispatcher) Throughput() int { return 300 }

// An owner actor stopped before it took its ownerInit names no session in its
// Stopped (the registry keeps no PID → session index): it still leaves the agent
// registry, found by its PID among the registrations. Its registration was made
// with its handle while the actor's first mailbox run was held, so the Stop (a
// system message) runs before the ownerInit.
func TestAgentStoppedBeforeItsInitLeavesTheRegistry(t *testing.T) {
	sys, _ := troupetest.Served(t)
	d := &heldDispatcher{first: make(chan func(), 1)}
	a, err := sys.NewAgent(nil, "early", owner.Options{Props: func(p *actor.Props) *actor.Props {
		return p.Configure(actor.WithDispatcher(d))
	}})
	require.NoError(t, err)
	require.NoError(t, sys.Jobs().RegisterAgent(context.Background(), a))
	other := troupetest.Agent(t, sys, "other")
	require.True(t, sys.Jobs().RegisteredAgent(context.Background(), "early").Equal(a.PID()))

	stopped := sys.Actors().Root.StopFuture(a.PID())
	d.open.Store(true)
	go (<-d.first)() // the held run: Stop first, then nothing (the ownerInit is dropped)
	require.NoError(t, stopped.Wait())
	require.Nil(t, sys.Jobs().RegisteredAgent(context.Background(), "early"))
	require.True(t, sys.Jobs().RegisteredAgent(context.Background(), "other").Equal(other.PID()), "another session stays")
}
