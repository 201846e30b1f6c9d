package troupe_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/troupetest"
)

// watcherShards counts the Done watcher's shard goroutines in the process.
func watcherShards() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "job.(*shard[...]).run(") // a generic method: [...] for its type argument
		}
		buf = make([]byte, 2*len(buf))
	}
}

// A producer whose Done channel already holds its outcome (or is already closed)
// when its job actor starts is settled from that value at once — with the same
// checks as a watched channel's — and no watcher shard (a goroutine with its
// reflect.Select) is started for it. A Done that is still empty is watched.
func TestReadyDoneSettlesWithoutAWatcherGoroutine(t *testing.T) {
	sys, _ := troupetest.Served(t)
	jobs := sys.Jobs()
	ctx := context.Background()
	start := func(done chan job.Outcome) string {
		id, err := jobs.Start(ctx, job.Spec{Kind: "ready", Label: "ready done", Run: func() (job.Hooks, error) {
			return job.Hooks{Done: done, Cancel: func(string) error { return nil }}, nil
		}})
		require.NoError(t, err)
		return id
	}
	require.Zero(t, watcherShards(), "no shard before any job")

	ready := make(chan job.Outcome, 1)
	ready <- job.Outcome{Status: job.Completed, Output: "at once"}
	id := start(ready)
	snap, err := jobs.AwaitSettled(ctx, id, registry.NoCaller)
	require.NoError(t, err)
	require.Equal(t, messages.JobStatus_JOB_STATUS_COMPLETED, snap.Status)
	text, _, err := jobs.Read(ctx, id, registry.NoCaller)
	require.NoError(t, err)
	require.Equal(t, "at once", text)

	closed := make(chan job.Outcome)
	close(closed)
	id = start(closed)
	snap, err = jobs.AwaitSettled(ctx, id, registry.NoCaller)
	require.NoError(t, err)
	require.Equal(t, messages.JobStatus_JOB_STATUS_FAILED, snap.Status)
	require.Equal(t, "Error: producer done channel closed without an outcome", snap.GetDetail())

	require.Zero(t, watcherShards(), "a ready Done started a watcher shard")

	later := make(chan job.Outcome, 1)
	id = start(later)
	snap, err = jobs.Get(ctx, id, registry.NoCaller)
	require.NoError(t, err)
	require.Equal(t, messages.JobStatus_JOB_STATUS_RUNNING, snap.Status)
	// the job actor hands its Done to the watcher after it started, and a shard
	// whose last entry settled may exit: the shard is looked for while the job
	// waits (no event tells when the shard's goroutine has started)
	require.Eventually(t, func() bool { return watcherShards() == 1 }, 10*time.Second, time.Millisecond,
		"an empty Done is watched by a shard")
	later <- job.Outcome{Status: job.Completed}
	snap, err = jobs.AwaitSettled(ctx, id, registry.NoCaller)
	require.NoError(t, err)
	require.Equal(t, messages.JobStatus_JOB_STATUS_COMPLETED, snap.Status)
}
