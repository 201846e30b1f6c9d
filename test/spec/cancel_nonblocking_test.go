package spec

import (
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/troupetest"
)

// Hooks.CancelNonBlocking: a Cancel declared to return at once is called on the job
// actor itself, with the same results as a Cancel run on a runner goroutine.

// onJobActor reports whether the calling goroutine is running a job actor's
// startCancel (the inline call), as opposed to a runner's loop.
func onJobActor() bool {
	buf := make([]byte, 16<<10)
	stack := string(buf[:runtime.Stack(buf, false)])
	return strings.Contains(stack, "(*jobActor).startCancel(") // not its closure, which a runner runs
}

// A declared non-blocking Cancel runs on the job actor; the outcome it settles
// inside rides with the stop, so the kill's answer (requested) comes after the
// settlement was committed: the record is killed when Kill returns, onJobDone has
// fired once and the slot is free. An undeclared Cancel still runs on a runner.
func TestCancelNonBlockingRunsOnTheJobActorAndSettlesWithTheStop(t *testing.T) {
	for _, inline := range []bool{false, true} {
		t.Run(map[bool]string{false: "runner", true: "inline"}[inline], func(t *testing.T) {
			sys, _ := troupetest.Served(t, func(c *troupe.Config) { l := int64(1); c.MaxConcurrentJobsPerOwner = &l })
			jobs := sys.Jobs()
			var dones atomic.Int32
			_, err := jobs.OnJobDone(ctx(t), sys.Scope(), func(snap *messages.JobSnapshot, _ registry.Owner) { dones.Add(1) })
			require.NoError(t, err)
			calledOn := make(chan bool, 2)
			id := start(t, sys, job.Spec{Kind: "bash", Label: "quick", Run: func() (job.Hooks, error) {
				var s job.Settler
				return job.Hooks{OnSettle: s.OnSettle, CancelNonBlocking: inline, Cancel: func(string) error {
					calledOn <- onJobActor()
					s.Settle(job.Outcome{Status: job.Killed, Detail: "signal: SIGTERM"})
					return nil
				}}, nil
			}})
			res, snap, err := jobs.Kill(ctx(t), id, registry.NoCaller, registry.KillOptions{Reason: "enough"})
			require.NoError(t, err)
			require.Equal(t, messages.KillResult_KILL_RESULT_REQUESTED, res)
			require.Equal(t, job.Stopping, snap.Status, "the kill's snapshot is the one its stop committed")
			require.Equal(t, inline, <-calledOn, "Cancel ran on the job actor exactly when declared non-blocking")
			got := get(t, sys, id, "")
			require.Equal(t, job.Killed, got.Status, "the settlement was committed before the kill was answered")
			require.Equal(t, "signal: SIGTERM; enough", got.GetDetail(), "the kill landed before the outcome: its reason is recorded")
			require.Equal(t, int32(1), dones.Load(), "onJobDone fired once, before the kill's answer")
			// The slot (a limit of 1) is free: the next job starts.
			next := start(t, sys, job.Spec{Kind: "bash", Label: "next", Run: killedOnCancel})
			res, _, err = jobs.Kill(ctx(t), next, registry.NoCaller, registry.KillOptions{})
			require.NoError(t, err)
			require.Equal(t, messages.KillResult_KILL_RESULT_REQUESTED, res)
			require.Len(t, calledOn, 0, "Cancel was called once")
		})
	}
}

// A declared non-blocking Cancel that fails (an error, a panic) changes nothing and
// loses nothing: the kill is answered job/cancel-failed with the Cancel's text, the
// job stays running and readable, and a later kill whose Cancel succeeds settles it.
func TestCancelNonBlockingThatFailsChangesNothing(t *testing.T) {
	for _, how := range []string{"error", "panic"} {
		t.Run(how, func(t *testing.T) {
			sys, _ := troupetest.Served(t)
			jobs := sys.Jobs()
			var calls atomic.Int32
			id := start(t, sys, job.Spec{Kind: "bash", Label: "stubborn", Run: func() (job.Hooks, error) {
				var s job.Settler
				return job.Hooks{OnSettle: s.OnSettle, CancelNonBlocking: true, ReadOutput: func() (string, error) { return "out", nil },
					Cancel: func(string) error {
						if calls.Add(1) == 1 {
							if how == "panic" {
								panic("cancel boom")
							}
							return errors.New("cancel boom")
						}
						s.Settle(job.Outcome{Status: job.Killed})
						return nil
					}}, nil
			}})
			_, _, err := jobs.Kill(ctx(t), id, registry.NoCaller, registry.KillOptions{})
			requireCode(t, err, messages.ErrCancelFailed, "cancel boom")
			require.Equal(t, job.Running, get(t, sys, id, "").Status, "a failed Cancel changes nothing")
			text, snap, err := jobs.Read(ctx(t), id, registry.NoCaller)
			require.NoError(t, err, "the job actor still serves its reads")
			require.Equal(t, "out", text)
			require.Equal(t, job.Running, snap.Status)
			res, _, err := jobs.Kill(ctx(t), id, registry.NoCaller, registry.KillOptions{})
			require.NoError(t, err)
			require.Equal(t, messages.KillResult_KILL_RESULT_REQUESTED, res)
			settled, err := jobs.AwaitSettled(ctx(t), id, registry.NoCaller)
			require.NoError(t, err)
			require.Equal(t, job.Killed, settled.Status)
			require.Equal(t, int32(2), calls.Load())
		})
	}
}

// A declared non-blocking Cancel that does not settle leaves the job stopping until
// its producer does, as a runner's would; an outcome sent later settles it.
func TestCancelNonBlockingWithoutOutcomeLeavesTheJobStopping(t *testing.T) {
	sys, _ := troupetest.Served(t)
	jobs := sys.Jobs()
	var s job.Settler
	id := start(t, sys, job.Spec{Kind: "bash", Label: "slow to stop", Run: func() (job.Hooks, error) {
		return job.Hooks{OnSettle: s.OnSettle, CancelNonBlocking: true, Cancel: func(string) error { return nil }}, nil
	}})
	res, snap, err := jobs.Kill(ctx(t), id, registry.NoCaller, registry.KillOptions{})
	require.NoError(t, err)
	require.Equal(t, messages.KillResult_KILL_RESULT_REQUESTED, res)
	require.Equal(t, job.Stopping, snap.Status)
	require.Equal(t, job.Stopping, get(t, sys, id, "").Status)
	require.True(t, s.Settle(job.Outcome{Status: job.Killed, Detail: "at last"}))
	settled, err := jobs.AwaitSettled(ctx(t), id, registry.NoCaller)
	require.NoError(t, err)
	require.Equal(t, job.Killed, settled.Status)
	require.Equal(t, "at last", settled.GetDetail())
}

// stopCommitRounds is how many kills TestLandedKillCommitsOnTheJobActor makes: a
// registry still finishing the run that routed the kill takes the job actor's
// StopRequested in that run, on the pool, so under load one round may miss the
// inline path; every round checks the kill's results.
const stopCommitRounds = 20

// A landed kill whose settlement rides with the stop (a non-blocking Cancel that
// settles) is committed by the job actor's own run when the registry is idle
// (job.StopRequested is an internal/mailbox Inline message): the onJobDone
// listener, called by the commit, runs under the job actor's cancelReturned. The
// results are those of the pool path: requested with the stopping snapshot, the
// record killed when Kill returns, onJobDone once per job. Fails with a
// StopRequested that is queued for a registry worker.
func TestLandedKillCommitsOnTheJobActor(t *testing.T) {
	sys, _ := troupetest.Served(t)
	jobs := sys.Jobs()
	stacks := make(chan string, stopCommitRounds)
	_, err := jobs.OnJobDone(ctx(t), sys.Scope(), func(*messages.JobSnapshot, registry.Owner) {
		buf := make([]byte, 32<<10)
		stacks <- string(buf[:runtime.Stack(buf, false)])
	})
	require.NoError(t, err)
	inline := 0
	for i := range stopCommitRounds {
		id := start(t, sys, job.Spec{Kind: "bash", Label: "quick", Run: func() (job.Hooks, error) {
			var s job.Settler
			return job.Hooks{OnSettle: s.OnSettle, CancelNonBlocking: true, Cancel: func(string) error {
				s.Settle(job.Outcome{Status: job.Killed})
				return nil
			}}, nil
		}})
		res, snap, err := jobs.Kill(ctx(t), id, registry.NoCaller, registry.KillOptions{})
		require.NoError(t, err)
		require.Equal(t, messages.KillResult_KILL_RESULT_REQUESTED, res)
		require.Equal(t, job.Stopping, snap.Status, "round %d: the kill's snapshot is the one its stop committed", i)
		require.Equal(t, job.Killed, get(t, sys, id, "").Status, "round %d: committed before the kill was answered", i)
		stack := <-stacks
		require.Contains(t, stack, "(*registryActor).stopRequested", "round %d: committed with the stop", i)
		if strings.Contains(stack, "(*jobActor).cancelReturned") {
			inline++
		}
	}
	require.Empty(t, stacks, "onJobDone fired once per job")
	t.Logf("commits on the job actor's run: %d of %d", inline, stopCommitRounds)
	require.Positive(t, inline, "no landed kill was committed by the job actor's run")
}
