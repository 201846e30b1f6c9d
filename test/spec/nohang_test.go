package spec

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
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
	sys, logs := newBareSystem(t, nil)
	jobs := sys.Jobs()
	bad := newStuck(false)
	defer close(bad.release) // the stuck Cancel's goroutine ends with the test (goleak)
	badID := start(t, sys, bad.spec("bad"))
	other := live()
	otherID := start(t, sys, other.Spec(nil))

	settled := make(chan *messages.JobSnapshot, 1)
	go func() {
		snap, _ := jobs.AwaitSettled(ctx(t), badID, registry.NoCaller)
		settled <- snap
	}()

	// Kill returns at its ctx with the coded error, while Cancel is still blocked.
	_, _, err := jobs.Kill(short(t, 50*time.Millisecond), badID, registry.NoCaller, registry.KillOptions{})
	requireAborted(t, err, context.DeadlineExceeded)
	<-bad.entered

	// Everything else goes on: Get, List, Wait on the stuck job itself, other jobs.
	require.Equal(t, "running", get(t, sys, badID, "").Status.Name(), "the kill has not landed")
	require.Equal(t, []string{badID, otherID}, list(t, sys, ""))
	snap, err := jobs.Wait(ctx(t), badID, 20*time.Millisecond, registry.NoCaller)
	require.NoError(t, err, "a wait on the stuck job times out as its own timeout")
	require.Equal(t, "running", snap.Status.Name())
	res, _, err := jobs.Kill(ctx(t), otherID, registry.NoCaller, registry.KillOptions{})
	require.NoError(t, err)
	require.Equal(t, messages.KillResult_KILL_RESULT_REQUESTED, res)
	snap, err = jobs.Wait(ctx(t), otherID, replyBudget, registry.NoCaller)
	require.NoError(t, err)
	require.Equal(t, "killed", snap.Status.Name())
	third := start(t, sys, live().Spec(nil))

	// A read of the stuck job waits behind its Cancel and returns at its ctx.
	_, _, err = jobs.Read(short(t, 30*time.Millisecond), badID, registry.NoCaller)
	requireAborted(t, err, context.DeadlineExceeded)
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = jobs.Get(cctx, badID, registry.NoCaller)
	requireAborted(t, err, context.Canceled)

	// The model tools keep answering, each at its call's context.
	tl, err := jobtools.MountIn(t.Context(), sys.Jobs(), sys.Scope(), jobtools.Config{})
	require.NoError(t, err)
	listText := okText(t, callTool(ctx(t), tl, 1, tools.Caller{}, jobtools.NameList, `{}`))
	require.Contains(t, listText, badID)
	require.Contains(t, listText, third)
	kill := callTool(short(t, 50*time.Millisecond), tl, 2, tools.Caller{}, jobtools.NameKill, `{"job_id":"`+badID+`"}`)
	require.True(t, kill.IsError)
	require.Contains(t, text(t, kill), "call aborted: context deadline exceeded")
	out := callTool(short(t, 50*time.Millisecond), tl, 3, tools.Caller{}, jobtools.NameOutput, `{"job_id":"`+badID+`"}`)
	require.True(t, out.IsError)
	require.Contains(t, text(t, out), "call aborted")
	require.Contains(t, okText(t, callTool(ctx(t), tl, 4, tools.Caller{}, jobtools.NameKill, `{"job_id":"`+third+`"}`)), third)

	// Shutdown returns at its deadline, the stuck job settled failed and named.
	err = sys.Shutdown(short(t, 100*time.Millisecond))
	if err == nil {
		s := <-settled
		t.Fatalf("DEBUG nil shutdown; settled %v; logs %v", s, logs.Lines())
	}
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
	res, snap, err := jobs.Kill(ctx(t), badID, registry.AsAgent(a), registry.KillOptions{})
	require.NoError(t, err)
	require.Equal(t, messages.KillResult_KILL_RESULT_REQUESTED, res)
	require.Equal(t, "stopping", snap.Status.Name())

	settled := make(chan *messages.JobSnapshot, 1)
	go func() {
		snap, _ := jobs.AwaitSettled(ctx(t), badID, registry.AsAgent(a))
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
	b := troupetest.Agent(t, sys, "bob")
	require.Equal(t, "bob", tools.AsAgent(b).Session())
	require.Same(t, b, tools.AsAgent(b).Agent())
	require.Equal(t, tools.Caller{}, tools.AsAgent(nil))
	require.Empty(t, tools.Caller{}.Session())
	// A call's session is its agent's: there is no second field to disagree.
	raw, _ := json.Marshal(map[string]string{})
	call := tools.Call{ID: "x", Name: jobtools.NameList, Args: raw, Caller: c}
	require.Equal(t, a.Session(), call.Caller.Session())
}

// fakeTimers is an injected clock for SettleTimeout: armed timers wait for Fire.
type fakeTimers struct {
	armed chan fakeTimer
}

type fakeTimer struct {
	d       time.Duration
	f       func()
	stopped *atomic.Bool
}

func (ft *fakeTimers) afterFunc(d time.Duration, f func()) func() bool {
	stopped := &atomic.Bool{}
	ft.armed <- fakeTimer{d: d, f: f, stopped: stopped}
	return func() bool { return !stopped.Swap(true) }
}

func TestNoHang_SettleTimeoutSettlesAJobStuckStopping(t *testing.T) {
	one := int64(1)
	ft := &fakeTimers{armed: make(chan fakeTimer, 4)}
	sys, logs := newBareSystem(t, func(c *troupe.Config) {
		c.MaxConcurrentJobsPerOwner = &one
		c.SettleTimeout = 5 * time.Second
		c.AfterFunc = ft.afterFunc
	})
	defer func() { require.NoError(t, sys.Shutdown(ctx(t))) }()
	a := troupetest.Agent(t, sys, "s")
	bad := newStuck(true)
	spec := bad.spec("bad")
	spec.Owner = a
	id := start(t, sys, spec)
	require.Empty(t, ft.armed, "no timer before a kill")

	_, _, err := sys.Jobs().Kill(ctx(t), id, registry.AsAgent(a), registry.KillOptions{Reason: "enough"})
	require.NoError(t, err)
	timer := <-ft.armed
	require.Equal(t, 5*time.Second, timer.d)
	_, _, err = sys.Jobs().Kill(ctx(t), id, registry.AsAgent(a), registry.KillOptions{})
	require.NoError(t, err)
	require.Equal(t, "stopping", get(t, sys, id, "s").Status.Name(), "stopping until the timer fires")
	require.Empty(t, ft.armed, "a second kill does not re-arm: the clock runs from the first")

	settled := make(chan *messages.JobSnapshot, 1)
	go func() {
		snap, _ := sys.Jobs().AwaitSettled(ctx(t), id, registry.AsAgent(a))
		settled <- snap
	}()
	timer.f() // the clock reaches the timeout
	snap := <-settled
	require.Equal(t, "failed", snap.Status.Name())
	require.Equal(t, job.TextSettleTimeout, snap.GetDetail())
	require.True(t, logs.Contains("jobs: job "+id+" did not stop within 5s after it was killed"))
	// Its slot is free, and a late outcome is ignored.
	next := live().Spec(a)
	start(t, sys, next)
	bad.done <- job.Outcome{Status: job.Killed}
	require.Equal(t, "failed", get(t, sys, id, "s").Status.Name())
}

func TestNoHang_SettleTimeoutIsOffByDefaultAndStoppedBySettlement(t *testing.T) {
	ft := &fakeTimers{armed: make(chan fakeTimer, 4)}
	sys, _ := newBareSystem(t, func(c *troupe.Config) { c.AfterFunc = ft.afterFunc })
	p := troupetest.NewProducer()
	id := start(t, sys, p.Spec(nil))
	_, _, err := sys.Jobs().Kill(ctx(t), id, registry.NoCaller, registry.KillOptions{})
	require.NoError(t, err)
	require.Empty(t, ft.armed, "off by default: SPEC's semantics stand")
	p.Settle(job.Outcome{Status: job.Killed})
	snap, err := sys.Jobs().Wait(ctx(t), id, replyBudget, registry.NoCaller)
	require.NoError(t, err)
	require.Equal(t, "killed", snap.Status.Name())
	require.NoError(t, sys.Shutdown(ctx(t)))

	ft2 := &fakeTimers{armed: make(chan fakeTimer, 4)}
	sys2, _ := newBareSystem(t, func(c *troupe.Config) { c.SettleTimeout = time.Minute; c.AfterFunc = ft2.afterFunc })
	defer func() { require.NoError(t, sys2.Shutdown(ctx(t))) }()
	p2 := troupetest.NewProducer()
	id2 := start(t, sys2, p2.Spec(nil))
	_, _, err = sys2.Jobs().Kill(ctx(t), id2, registry.NoCaller, registry.KillOptions{})
	require.NoError(t, err)
	timer := <-ft2.armed
	p2.Settle(job.Outcome{Status: job.Killed})
	snap, err = sys2.Jobs().Wait(ctx(t), id2, replyBudget, registry.NoCaller)
	require.NoError(t, err)
	require.Equal(t, "killed", snap.Status.Name())
	require.True(t, timer.stopped.Load(), "settlement stops the timer")
	timer.f() // a firing that raced the stop changes nothing
	require.Equal(t, "killed", get(t, sys2, id2, "").Status.Name())
}

func TestNoHang_NegativeSettleTimeoutIsInvalid(t *testing.T) {
	err := troupe.Config{SettleTimeout: -time.Second}.Validate()
	require.ErrorIs(t, err, messages.ErrInvalidConfig)
}

// Every waiting client call returns job/aborted — matching context.Canceled — for
// an ended ctx, and changes nothing.
func TestNoHang_EveryWaitingCallEndsWithItsCtx(t *testing.T) {
	e := newContEnv(t)
	sys := e.sys
	jobs := sys.Jobs()
	p, _ := e.parent(t, "P")
	prod := live()
	id := start(t, sys, prod.Spec(nil))
	done, cancel := context.WithCancel(context.Background())
	cancel()
	a, err := sys.NewAgent(nil, "late")
	require.NoError(t, err)

	calls := map[string]func() error{
		"Start":            func() error { _, err := jobs.Start(done, live().Spec(nil)); return err },
		"Get":              func() error { _, err := jobs.Get(done, id, registry.NoCaller); return err },
		"Record":           func() error { _, _, err := jobs.Record(done, id, registry.NoCaller); return err },
		"List":             func() error { _, err := jobs.List(done, registry.NoCaller); return err },
		"Read":             func() error { _, _, err := jobs.Read(done, id, registry.NoCaller); return err },
		"Kill":             func() error { _, _, err := jobs.Kill(done, id, registry.NoCaller, registry.KillOptions{}); return err },
		"Waiters":          func() error { _, err := jobs.Waiters(done, id); return err },
		"AwaitSettled":     func() error { _, err := jobs.AwaitSettled(done, id, registry.NoCaller); return err },
		"AttachController": func() error { _, err := jobs.AttachController(done, sys.Scope(), "x"); return err },
		"OnJobDone": func() error {
			_, err := jobs.OnJobDone(done, sys.Scope(), func(*messages.JobSnapshot, registry.Owner) {})
			return err
		},
		"OnJobsChanged":   func() error { _, err := jobs.OnJobsChanged(done, sys.Scope(), func(registry.Owner) {}); return err },
		"MountAgents":     func() error { _, err := jobs.MountAgents(done, sys.Scope()); return err },
		"RegisterAgent":   func() error { return jobs.RegisterAgent(done, a) },
		"UnregisterAgent": func() error { return jobs.UnregisterAgent(done, p) },
		"Manager.Start": func() error {
			_, _, err := e.m.Start(done, p, "spawn", "l", "c1", subagent.Request{Prompt: "x"})
			return err
		},
		"Manager.Followup":  func() error { _, err := e.m.Followup(done, p, "c1", "x", session.Source{Kind: "user"}); return err },
		"Manager.Interrupt": func() error { return e.m.Interrupt(done, "c1", activation.Authority{ParentSession: "P"}) },
		"Manager.Report":    func() error { _, err := e.m.Report(done, p, "x", false); return err },
		"Manager.List":      func() error { _, err := e.m.List(done, p, true); return err },
		"Manager.DrainContinuableChildren": func() error {
			return e.m.DrainContinuableChildren(done, p, []string{"c1"})
		},
		"Manager.DrainContinuableDescendants": func() error {
			return e.m.DrainContinuableDescendants(done, []*owner.Agent{p})
		},
	}
	for name, call := range calls {
		err := call()
		require.ErrorIs(t, err, messages.ErrAborted, name)
		require.ErrorIs(t, err, context.Canceled, name)
	}
	// Nothing changed: the job runs, no second job, the late agent is unregistered.
	require.Equal(t, "running", get(t, sys, id, "").Status.Name())
	require.Equal(t, []string{id}, list(t, sys, ""))
	require.Nil(t, jobs.RegisteredAgent(ctx(t), "late"))
	require.True(t, jobs.RegisteredAgent(ctx(t), "P").Equal(p.PID()))
	require.Nil(t, jobs.RegisteredAgent(done, "P"), "a lookup with an ended ctx answers nothing")
	require.Zero(t, e.m.Live(done))
	_, ok := e.m.Status(done, "c1")
	require.False(t, ok)
	// The tools pass their call's context.
	tl, err := jobtools.MountIn(t.Context(), sys.Jobs(), sys.Scope(), jobtools.Config{})
	require.NoError(t, err)
	for _, name := range []string{jobtools.NameList, jobtools.NameOutput, jobtools.NameKill} {
		res := callTool(done, tl, 1, tools.Caller{}, name, `{"job_id":"`+id+`"}`)
		if name == jobtools.NameList {
			res = callTool(done, tl, 1, tools.Caller{}, name, `{}`)
		}
		require.True(t, res.IsError, name)
		require.Contains(t, text(t, res), "call aborted: context canceled", name)
	}
	require.Equal(t, "running", get(t, sys, id, "").Status.Name(), "the aborted job_kill did not kill")
}

// A Kill whose ctx ends while an earlier Cancel of the same job is running is
// answered job/aborted and, when the first Cancel returns, does not run its own.
func TestNoHang_KillQueuedBehindABlockedCancelAbortsWithoutCancelling(t *testing.T) {
	sys, _ := newBareSystem(t, nil)
	defer func() { require.NoError(t, sys.Shutdown(ctx(t))) }()
	calls := make(chan string, 4)
	release := make(chan struct{})
	done := make(chan job.Outcome, 1)
	id := start(t, sys, job.Spec{Kind: "bad", Label: "l", Run: func() (job.Hooks, error) {
		return job.Hooks{Done: done, Cancel: func(reason string) error {
			calls <- reason
			if reason == "first" {
				<-release
			}
			return nil
		}}, nil
	}})
	first := make(chan error, 1)
	go func() {
		_, _, err := sys.Jobs().Kill(ctx(t), id, registry.NoCaller, registry.KillOptions{Reason: "first"})
		first <- err
	}()
	require.Equal(t, "first", <-calls)
	_, _, err := sys.Jobs().Kill(short(t, 30*time.Millisecond), id, registry.NoCaller, registry.KillOptions{Reason: "second"})
	requireAborted(t, err, context.DeadlineExceeded)
	close(release)
	require.NoError(t, <-first)
	snap := get(t, sys, id, "")
	require.Equal(t, "stopping", snap.Status.Name())
	done <- job.Outcome{Status: job.Killed}
	snap, err = sys.Jobs().Wait(ctx(t), id, replyBudget, registry.NoCaller)
	require.NoError(t, err)
	require.Equal(t, "first", snap.GetDetail(), "the aborted kill's reason was not recorded")
	require.Empty(t, calls, "the aborted kill never called Cancel")
}

// A Start aborted while the registry still runs its producer gets no answer; the
// registry's late answer (the job it then registered) belongs to that Start alone:
// the next Start is answered with its own job, never with the aborted one's.
func TestNoHang_AbortedStartsLateAnswerIsNotTheNextStarts(t *testing.T) {
	sys, _ := newBareSystem(t, nil)
	defer func() { require.NoError(t, sys.Shutdown(ctx(t))) }()
	entered, release := make(chan struct{}), make(chan struct{})
	slow := live().Spec(nil)
	run := slow.Run
	slow.Run = func() (job.Hooks, error) {
		close(entered)
		<-release
		return run()
	}
	sctx, cancel := context.WithCancel(context.Background())
	aborted := make(chan error, 1)
	go func() {
		_, err := sys.Jobs().Start(sctx, slow)
		aborted <- err
	}()
	<-entered
	cancel()
	requireAborted(t, <-aborted, context.Canceled)
	close(release)
	id := start(t, sys, live().Spec(nil))
	ids := list(t, sys, "")
	require.Len(t, ids, 2, "the aborted Start's job was registered, and the next one")
	require.Equal(t, ids[1], id, "the next Start is answered with its own job")
	require.NotEqual(t, ids[0], id)
}
