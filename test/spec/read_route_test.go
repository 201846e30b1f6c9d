package spec

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/troupetest"
)

// A live read is answered by the registry in one hop, calling the stream's
// ReadOutput there — but never while the producer's Cancel may run (Hooks: one
// call at a time, Cancel never together with ReadOutput): once a kill went to the
// job, reads wait behind its Cancel on the job actor.
func TestReadOfStreamJobNeverRunsBesideItsCancel(t *testing.T) {
	sys, _ := newBareSystem(t, nil)
	jobs := sys.Jobs()
	entered, release := make(chan struct{}), make(chan struct{})
	var inCancel, overlaps, reads atomic.Int32
	var settler job.Settler
	id := start(t, sys, job.Spec{Kind: "bash", Label: "stream", Run: func() (job.Hooks, error) {
		return job.Hooks{OnSettle: settler.OnSettle,
			Cancel: func(string) error {
				inCancel.Store(1)
				close(entered)
				<-release
				inCancel.Store(0)
				settler.Settle(job.Outcome{Status: job.Killed, Detail: "signal: SIGTERM"})
				return nil
			},
			ReadOutput: func() (string, error) {
				reads.Add(1)
				if inCancel.Load() != 0 {
					overlaps.Add(1)
				}
				return "chunk", nil
			}}, nil
	}})

	// Before any kill: answered (by the registry), the delta consumed.
	text, snap, err := jobs.Read(ctx(t), id, registry.NoCaller)
	require.NoError(t, err)
	require.Equal(t, "chunk", text)
	require.Equal(t, job.Running, snap.Status)
	require.False(t, snap.Reported, "a live read claims nothing")
	require.EqualValues(t, 1, reads.Load())

	killed := make(chan messages.KillResult, 1)
	go func() {
		res, _, _ := jobs.Kill(ctx(t), id, registry.NoCaller, registry.KillOptions{})
		killed <- res
	}()
	<-entered
	// Cancel is running: a read waits behind it and returns at its ctx, having
	// read nothing.
	short, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, _, err = jobs.Read(short, id, registry.NoCaller)
	requireAborted(t, err, context.DeadlineExceeded)
	require.Zero(t, overlaps.Load(), "ReadOutput ran while Cancel was running")
	require.EqualValues(t, 1, reads.Load(), "the aborted read called ReadOutput")

	close(release)
	require.Equal(t, messages.KillResult_KILL_RESULT_REQUESTED, <-killed)
	snap = troupetest.Settled(t, sys, id, registry.NoCaller)
	require.Equal(t, job.Killed, snap.Status)
	text, _, err = jobs.Read(ctx(t), id, registry.NoCaller)
	require.NoError(t, err)
	require.Equal(t, "chunk", text, "after settlement the registry reads the stream again")
	require.Zero(t, overlaps.Load())
	require.NoError(t, sys.Shutdown(ctx(t)))
}

// A read aborted while the registry is still in the stream's ReadOutput gets no
// answer; the registry's late answer (the delta it then read) belongs to that read
// alone: the next read is answered with its own delta, never with the aborted
// one's (the Client reuses a read's request and reply channel only once the
// registry answered it freed, which an aborted read never was).
func TestReadAbortedInReadOutputIsNotAnsweredToTheNextRead(t *testing.T) {
	sys, _ := newBareSystem(t, nil)
	jobs := sys.Jobs()
	entered, release := make(chan struct{}), make(chan struct{})
	var reads atomic.Int32
	id := start(t, sys, job.Spec{Kind: "bash", Label: "stream", Run: func() (job.Hooks, error) {
		var settler job.Settler
		return job.Hooks{OnSettle: settler.OnSettle,
			Cancel: func(string) error { settler.Settle(job.Outcome{Status: job.Killed}); return nil },
			ReadOutput: func() (string, error) {
				switch reads.Add(1) {
				case 2:
					close(entered)
					<-release
					return "second", nil
				case 3:
					return "third", nil
				}
				return "other", nil
			}}, nil
	}})
	read := func(c context.Context) (string, error) {
		text, _, err := jobs.Read(c, id, registry.NoCaller)
		return text, err
	}
	text, err := read(ctx(t)) // a freed call is pooled, so the next read reuses it
	require.NoError(t, err)
	require.Equal(t, "other", text)
	aborted, cancel := context.WithCancel(context.Background())
	abortedErr := make(chan error, 1)
	go func() {
		_, err := read(aborted)
		abortedErr <- err
	}()
	<-entered
	cancel()
	requireAborted(t, <-abortedErr, context.Canceled)
	close(release)
	for _, want := range []string{"third", "other"} {
		text, err := read(ctx(t))
		require.NoError(t, err)
		require.Equal(t, want, text, "a read got the aborted read's delta")
	}
	require.EqualValues(t, 4, reads.Load())
	require.NoError(t, sys.Shutdown(ctx(t)))
}

// A live read of a stream job answered by the registry reuses its request and
// reply channel: what it allocates is the snapshot it returns and the registry
// mailbox's wake, not the 4 allocations of a fresh request (5–6 in all before).
// Under -race a sync.Pool drops a quarter of what is put in it, so the bound
// leaves room for that.
func TestReadOfStreamJobReusesItsRequest(t *testing.T) {
	sys, _ := newBareSystem(t, nil)
	jobs := sys.Jobs()
	id := start(t, sys, job.Spec{Kind: "bash", Label: "stream", Run: func() (job.Hooks, error) {
		var settler job.Settler
		return job.Hooks{OnSettle: settler.OnSettle,
			Cancel:     func(string) error { settler.Settle(job.Outcome{Status: job.Killed}); return nil },
			ReadOutput: func() (string, error) { return "chunk", nil }}, nil
	}})
	c := ctx(t)
	allocs := testing.AllocsPerRun(200, func() {
		if text, _, err := jobs.Read(c, id, registry.NoCaller); err != nil || text != "chunk" {
			t.Fatalf("read: %q, %v", text, err)
		}
	})
	require.LessOrEqual(t, allocs, 3.5)
	require.NoError(t, sys.Shutdown(ctx(t)))
}
