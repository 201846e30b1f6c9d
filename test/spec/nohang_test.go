package spec

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/tools/jobtools"
	"github.com/troupe-rt/troupe/troupetest"
)

// Issue 12 scope 3, "Context everywhere, no hang": a misbehaving producer delays
// nobody but its own job, every waiting call returns at its ctx with a coded
// error, and Shutdown settles what would not stop at its deadline.

// stuck is a producer whose Cancel blocks until release is closed (entered is
// closed when it is first called), or — neverDone — whose Cancel returns at once
// but whose Done never sends.
type stuck struct {
	entered, release chan struct{}
	done             chan job.Outcome
	neverDone        bool
}

func newStuck(neverDone bool) *stuck {
	return &stuck{entered: make(chan struct{}), release: make(chan struct{}), done: make(chan job.Outcome, 1), neverDone: neverDone}
}

func (s *stuck) spec(kind string) job.Spec {
	return job.Spec{Kind: kind, Label: "misbehaving " + kind, Run: func() (job.Hooks, error) {
		return job.Hooks{Done: s.done, Cancel: func(string) error {
			select {
			case <-s.entered:
			default:
				close(s.entered)
			}
			if !s.neverDone {
				<-s.release
			}
			return nil
		}}, nil
	}}
}

// newBareSystem is a served system the test shuts down itself (troupetest's
// cleanup requires a clean shutdown, which these tests do not get).
func newBareSystem(t *testing.T, mutate func(*troupe.Config)) (*troupe.System, *troupetest.Logs) {
	t.Helper()
	logs := &troupetest.Logs{}
	cfg := troupe.DefaultConfig()
	cfg.Logger = slog.New(logs)
	if mutate != nil {
		mutate(&cfg)
	}
	sys, err := troupe.New(cfg)
	require.NoError(t, err)
	_, err = sys.Jobs().AttachController(ctx(t), sys.Scope(), "test")
	require.NoError(t, err)
	_, err = sys.Jobs().MountAgents(ctx(t), sys.Scope())
	require.NoError(t, err)
	return sys, logs
}

func short(t *testing.T, d time.Duration) context.Context {
	c, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return c
}

// requireAborted requires the job/aborted code and ctx's error.
func requireAborted(t *testing.T, err error, ctxErr error) {
	t.Helper()
	require.ErrorIs(t, err, messages.ErrAborted)
	require.ErrorIs(t, err, ctxErr)
}

func TestNoHang_CancelThatBlocksDelaysOnlyItsOwnJob(t *testing.T) {
	sys, _ := newBareSystem(t, nil)
	jobs := sys.Jobs()
	bad := newStuck(false)
	defer close(bad.release) // the stuck Cancel's goroutine ends with the test (goleak)
	badID := start(t, sys, bad.spec("bad"))
	other := live()
	otherID := start(t, sys, other.Spec(nil))

	settled := make(chan *messages.JobSnapshot, 1)
	go func() {
		snap, _ := jobs.AwaitSettled(ctx(t), badID, "")
		settled <- snap
	}()

	// Kill returns at its ctx with the coded error, while Cancel is still blocked.
	_, _, err := jobs.Kill(short(t, 50*time.Millisecond), badID, "", registry.KillOptions{})
	requireAborted(t, err, context.DeadlineExceeded)
	<-bad.entered

	// Everything else goes on: Get, List, Wait on the stuck job itself, other jobs.
	require.Equal(t, "running", get(t, sys, badID, "").Status.Name(), "the kill has not landed")
	require.Equal(t, []string{badID, otherID}, list(t, sys, ""))
	snap, err := jobs.Wait(ctx(t), badID, 20*time.Millisecond, "")
	require.NoError(t, err, "a wait on the stuck job times out as its own timeout")
	require.Equal(t, "running", snap.Status.Name())
	res, _, err := jobs.Kill(ctx(t), otherID, "", registry.KillOptions{})
	require.NoError(t, err)
	require.Equal(t, messages.KillResult_KILL_RESULT_REQUESTED, res)
	snap, err = jobs.Wait(ctx(t), otherID, replyBudget, "")
	require.NoError(t, err)
	require.Equal(t, "killed", snap.Status.Name())
	third := start(t, sys, live().Spec(nil))

	// A read of the stuck job waits behind its Cancel and returns at its ctx.
	_, _, err = jobs.Read(short(t, 30*time.Millisecond), badID, "")
	requireAborted(t, err, context.DeadlineExceeded)
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = jobs.Get(cctx, badID, "")
	requireAborted(t, err, context.Canceled)

	// The model tools keep answering, each at its call's context.
	tl, err := jobtools.MountIn(sys, sys.Scope(), jobtools.Config{})
	require.NoError(t, err)
	listText := okText(t, callTool(ctx(t), tl, 1, "", jobtools.NameList, `{}`))
	require.Contains(t, listText, badID)
	require.Contains(t, listText, third)
	kill := callTool(short(t, 50*time.Millisecond), tl, 2, "", jobtools.NameKill, `{"job_id":"`+badID+`"}`)
	require.True(t, kill.IsError)
	require.Contains(t, text(t, kill), "call aborted: context deadline exceeded")
	out := callTool(short(t, 50*time.Millisecond), tl, 3, "", jobtools.NameOutput, `{"job_id":"`+badID+`"}`)
	require.True(t, out.IsError)
	require.Contains(t, text(t, out), "call aborted")
	require.Contains(t, okText(t, callTool(ctx(t), tl, 4, "", jobtools.NameKill, `{"job_id":"`+third+`"}`)), third)

	// Shutdown returns at its deadline, the stuck job settled failed and named.
	err = sys.Shutdown(short(t, 100*time.Millisecond))
	require.ErrorIs(t, err, messages.ErrShutdownTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), badID)
	require.NotContains(t, err.Error(), otherID)
	var me *messages.Error
	require.True(t, errors.As(err, &me))
	require.Equal(t, badID, me.Details["jobIds"])
	snap = <-settled
	require.NotNil(t, snap)
	require.Equal(t, "failed", snap.Status.Name())
	require.Equal(t, job.TextShutdownDeadline, snap.GetDetail())
}

func TestNoHang_DoneThatNeverSendsIsSettledAtShutdownDeadline(t *testing.T) {
	sys, logs := newBareSystem(t, nil)
	jobs := sys.Jobs()
	bad := newStuck(true)
	a := troupetest.Agent(t, sys, "s")
	spec := bad.spec("bad")
	spec.Owner = a
	badID := start(t, sys, spec)
	res, snap, err := jobs.Kill(ctx(t), badID, "s", registry.KillOptions{})
	require.NoError(t, err)
	require.Equal(t, messages.KillResult_KILL_RESULT_REQUESTED, res)
	require.Equal(t, "stopping", snap.Status.Name())

	settled := make(chan *messages.JobSnapshot, 1)
	go func() {
		snap, _ := jobs.AwaitSettled(ctx(t), badID, "s")
		settled <- snap
	}()
	require.Equal(t, "stopping", get(t, sys, badID, "s").Status.Name(), "it stays stopping")
	require.Equal(t, []string{badID}, list(t, sys, "s"))

	began := time.Now()
	err = sys.Shutdown(short(t, 100*time.Millisecond))
	require.Less(t, time.Since(began), 2*time.Second, "Shutdown returns at its deadline")
	require.ErrorIs(t, err, messages.ErrShutdownTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), "1 job(s) did not stop in time")
	require.Contains(t, err.Error(), badID)
	snap = <-settled
	require.Equal(t, "failed", snap.Status.Name())
	require.Equal(t, job.TextShutdownDeadline, snap.GetDetail())
	require.True(t, logs.Contains("jobs: job "+badID+" did not stop before the shutdown deadline"))
	// Later calls wait for the same shutdown, which has finished.
	require.NoError(t, sys.Shutdown(ctx(t)))
}

func TestNoHang_ShutdownRefusesNewWorkFromItsFirstMoment(t *testing.T) {
	sys, _ := newBareSystem(t, nil)
	bad := newStuck(true)
	spec := bad.spec("bad")
	spec.Owner = troupetest.Agent(t, sys, "s")
	id := start(t, sys, spec)
	// Shutdown's first phase (the agents' teardown) is stuck on the owned job that
	// never settles: the job service itself is not yet disposed, and still a Start
	// made once Shutdown has been called is refused.
	down := make(chan error, 1)
	sctx, cancel := context.WithCancel(context.Background())
	go func() { down <- sys.Shutdown(sctx) }()
	require.Eventually(t, func() bool { return get(t, sys, id, "s").Status.Name() == "stopping" },
		replyBudget, time.Millisecond, "the owner teardown cancelled the job")
	_, err := sys.Jobs().Start(ctx(t), live().Spec(nil))
	require.ErrorIs(t, err, messages.ErrStopped)
	require.Equal(t, registry.TextShuttingDown, err.Error())
	require.Equal(t, []string{id}, list(t, sys, "s"), "nothing was admitted")
	cancel()
	err = <-down
	require.ErrorIs(t, err, messages.ErrShutdownTimeout)
	require.ErrorIs(t, err, context.Canceled)
	require.Contains(t, err.Error(), id)
}

func TestNoHang_StartAfterShutdownCallIsRefused(t *testing.T) {
	sys, _ := newBareSystem(t, nil)
	// Shutdown is called first: the Start that follows it in this goroutine must be
	// refused, never admitted (the refusal is queued before Shutdown returns).
	done := make(chan error, 1)
	go func() { done <- sys.Shutdown(ctx(t)) }()
	require.NoError(t, <-done)
	_, err := sys.Jobs().Start(ctx(t), live().Spec(nil))
	require.Error(t, err)
	require.ErrorIs(t, err, messages.ErrStopped)
}

func TestNoHang_ForceFailLiveFreesTheSlot(t *testing.T) {
	one := int64(1)
	sys, _ := newBareSystem(t, func(c *troupe.Config) { c.MaxConcurrentJobsPerOwner = &one })
	defer func() { require.NoError(t, sys.Shutdown(ctx(t))) }()
	a := troupetest.Agent(t, sys, "s")
	bad := newStuck(true)
	spec := bad.spec("bad")
	spec.Owner = a
	id := start(t, sys, spec)
	next := live().Spec(nil)
	next.Owner = a
	_, err := sys.Jobs().Start(ctx(t), next)
	require.ErrorIs(t, err, messages.ErrCapacity, "the bucket is full")

	ids, err := sys.Jobs().ForceFailLive(ctx(t), job.TextShutdownDeadline, "forced %s")
	require.NoError(t, err)
	require.Equal(t, []string{id}, ids)
	snap := get(t, sys, id, "s")
	require.Equal(t, "failed", snap.Status.Name())
	require.Equal(t, job.TextShutdownDeadline, snap.GetDetail())
	// The slot is free: the next start in the bucket is admitted; the producer's
	// late outcome is ignored (first wins).
	start(t, sys, next)
	bad.done <- job.Outcome{Status: job.Completed}
	require.Equal(t, "failed", get(t, sys, id, "s").Status.Name())
}

func TestNoHang_ToolCallerIsOneIdentity(t *testing.T) {
	sys, _ := troupetest.Served(t)
	a := troupetest.Agent(t, sys, "alice")
	c := tools.AsAgent(a)
	require.Equal(t, "alice", c.Session())
	require.Same(t, a, c.Agent())
	require.Equal(t, "bob", tools.AsSession("bob").Session())
	require.Nil(t, tools.AsSession("bob").Agent())
	require.Equal(t, tools.Caller{}, tools.AsAgent(nil))
	require.Empty(t, tools.Caller{}.Session())
	// A call's session is its agent's: there is no second field to disagree.
	raw, _ := json.Marshal(map[string]string{})
	call := tools.Call{ID: "x", Name: jobtools.NameList, Args: raw, Caller: c}
	require.Equal(t, a.Session(), call.Caller.Session())
}
