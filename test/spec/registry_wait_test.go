package spec

import (
	"context"
	"github.com/troupe-rt/troupe/actors/registry"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/troupetest"
)

// SPEC §2.8 wait, §1.3 rules 10 and 11.

func TestSpec028_PendingWaitClaimsSettlement(t *testing.T) {
	sys, _ := troupetest.Served(t)
	done := onDone(t, sys, sys.Scope())
	p := troupetest.NewProducer()
	id := start(t, sys, p.Spec(nil))
	w := waitAsync(ctx(t), sys, id, 5*time.Second, registry.NoCaller)
	troupetest.AwaitWaiters(t, sys, id, 1)
	p.Settle(job.Outcome{Status: job.Completed})
	out := recv(t, w)
	require.NoError(t, out.err)
	require.Equal(t, snapView{"completed", true}, view(out.snap))
	troupetest.Settled(t, sys, id, registry.NoCaller)
	got := done.Snaps()
	require.Len(t, got, 1)
	require.Equal(t, snapView{"completed", true}, view(got[0]))
	n, err := sys.Jobs().Waiters(context.Background(), id)
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestSpec029_WaitTimeoutReturnsLiveSnapshot(t *testing.T) {
	sys, _ := troupetest.Served(t)
	id := start(t, sys, live().Spec(nil))
	snap, err := sys.Jobs().Wait(ctx(t), id, 5*time.Millisecond, registry.NoCaller)
	require.NoError(t, err)
	require.Equal(t, snapView{"running", false}, view(snap))
	require.Equal(t, snapView{"running", false}, view(get(t, sys, id, "")))
	n, err := sys.Jobs().Waiters(context.Background(), id)
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestSpec030_EndedWaitsLeaveNoWaiter(t *testing.T) {
	sys, _ := troupetest.Served(t)
	id := start(t, sys, live().Spec(nil))
	noWaiters := func() {
		t.Helper()
		n, err := sys.Jobs().Waiters(context.Background(), id)
		require.NoError(t, err)
		require.Zero(t, n)
	}
	for range 3 {
		snap, err := sys.Jobs().Wait(ctx(t), id, 5*time.Millisecond, registry.NoCaller)
		require.NoError(t, err)
		require.Equal(t, snapView{"running", false}, view(snap))
		noWaiters()
	}
	c, cancel := context.WithCancel(ctx(t))
	w := waitAsync(c, sys, id, 5*time.Second, registry.NoCaller)
	troupetest.AwaitWaiters(t, sys, id, 1)
	cancel()
	out := recv(t, w)
	requireCode(t, out.err, messages.ErrWaitAborted, "wait aborted")
	noWaiters()
	require.Equal(t, snapView{"running", false}, view(get(t, sys, id, "")))
}

func TestSpec031_WaitOnFinishedJobReturnsAtOnce(t *testing.T) {
	sys, _ := troupetest.Served(t)
	p := troupetest.NewProducer()
	id := start(t, sys, p.Spec(nil))
	p.Settle(job.Outcome{Status: job.Completed})
	require.False(t, troupetest.Settled(t, sys, id, registry.NoCaller).Reported)
	// An hour-long wait that does not return at once fails the test (recv's budget).
	out := recv(t, waitAsync(ctx(t), sys, id, time.Hour, registry.NoCaller))
	require.NoError(t, out.err)
	require.Equal(t, snapView{"completed", true}, view(out.snap))
	require.True(t, get(t, sys, id, "").Reported)
}

func TestSpec032_InvalidWaitTimeout(t *testing.T) {
	sys, _ := troupetest.Served(t)
	id := start(t, sys, live().Spec(nil))
	const prefix = "invalid wait timeout: expected a positive number of milliseconds, got "
	for _, tc := range []struct {
		timeout  time.Duration
		rendered string
	}{
		{0, "0"},
		{-5 * time.Millisecond, "-5"},
		{-1500 * time.Microsecond, "-1.5"},
		{-time.Nanosecond, "-0.000001"},
	} {
		_, err := sys.Jobs().Wait(ctx(t), id, tc.timeout, registry.NoCaller)
		requireCode(t, err, messages.ErrInvalidWaitTimeout, prefix+tc.rendered)
		require.True(t, strings.HasPrefix(err.Error(), prefix))
	}
	n, err := sys.Jobs().Waiters(context.Background(), id)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, snapView{"running", false}, view(get(t, sys, id, "")))
}

func TestSpec033_AbortedWaitRejects(t *testing.T) {
	sys, _ := troupetest.Served(t)
	id := start(t, sys, live().Spec(nil))

	// A pending wait whose context is cancelled.
	c, cancel := context.WithCancel(ctx(t))
	w := waitAsync(c, sys, id, 5*time.Second, registry.NoCaller)
	troupetest.AwaitWaiters(t, sys, id, 1)
	cancel()
	requireCode(t, recv(t, w).err, messages.ErrWaitAborted, "wait aborted")

	// A wait started with an already-cancelled context.
	_, err := sys.Jobs().Wait(c, id, 5*time.Second, registry.NoCaller)
	requireCode(t, err, messages.ErrWaitAborted, "wait aborted")

	// Rule 10: the caller's own deadline is an abort too, not a timeout.
	dl, cancelDL := context.WithTimeout(ctx(t), 5*time.Millisecond)
	defer cancelDL()
	_, err = sys.Jobs().Wait(dl, id, time.Hour, registry.NoCaller)
	requireCode(t, err, messages.ErrWaitAborted, "wait aborted")

	require.Equal(t, snapView{"running", false}, view(get(t, sys, id, "")))
	n, err := sys.Jobs().Waiters(context.Background(), id)
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestSpec033_AbortedWaitOnFinishedJobReturnsSnapshot(t *testing.T) {
	// §2.8 step 3: a terminal job answers at once, pre-aborted signal or not.
	sys, _ := troupetest.Served(t)
	p := troupetest.NewProducer()
	id := start(t, sys, p.Spec(nil))
	p.Settle(job.Outcome{Status: job.Completed})
	troupetest.Settled(t, sys, id, registry.NoCaller)
	c, cancel := context.WithCancel(ctx(t))
	cancel()
	snap, err := sys.Jobs().Wait(c, id, 5*time.Second, registry.NoCaller)
	require.NoError(t, err)
	require.Equal(t, snapView{"completed", true}, view(snap))
}
