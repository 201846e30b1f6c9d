package spec

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
)

// killedOnCancel is a producer whose Cancel settles it killed.
func killedOnCancel() (job.Hooks, error) {
	var settler job.Settler
	return job.Hooks{OnSettle: settler.OnSettle,
		Cancel: func(string) error { settler.Settle(job.Outcome{Status: job.Killed}); return nil }}, nil
}

// A Client reuses a Kill's request and reply once the registry answered it freed,
// never a kill whose wait ended first: an aborted kill whose Cancel was running
// still lands, and its late answer must not be the next kill's.
// It holds as well for a Cancel declared non-blocking (run on the job actor).
func TestKillAbortedInCancelIsNotAnsweredToTheNextKill(t *testing.T) {
	for _, inline := range []bool{false, true} {
		t.Run(map[bool]string{false: "runner", true: "inline"}[inline], func(t *testing.T) {
			killAbortedInCancel(t, inline)
		})
	}
}

func killAbortedInCancel(t *testing.T, inline bool) {
	sys, _ := newBareSystem(t, nil)
	jobs := sys.Jobs()
	kill := func(c context.Context, id string) (messages.KillResult, *messages.JobSnapshot, error) {
		return jobs.Kill(c, id, registry.NoCaller, registry.KillOptions{})
	}
	first := start(t, sys, job.Spec{Kind: "bash", Label: "first", Run: killedOnCancel})
	res, snap, err := kill(ctx(t), first) // a freed call is pooled, so the next kill reuses it
	require.NoError(t, err)
	require.Equal(t, messages.KillResult_KILL_RESULT_REQUESTED, res)
	require.Equal(t, first, snap.GetId())

	entered, release := make(chan struct{}), make(chan struct{})
	slow := start(t, sys, job.Spec{Kind: "bash", Label: "slow", Run: func() (job.Hooks, error) {
		var settler job.Settler
		return job.Hooks{OnSettle: settler.OnSettle, CancelNonBlocking: inline, Cancel: func(string) error {
			close(entered)
			<-release
			settler.Settle(job.Outcome{Status: job.Killed})
			return nil
		}}, nil
	}})
	aborted, cancel := context.WithCancel(context.Background())
	abortedErr := make(chan error, 1)
	go func() {
		_, _, err := kill(aborted, slow)
		abortedErr <- err
	}()
	<-entered
	cancel()
	requireAborted(t, <-abortedErr, context.Canceled)
	close(release)
	// The aborted kill lands once its Cancel returns: its answer is in the dropped
	// call's channel by the time the settlement is observed.
	settled, err := jobs.AwaitSettled(ctx(t), slow, registry.NoCaller)
	require.NoError(t, err)
	require.Equal(t, job.Killed, settled.Status)

	next := start(t, sys, job.Spec{Kind: "bash", Label: "next", Run: killedOnCancel})
	res, snap, err = kill(ctx(t), next)
	require.NoError(t, err)
	require.Equal(t, messages.KillResult_KILL_RESULT_REQUESTED, res)
	require.Equal(t, next, snap.GetId(), "a kill got the aborted kill's answer")
	res, snap, err = kill(ctx(t), next)
	require.NoError(t, err)
	require.Equal(t, messages.KillResult_KILL_RESULT_ALREADY_FINISHED, res)
	require.Equal(t, next, snap.GetId())
	require.NoError(t, sys.Shutdown(ctx(t)))
}

// An AwaitSettled whose wait ended before the settlement is never reused: the
// registry answers its observer at the settlement, and that answer must not be
// the next observation's.
func TestAwaitSettledAbortedIsNotAnsweredToTheNextOne(t *testing.T) {
	sys, _ := newBareSystem(t, nil)
	jobs := sys.Jobs()
	done := start(t, sys, job.Spec{Kind: "bash", Label: "done", Run: killedOnCancel})
	_, _, err := jobs.Kill(ctx(t), done, registry.NoCaller, registry.KillOptions{})
	require.NoError(t, err)
	snap, err := jobs.AwaitSettled(ctx(t), done, registry.NoCaller) // answered: pooled
	require.NoError(t, err)
	require.Equal(t, done, snap.GetId())

	live := start(t, sys, job.Spec{Kind: "bash", Label: "live", Run: killedOnCancel})
	aborted, cancel := context.WithCancel(context.Background())
	abortedErr := make(chan error, 1)
	go func() {
		_, err := jobs.AwaitSettled(aborted, live, registry.NoCaller)
		abortedErr <- err
	}()
	// Until the registry holds the observer (a probe of its tables).
	require.Eventually(t, func() bool {
		fp, err := jobs.Footprint(ctx(t))
		return err == nil && fp.Observers == 1
	}, replyBudget, time.Millisecond)
	cancel()
	requireAborted(t, <-abortedErr, context.Canceled)
	_, _, err = jobs.Kill(ctx(t), live, registry.NoCaller, registry.KillOptions{})
	require.NoError(t, err) // settles live: its observer's answer goes to the dropped call

	snap, err = jobs.AwaitSettled(ctx(t), done, registry.NoCaller)
	require.NoError(t, err)
	require.Equal(t, done, snap.GetId(), "an observation got the aborted one's answer")
	require.NoError(t, sys.Shutdown(ctx(t)))
}

// A kill of a settled job answered by the registry, and the observation of a
// settled job, reuse their requests and reply channels: what they allocate is the
// snapshot each returns and the registry mailbox's wake: 3 each, where fresh
// requests made 7 and 6. Under -race a sync.Pool drops a quarter of what is put
// in it, so the bounds leave room for that.
func TestKillAndAwaitSettledReuseTheirRequests(t *testing.T) {
	sys, _ := newBareSystem(t, nil)
	jobs := sys.Jobs()
	id := start(t, sys, job.Spec{Kind: "bash", Label: "done", Run: killedOnCancel})
	c := ctx(t)
	_, _, err := jobs.Kill(c, id, registry.NoCaller, registry.KillOptions{})
	require.NoError(t, err)
	_, err = jobs.AwaitSettled(c, id, registry.NoCaller)
	require.NoError(t, err)
	kills := testing.AllocsPerRun(200, func() {
		if res, _, err := jobs.Kill(c, id, registry.NoCaller, registry.KillOptions{}); err != nil || res != messages.KillResult_KILL_RESULT_ALREADY_FINISHED {
			t.Fatalf("kill: %v, %v", res, err)
		}
	})
	observations := testing.AllocsPerRun(200, func() {
		if snap, err := jobs.AwaitSettled(c, id, registry.NoCaller); err != nil || snap.Status != job.Killed {
			t.Fatalf("await: %v, %v", snap, err)
		}
	})
	t.Logf("allocations: kill %.1f, observation %.1f", kills, observations)
	require.LessOrEqual(t, kills, 3.5)
	require.LessOrEqual(t, observations, 3.5)
	require.NoError(t, sys.Shutdown(ctx(t)))
}
