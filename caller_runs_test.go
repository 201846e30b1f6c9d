package troupe_test

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/harness"
	"github.com/troupe-rt/troupe/troupetest"
)

// inClientCall reports whether the calling goroutine is inside the registry
// Client's method (its stack has the method's frame): the registry's handler was
// run by that method's caller.
func inClientCall(method string) bool {
	buf := make([]byte, 64<<10)
	return strings.Contains(string(buf[:runtime.Stack(buf, false)]), "registry.(*Client)."+method+"(")
}

// callerRuns starts and reads rounds stream jobs on sys with ctx and counts the
// starts whose producer Run, and the reads whose ReadOutput, ran inside the
// Client's call.
func callerRuns(t *testing.T, sys *troupe.System, ctx context.Context, rounds int) (starts, reads int32) {
	t.Helper()
	var s, r atomic.Int32
	for range rounds {
		id, err := sys.Jobs().Start(ctx, job.Spec{Kind: "stream", Label: "stream", Run: func() (job.Hooks, error) {
			if inClientCall("Start") {
				s.Add(1)
			}
			done := make(chan job.Outcome, 1)
			return job.Hooks{Done: done, Cancel: func(string) error {
				select {
				case done <- job.Outcome{Status: job.Killed}:
				default:
				}
				return nil
			}, ReadOutput: func() (string, error) {
				if inClientCall("Read") {
					r.Add(1)
				}
				return "", nil
			}}, nil
		}})
		require.NoError(t, err)
		_, _, err = sys.Jobs().Read(ctx, id, registry.NoCaller)
		require.NoError(t, err)
	}
	return s.Load(), r.Load()
}

// On the System's own PoolDispatcher, a Start or a Read made while the registry is
// idle, with a ctx that can never end, is run by its caller
// (registry.Config.CallerRuns): the producer's Run and ReadOutput run inside the
// Client's call. Some rounds may find the registry still finishing an earlier run
// (the job actor's start reaches it), and are queued. With a ctx that can end,
// neither is: a misbehaving producer's blocking hook must not keep that caller
// from returning at the ctx's end (TestNoHang_AbortedStartsLateAnswerIsNotTheNextStarts).
func TestRequestsToTheIdleRegistryRunOnTheCaller(t *testing.T) {
	sys, _ := troupetest.Served(t, func(c *troupe.Config) { l := int64(64); c.MaxConcurrentJobsPerOwner = &l })
	starts, reads := callerRuns(t, sys, context.Background(), 20)
	t.Logf("of 20: starts %d, reads %d run by their caller", starts, reads)
	require.Positive(t, starts, "no Start ran on its caller")
	require.Positive(t, reads, "no Read ran on its caller")
	starts, reads = callerRuns(t, sys, t.Context(), 20)
	require.Zero(t, starts, "a Start with a ctx that can end ran its producer's Run on its caller")
	require.Zero(t, reads, "a Read with a ctx that can end ran its producer's ReadOutput on its caller")
}

// On a seeded schedule (harness.Dispatcher) every request is run by the
// dispatcher's worker, never by its caller: the schedule decides where and when
// every actor run happens (see harness.Dispatcher), and a caller's run would be
// one it did not pick. Fails when troupe lets callers run requests whatever the
// dispatcher.
func TestRequestsOnASeededScheduleRunOnItsWorker(t *testing.T) {
	d := harness.NewDispatcher(harness.Seed(t))
	t.Cleanup(d.Close) // after the System's shutdown (cleanups run last first)
	sys, _ := troupetest.Served(t, func(c *troupe.Config) {
		l := int64(64)
		c.MaxConcurrentJobsPerOwner = &l
		c.Dispatcher = d
	})
	starts, reads := callerRuns(t, sys, context.Background(), 20)
	require.Zero(t, starts, "a Start ran on its caller")
	require.Zero(t, reads, "a Read ran on its caller")
}
