package spec

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/troupetest"
)

func TestSpec001_NoControllerRefusesStart(t *testing.T) {
	sys, _ := troupetest.NewSystem(t)
	p := troupetest.NewProducer()
	_, err := sys.Jobs().Start(p.Spec(nil))
	require.ErrorIs(t, err, messages.ErrNoController)
	require.True(t, len(err.Error()) > 0)
	require.Contains(t, err.Error(), "background jobs unavailable: no job controller serves this agent")
	require.Equal(t, 0, p.Runs())
	list, err := sys.Jobs().List("")
	require.NoError(t, err)
	require.Empty(t, list)
}

func TestSpec016_StreamReadConsumesCursor(t *testing.T) {
	sys, _ := troupetest.Served(t)
	p := troupetest.NewProducer()
	p.Stream = true
	p.Emit("first", "", "rest")
	id, err := sys.Jobs().Start(p.Spec(nil))
	require.NoError(t, err)
	text, snap, err := sys.Jobs().Read(id, "")
	require.NoError(t, err)
	require.Equal(t, "first", text)
	require.False(t, snap.Reported)
	text, _, err = sys.Jobs().Read(id, "")
	require.NoError(t, err)
	require.Equal(t, "", text)
	p.Settle(job.Outcome{Status: job.Completed, Detail: "exit code: 0"})
	troupetest.Settled(t, sys, id, "")
	text, snap, err = sys.Jobs().Read(id, "")
	require.NoError(t, err)
	require.Equal(t, "rest", text)
	require.Equal(t, job.Completed, snap.Status)
	require.Equal(t, "exit code: 0", snap.GetDetail())
	require.True(t, snap.Reported)
	require.NotNil(t, snap.FinishedAt)
}

func TestSpec048_OwnerTeardownObserverSeesStoppingKilledGone(t *testing.T) {
	sys, _ := troupetest.Served(t)
	alice := troupetest.Agent(t, sys, "alice")
	p := troupetest.NewProducer()
	id, err := sys.Jobs().Start(p.Spec(alice))
	require.NoError(t, err)
	pending := make(chan (<-chan registry.ListResult), 16)
	_, err = sys.Jobs().OnJobsChanged(sys.Scope(), func(o registry.Owner) {
		pending <- sys.Jobs().ListAsync("alice")
	})
	require.NoError(t, err)
	disposed := make(chan error, 1)
	go func() { disposed <- alice.Dispose(context.Background()) }()
	// The teardown cancel reaches the producer; it has not settled yet.
	require.Equal(t, "owner disposed", p.NextCancel(t))
	p.Settle(job.Outcome{Status: job.Killed})
	require.NoError(t, <-disposed)
	close(pending)
	var statuses []string
	for ch := range pending {
		res := <-ch
		if len(res.Jobs) == 0 {
			statuses = append(statuses, "undefined")
		} else {
			statuses = append(statuses, res.Jobs[0].Status.Name())
		}
	}
	require.Equal(t, []string{"stopping", "killed", "undefined"}, statuses)
	require.Equal(t, []string{"owner disposed"}, p.Cancels())
	_ = id
}
