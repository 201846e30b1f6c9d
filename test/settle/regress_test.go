package settle

import (
	"context"
	"errors"
	"github.com/troupe-rt/troupe/actors/registry"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/harness"
	"github.com/troupe-rt/troupe/troupetest"
)

// Found by the suite (deterministic schedules 3991 and 9019, -cpu 1, e.g. seed
// 17639835329101185926): a wait whose own timeout had passed, still pending when a
// teardown's Cancel failed, returned a live snapshot carrying the teardown's claim
// ("running, reported") — a state that exists only inside the teardown step, which
// claims and force-fails in one message. By SPEC §1.3 rule 11 such a wait ends "as
// its own timeout would": with the snapshot from before the teardown.
//
// Time is fake (synctest) and every troupe actor runs on the seeded dispatcher, so
// each order below is exact.
func TestTeardownForceFailEndsExpiredWaitsBeforeItsClaim(t *testing.T) {
	const timeout = 10 * time.Millisecond
	// The wait's deadline passed before the job actor took the Teardown: its WaitEnd
	// is queued behind the disposal.
	t.Run("expired before the teardown", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			sys, d := syntheticSystem(t)
			p := troupetest.NewProducer()
			p.CancelErr = errors.New("cancel refused")
			id, err := sys.Jobs().Start(context.Background(), p.Spec(nil))
			require.NoError(t, err)
			waited := pendingWait(t, sys, id, timeout)

			d.Pause()
			disposed := make(chan error, 1)
			go func() { disposed <- sys.Jobs().Dispose(context.Background()) }()
			synctest.Wait()         // the disposal is queued
			time.Sleep(2 * timeout) // the wait's deadline passes
			synctest.Wait()         // its WaitEnd is queued behind the disposal
			d.Resume()
			require.NoError(t, <-disposed)
			require.Equal(t, harness.Snap{Status: job.Running}, <-waited)
		})
	})
	// The wait's deadline passes while the producer's Cancel runs (it takes longer
	// than it should): the forced settlement ends the wait within the teardown step.
	t.Run("expiring during the cancel", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			sys, _ := syntheticSystem(t)
			done := make(chan job.Outcome, 1)
			id, err := sys.Jobs().Start(context.Background(), job.Spec{Kind: "bash", Label: "slow cancel", Run: func() (job.Hooks, error) {
				return job.Hooks{Done: done, Cancel: func(string) error {
					time.Sleep(2 * timeout)
					return errors.New("cancel refused")
				}}, nil
			}})
			require.NoError(t, err)
			waited := pendingWait(t, sys, id, timeout)
			require.NoError(t, sys.Jobs().Dispose(context.Background()))
			require.Equal(t, harness.Snap{Status: job.Running}, <-waited)
		})
	})
}

// syntheticSystem starts a served System on a seeded dispatcher inside the current
// synctest bubble, shut down (and the dispatcher closed) when t ends.
func syntheticSystem(t *testing.T) (*troupe.System, *harness.Dispatcher) {
	d := harness.NewDispatcher(1)
	t.Cleanup(d.Close)
	sys, err := troupe.New(troupe.Config{Dispatcher: d, Logger: quiet})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sys.Shutdown(context.Background())) })
	_, err = sys.Jobs().AttachController(context.Background(), sys.Scope(), "t")
	require.NoError(t, err)
	return sys, d
}

// pendingWait starts a Wait on id and returns once it is pending on the job.
func pendingWait(t *testing.T, sys *troupe.System, id string, timeout time.Duration) <-chan harness.Snap {
	waited := make(chan harness.Snap, 1)
	go func() {
		snap, err := sys.Jobs().Wait(context.Background(), id, timeout, registry.NoCaller)
		if err != nil {
			t.Errorf("wait: %v", err)
		}
		waited <- harness.SnapOf(snap)
	}()
	troupetest.AwaitWaiters(t, sys, id, 1)
	return waited
}
