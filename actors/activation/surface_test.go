package activation_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/subagent"
)

// A child agent's surface learns its Activation's PID only after the spawn; a
// delivery before that (not reachable: no job or child of the agent exists yet) is
// refused with a stable code, not sent to a nil PID nor dropped silently.
func TestChildSurfaceRefusesDeliveryBeforeBind(t *testing.T) {
	err := activation.UnboundSurfaceDelivery()
	require.Error(t, err)
	require.Equal(t, subagent.CodeContinuationUnavailable, messages.CodeOf(err))
	require.Contains(t, err.Error(), "not spawned yet")
}
