package spec

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/harness"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/troupetest"
)

// SPEC §2.7: a kill that lands sets `stopping`, fires onJobsChanged, *then* returns
// `requested` — the change is announced before the caller learns of it, as start's
// registration change is. An onJobsChanged listener holds the kill's change until
// either Kill has returned (the reply went first: the violation) or fake time has
// moved on, which in a synctest bubble happens only once every goroutine — Kill's
// caller, blocked on its reply, included — is blocked. So the order is exact, not
// a race: on code that replies first, Kill returns while the listener still runs.
func TestSpec2_7_KillAnnouncesItsChangeBeforeItReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := harness.NewDispatcher(1)
		t.Cleanup(d.Close)
		sys, err := troupe.New(troupe.Config{Dispatcher: d, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, sys.Shutdown(context.Background())) })
		_, err = sys.Jobs().AttachController(context.Background(), sys.Scope(), "t")
		require.NoError(t, err)

		type change struct {
			afterReturn bool                       // Kill had already returned when it fired
			list        <-chan registry.ListResult // a query sent from the listener
		}
		var armed atomic.Bool
		returned := make(chan struct{})
		changes := make(chan change, 1)
		_, err = sys.Jobs().OnJobsChanged(context.Background(), sys.Scope(), func(registry.Owner) {
			if !armed.CompareAndSwap(true, false) {
				return // start's registration change
			}
			c := change{list: sys.Jobs().ListAsync(registry.NoCaller)}
			select {
			case <-returned:
				c.afterReturn = true
			case <-time.After(time.Second): // passes only once Kill's caller is blocked too
			}
			changes <- c
		})
		require.NoError(t, err)

		p := troupetest.NewProducer()
		id, err := sys.Jobs().Start(context.Background(), p.Spec(nil))
		require.NoError(t, err)
		t.Cleanup(func() { p.Settle(job.Outcome{Status: job.Killed}) }) // before the shutdown, also on failure
		armed.Store(true)
		res, snap, err := sys.Jobs().Kill(context.Background(), id, registry.NoCaller, registry.KillOptions{})
		close(returned)
		require.NoError(t, err)
		require.Equal(t, messages.KillResult_KILL_RESULT_REQUESTED, res)
		require.Equal(t, job.Stopping, snap.Status)

		c := <-changes
		require.False(t, c.afterReturn, "Kill returned `requested` before onJobsChanged announced the kill's change")
		l := <-c.list
		require.NoError(t, l.Err)
		require.Len(t, l.Jobs, 1)
		require.Equal(t, job.Stopping, l.Jobs[0].Status, "the change announced the job stopping")

		p.Settle(job.Outcome{Status: job.Killed})
		troupetest.Settled(t, sys, id, registry.NoCaller)
	})
}
