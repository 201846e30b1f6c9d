package spec

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/troupetest"
)

// Hooks.OnSettle, the channel-free settlement: the same settlement as Done's.

// An outcome settled inside Run, before troupe called OnSettle, is delivered when
// it does; a second settle is ignored (first wins).
func TestOnSettleOutcomeBeforeRegistrationSettles(t *testing.T) {
	sys, _ := troupetest.Served(t)
	var s job.Settler
	id := start(t, sys, job.Spec{Kind: "bash", Label: "at once", Run: func() (job.Hooks, error) {
		s.Settle(job.Outcome{Status: job.Completed, Detail: "exit code: 0", Output: "all done"})
		return job.Hooks{Cancel: func(string) error { return nil }, OnSettle: s.OnSettle}, nil
	}})
	snap := troupetest.Settled(t, sys, id, registry.NoCaller)
	require.Equal(t, job.Completed, snap.Status)
	require.Equal(t, "exit code: 0", snap.GetDetail())
	require.False(t, s.Settle(job.Outcome{Status: job.Failed}), "a later settle changes nothing")
	text, _, err := sys.Jobs().Read(context.Background(), id, registry.NoCaller)
	require.NoError(t, err)
	require.Equal(t, "all done", text)
}

// An OnSettle that panics is a producer contract violation: the job settles
// failed with the panic's text and the warning is logged.
func TestOnSettlePanicSettlesFailed(t *testing.T) {
	sys, logs := troupetest.Served(t)
	cancelled := 0
	id := start(t, sys, job.Spec{Kind: "bash", Label: "bad producer", Run: func() (job.Hooks, error) {
		return job.Hooks{Cancel: func(string) error { cancelled++; return nil },
			OnSettle: func(func(job.Outcome)) { panic("onsettle boom") }}, nil
	}})
	snap := troupetest.Settled(t, sys, id, registry.NoCaller)
	require.Equal(t, job.Failed, snap.Status)
	require.Equal(t, "Error: producer OnSettle panicked: onsettle boom", snap.GetDetail())
	require.Contains(t, logs.Lines(), "jobs: job "+id+" producer contract violation: producer OnSettle panicked: onsettle boom")
	require.Zero(t, cancelled, "the job was never running: nothing to cancel")
}
