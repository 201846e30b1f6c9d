package spec

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/troupetest"
)

// SPEC §2.11 teardown: owner disposal and service disposal; §2.10 the gate re-arming.

func TestSpec045_OwnerDisposalChangesOnlyOwnersWithRecords(t *testing.T) {
	sys, _ := troupetest.Served(t)
	c := ctx(t)
	changed := onChanged(t, sys, sys.Scope())
	alice := troupetest.Agent(t, sys, "alice")
	bob := troupetest.Agent(t, sys, "bob")
	p := troupetest.NewProducer()
	id := start(t, sys, p.Spec(alice))
	p.Settle(job.Outcome{Status: job.Completed})
	troupetest.Settled(t, sys, id, registry.AsAgent(alice))
	before := changed.Owners()
	require.Equal(t, []string{"alice", "alice"}, before) // registration, settlement

	require.NoError(t, bob.Dispose(c))
	troupetest.Barrier(t, sys) // bob's owner actor has stopped; its notice is processed
	require.Equal(t, before, changed.Owners(), "bob had no records: no change")

	require.NoError(t, alice.Dispose(c))
	troupetest.Barrier(t, sys)
	require.Equal(t, append(before, "alice"), changed.Owners())
	require.Empty(t, list(t, sys, "alice"))
}

func TestSpec047_OwnerDisposalCancelsLiveAndRemovesAll(t *testing.T) {
	sys, _ := troupetest.Served(t)
	alice := troupetest.Agent(t, sys, "alice")
	running := live()
	start(t, sys, running.Spec(alice))
	finished := troupetest.NewProducer()
	done := start(t, sys, finished.Spec(alice))
	finished.Settle(job.Outcome{Status: job.Completed})
	troupetest.Settled(t, sys, done, registry.AsAgent(alice))
	require.Len(t, list(t, sys, "alice"), 2)

	require.NoError(t, alice.Dispose(ctx(t)))
	require.Equal(t, []string{"owner disposed"}, running.Cancels())
	require.Empty(t, finished.Cancels())
	require.Empty(t, list(t, sys, "alice"))
	_, err := sys.Jobs().Get(context.Background(), done, asSession("alice"))
	requireCode(t, err, messages.ErrNotFound, "unknown job "+done)
}

func TestSpec048_OwnerTeardownObserverSeesStoppingKilledGone(t *testing.T) {
	sys, _ := troupetest.Served(t)
	alice := troupetest.Agent(t, sys, "alice")
	p := troupetest.NewProducer()
	start(t, sys, p.Spec(alice))
	pending := make(chan (<-chan registry.ListResult), 16)
	_, err := sys.Jobs().OnJobsChanged(context.Background(), sys.Scope(), func(registry.Owner) {
		pending <- sys.Jobs().ListAsync(registry.AsAgent(alice))
	})
	require.NoError(t, err)
	statusOf := func(res registry.ListResult) string {
		require.NoError(t, res.Err)
		if len(res.Jobs) == 0 {
			return "undefined"
		}
		return res.Jobs[0].Status.Name()
	}
	disposed := make(chan error, 1)
	go func() { disposed <- alice.Dispose(context.Background()) }()

	// The teardown cancel has reached the producer, which has not settled yet: the
	// observer has seen exactly `stopping`.
	require.Equal(t, "owner disposed", p.NextCancel(t))
	require.Equal(t, "stopping", statusOf(<-recv(t, pending)))
	select {
	case ch := <-pending:
		t.Fatalf("a second change before the producer settled: %v", statusOf(<-ch))
	default:
	}

	p.Settle(job.Outcome{Status: job.Killed})
	require.NoError(t, recv(t, disposed))
	close(pending)
	statuses := []string{"stopping"}
	for ch := range pending {
		statuses = append(statuses, statusOf(<-ch))
	}
	require.Equal(t, []string{"stopping", "killed", "undefined"}, statuses)
	require.Equal(t, []string{"owner disposed"}, p.Cancels())
}

func TestSpec049_OwnerDisposalSettlementIsReported(t *testing.T) {
	sys, _ := troupetest.Served(t)
	done := onDone(t, sys, sys.Scope())
	alice := troupetest.Agent(t, sys, "alice")
	id := start(t, sys, live().Spec(alice))
	require.NoError(t, alice.Dispose(ctx(t)))
	got := done.Snaps()
	require.Len(t, got, 1)
	require.Equal(t, id, got[0].Id)
	require.Equal(t, snapView{"killed", true}, view(got[0]))
}

func TestSpec051_ServiceDisposalCancelsWithoutDone(t *testing.T) {
	sys, _ := troupetest.Served(t)
	done := onDone(t, sys, sys.Scope())
	p := live()
	start(t, sys, p.Spec(nil))
	require.NoError(t, sys.Jobs().Dispose(ctx(t)))
	require.Equal(t, []string{"jobs service disposed"}, p.Cancels())
	require.Empty(t, done.Snaps())
	// The service refuses work from now on.
	_, err := sys.Jobs().Start(context.Background(), live().Spec(nil))
	require.ErrorIs(t, err, messages.ErrDisposed)
}

func TestSpec052_ThrowingCancelDoesNotStallServiceDisposal(t *testing.T) {
	sys, logs := troupetest.Served(t)
	done := onDone(t, sys, sys.Scope())
	p := troupetest.NewProducer()
	p.CancelErr = errors.New("cancel boom")
	id := start(t, sys, p.Spec(nil))
	// The producer never sends its outcome; disposal must not wait for it.
	require.NoError(t, sys.Jobs().Dispose(ctx(t)))
	require.Equal(t, []string{"jobs service disposed"}, p.Cancels())
	require.True(t, logs.Contains("work may be orphaned"))
	require.Contains(t, logs.Lines(),
		"jobs: cancel of "+id+" threw during teardown; job record forced failed and work may be orphaned: cancel boom")
	require.Empty(t, done.Snaps())
}

func TestSpec052_ThrowingCancelForceFailsOwnerTeardown(t *testing.T) {
	// The owner-disposal flavour: the record is forced failed with the orphan detail.
	sys, logs := troupetest.Served(t)
	done := onDone(t, sys, sys.Scope())
	alice := troupetest.Agent(t, sys, "alice")
	p := troupetest.NewProducer()
	p.CancelErr = errors.New("cancel boom")
	id := start(t, sys, p.Spec(alice))
	require.NoError(t, alice.Dispose(ctx(t)))
	require.True(t, logs.Contains("work may be orphaned"))
	got := done.Snaps()
	require.Len(t, got, 1)
	require.Equal(t, id, got[0].Id)
	require.Equal(t, snapView{"failed", true}, view(got[0]))
	require.Equal(t, "cancel threw during teardown; work may be orphaned: Error: cancel boom", got[0].GetDetail())
	require.Empty(t, list(t, sys, "alice"))
}

func TestSpec053_ServiceDisposalDetachesOwnerCleanup(t *testing.T) {
	sys, _ := troupetest.Served(t)
	alice := troupetest.Agent(t, sys, "alice")
	p := live()
	start(t, sys, p.Spec(alice))
	require.Equal(t, 1, countLabel(alice.Scope(), registry.OwnerCleanupLabel))
	require.NoError(t, sys.Jobs().Dispose(ctx(t)))
	require.Zero(t, countLabel(alice.Scope(), registry.OwnerCleanupLabel))
	require.False(t, alice.Scope().Disposed(), "alice is still live")
	require.Equal(t, []string{"jobs service disposed"}, p.Cancels())
}

func TestSpec054_ServiceDisposalChangeSequence(t *testing.T) {
	sys, _ := troupetest.Served(t)
	start(t, sys, live().Spec(nil))
	changed := onChanged(t, sys, sys.Scope())
	require.NoError(t, sys.Jobs().Dispose(ctx(t)))
	require.Equal(t, []string{"undefined", "undefined", "undefined"}, changed.Owners())
}

func TestSpec056_OneOwnerCleanupPerOwner(t *testing.T) {
	sys, _ := troupetest.Served(t)
	alice := troupetest.Agent(t, sys, "alice")
	require.Zero(t, countLabel(alice.Scope(), registry.OwnerCleanupLabel))
	start(t, sys, live().Spec(alice))
	start(t, sys, live().Spec(alice))
	require.Equal(t, 1, countLabel(alice.Scope(), registry.OwnerCleanupLabel))
}

func TestSpec057_DisposedMountStopsServing(t *testing.T) {
	sys, _ := troupetest.NewSystem(t)
	c := ctx(t)
	_, err := sys.Jobs().MountAgents(context.Background(), sys.Scope())
	require.NoError(t, err)
	standing := childScope(t, sys.Scope(), "standing")
	// The mount's registrations in the standing scope: a controller and a listener.
	controller, err := sys.Jobs().AttachController(context.Background(), standing, "tool-jobs")
	require.NoError(t, err)
	heard := &doneRec{}
	listener, err := sys.Jobs().OnJobDone(context.Background(), standing, heard.fn)
	require.NoError(t, err)
	alice := agentUnder(t, sys, standing, "alice")
	p := troupetest.NewProducer()
	id := start(t, sys, p.Spec(alice))

	// The mount is disposed: its effects run; the standing scope and alice stay.
	require.NoError(t, listener.Run(c))
	require.NoError(t, controller.Run(c))
	_, err = sys.Jobs().Start(context.Background(), live().Spec(alice))
	require.ErrorIs(t, err, messages.ErrNoController)
	requireHinted(t, err, prefixNoController)
	require.False(t, standing.Disposed())

	p.Settle(job.Outcome{Status: job.Completed})
	troupetest.Settled(t, sys, id, registry.AsAgent(alice))
	require.Empty(t, heard.Snaps())
	require.Equal(t, []string{id}, list(t, sys, "alice"))
}
