package troupetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
)

// Continuations serves a test System (as Served) for continuable children over
// store: the spawn provider over runner is registered in the root scope, the
// continuation directory is started with runner as its turn runner and no owner
// surfaces, and the parent agent "P" is registered. The System, and with it the
// directory, is shut down when t ends.
func Continuations(t testing.TB, store session.Store, runner subagent.TurnRunner) (*troupe.System, *activation.Manager, *owner.Agent) {
	t.Helper()
	sys, _ := Served(t)
	rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), nil)
	require.NoError(t, err)
	_, err = rt.RegisterProvider(t.Context(), sys.Scope(), subagent.NewSpawn(sys.Actors(), runner))
	require.NoError(t, err)
	m, err := sys.StartContinuations(store, rt, runner, nil)
	require.NoError(t, err)
	return sys, m, Agent(t, sys, "P")
}
