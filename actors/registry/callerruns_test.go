package registry

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/scope"
)

// callerRunsRegistry spawns a registry whose Client's requests are run by their
// callers when it is idle (Config.CallerRuns), on protoactor's default dispatcher,
// with a job controller attached in its global scope; it is stopped in cleanup as
// troupe's System stops it.
func callerRunsRegistry(t *testing.T) *Client { return testRegistry(t, true) }

// testRegistry is callerRunsRegistry with Config.CallerRuns set to callerRuns.
func testRegistry(t *testing.T, callerRuns bool) *Client {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }),
		actor.WithDeadLetterThrottleInterval(time.Millisecond)) // docs/TESTING.md: goleak and the dead-letter throttle
	root := scope.NewRoot("global")
	watch := job.NewWatcher()
	stopped := make(chan struct{})
	c, err := Spawn(system, Config{MaxConcurrentJobsPerOwner: 10, RootScope: root, Logger: quiet,
		Now: func() int64 { return time.Now().UnixMilli() }, Watcher: watch, CallerRuns: callerRuns}, stopped)
	require.NoError(t, err)
	t.Cleanup(func() {
		bg := context.Background()
		_ = root.Dispose(bg)
		_ = c.Dispose(bg)
		_ = system.Root.PoisonFuture(c.PID()).Wait()
		close(stopped)
		watch.Close()
		system.Shutdown()
	})
	_, err = c.AttachController(context.Background(), root, "test")
	require.NoError(t, err)
	return c
}

// inCall reports whether the calling goroutine is inside the Client method named
// (its stack has the method's frame): a registry handler run by that caller.
func inCall(method string) bool { return inFrame("registry.(*Client)." + method + "(") }

// killable is a producer's hooks whose Cancel settles the job killed.
func killable(readOutput func() (string, error)) job.Hooks {
	done := make(chan job.Outcome, 1)
	return job.Hooks{Done: done, ReadOutput: readOutput, Cancel: func(string) error {
		select {
		case done <- job.Outcome{Status: job.Killed}:
		default:
		}
		return nil
	}}
}

// callerRounds is how many reads TestACallerRunsOnlyItsOwnRequest tries: a read
// made while the registry still finishes an earlier run (the job actor's start,
// the controller's attach) is queued and run by a worker, not by its caller.
const callerRounds = 50

// TestACallerRunsOnlyItsOwnRequest: a Read of a live stream job made while the
// registry is idle is run by the caller's goroutine (the producer's ReadOutput runs
// inside Client.Read), and that run is bounded to the caller's own request: a start
// request posted to the registry while the read is handled (here by ReadOutput
// itself, so it is surely posted during that run) is not run by the reader — it
// goes to the dispatcher, and is answered from there. Fails with an inline run
// that drains the mailbox (internal/mailbox Inline before it was bounded): the
// start would run inside Client.Read, and with callers never running requests.
func TestACallerRunsOnlyItsOwnRequest(t *testing.T) {
	c := callerRunsRegistry(t)
	ctx := context.Background()
	started := make(chan bool, 1) // the queued start's Run: was it inside Client.Read?
	var queued chan startRes
	readOutput := func() (string, error) {
		if !inCall("Read") {
			return "", nil // this read was queued: a worker runs it
		}
		queued = make(chan startRes, 1)
		c.root.Send(c.pid, &startReq{reply: queued, byCaller: true, spec: job.Spec{Kind: "queued", Label: "queued",
			Run: func() (job.Hooks, error) {
				started <- inCall("Read")
				return killable(nil), nil
			}}})
		return "mine", nil
	}
	id, err := c.Start(ctx, job.Spec{Kind: "stream", Label: "stream", Run: func() (job.Hooks, error) {
		return killable(readOutput), nil
	}})
	require.NoError(t, err)
	for range callerRounds {
		text, _, err := c.Read(ctx, id, NoCaller)
		require.NoError(t, err)
		if text == "" {
			continue
		}
		require.Equal(t, "mine", text, "the caller's own read was answered")
		require.False(t, <-started, "the start posted during the caller's run was run by the caller")
		res := <-queued
		require.NoError(t, res.err)
		return
	}
	t.Fatalf("none of %d reads of the idle registry ran on its caller", callerRounds)
}

// TestRequestsWaitForTheDispatcherWithoutCallerRuns: with Config.CallerRuns off
// (troupe's choice for any dispatcher but its pool, such as a seeded schedule),
// no request is run by its caller: a start's Run and a read's ReadOutput are never
// inside the Client's call.
func TestRequestsWaitForTheDispatcherWithoutCallerRuns(t *testing.T) {
	c := testRegistry(t, false)
	ctx := context.Background()
	onCaller := 0
	for range 10 {
		id, err := c.Start(ctx, job.Spec{Kind: "stream", Label: "stream", Run: func() (job.Hooks, error) {
			if inCall("Start") {
				onCaller++
			}
			return killable(func() (string, error) {
				if inCall("Read") {
					onCaller++
				}
				return "", nil
			}), nil
		}})
		require.NoError(t, err)
		_, _, err = c.Read(ctx, id, NoCaller)
		require.NoError(t, err)
	}
	require.Zero(t, onCaller, "a request ran on its caller with CallerRuns off")
}

// handlerCtx is a cancellable ctx that notes whether the registry's read handler
// checked it on the goroutine of the Client.Read that sent it (ran set).
type handlerCtx struct {
	context.Context
	ran chan struct{}
}

func (h handlerCtx) Err() error {
	if inCall("Read") && inFrame("(*registryActor).read") {
		select {
		case h.ran <- struct{}{}:
		default:
		}
	}
	return h.Context.Err()
}

// inFrame reports whether the calling goroutine's stack has a frame named fn.
func inFrame(fn string) bool {
	buf := make([]byte, 64<<10)
	return strings.Contains(string(buf[:runtime.Stack(buf, false)]), fn)
}

// TestACancellableReadRunsOnItsCaller: a Read whose ctx can end (job_output's) of
// the idle registry runs on its caller when its answer calls no producer hook
// that may block: a live stream job whose ReadOutput is declared non-blocking
// (job.Hooks.ReadNonBlocking), a live final-output job and a settled one. Fails
// with such reads always handed to the worker (Client.Read's byCaller false for a
// ctx that can end, as before): none of the rounds runs on the caller.
func TestACancellableReadRunsOnItsCaller(t *testing.T) {
	c := callerRunsRegistry(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	onCaller := make(chan bool, 1)
	declared := killable(func() (string, error) {
		select {
		case onCaller <- inCall("Read"):
		default:
		}
		return "", nil
	})
	declared.ReadNonBlocking = true
	stream, err := c.Start(context.Background(), job.Spec{Kind: "stream", Label: "stream", Run: func() (job.Hooks, error) { return declared, nil }})
	require.NoError(t, err)
	final, err := c.Start(context.Background(), job.Spec{Kind: "final", Label: "final", Run: func() (job.Hooks, error) { return killable(nil), nil }})
	require.NoError(t, err)
	settled, err := c.Start(context.Background(), job.Spec{Kind: "final", Label: "settled", Run: func() (job.Hooks, error) { return killable(nil), nil }})
	require.NoError(t, err)
	_, _, err = c.Kill(context.Background(), settled, NoCaller, KillOptions{NoClaim: true})
	require.NoError(t, err)
	_, err = c.AwaitSettled(context.Background(), settled, NoCaller)
	require.NoError(t, err)

	ranOnCaller := func(read func() bool) bool {
		for range callerRounds {
			if read() {
				return true
			}
		}
		return false
	}
	require.True(t, ranOnCaller(func() bool {
		_, _, err := c.Read(ctx, stream, NoCaller)
		require.NoError(t, err)
		return <-onCaller
	}), "no read of the declared stream job with a cancellable ctx ran on its caller")
	for _, id := range []string{final, settled} {
		require.True(t, ranOnCaller(func() bool {
			h := handlerCtx{Context: ctx, ran: make(chan struct{}, 1)}
			_, _, err := c.Read(h, id, NoCaller)
			require.NoError(t, err)
			select {
			case <-h.ran:
				return true
			default:
				return false
			}
		}), "no read of final-output job %s with a cancellable ctx ran on its caller", id)
	}
}

// TestAnUndeclaredBlockingReadReturnsAtTheCtxEnd: a Read of the idle registry
// whose ctx can end, of a stream job whose ReadOutput is not declared non-blocking,
// is handed to the registry's worker (registryActor.handOff): its ReadOutput never
// runs on the caller, and when it blocks the caller still returns job/aborted at
// its ctx's end. Fails with handOff answering false: the caller runs the blocking
// ReadOutput itself and returns only when it does.
func TestAnUndeclaredBlockingReadReturnsAtTheCtxEnd(t *testing.T) {
	c := callerRunsRegistry(t)
	entered, unblock := make(chan bool, 1), make(chan struct{})
	release := sync.OnceFunc(func() { close(unblock) })
	id, err := c.Start(context.Background(), job.Spec{Kind: "stream", Label: "stream", Run: func() (job.Hooks, error) {
		return killable(func() (string, error) {
			entered <- inCall("Read")
			<-unblock
			return "late", nil
		}), nil
	}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		if <-entered {
			t.Error("the undeclared ReadOutput ran on its caller")
			release() // or the caller, stuck in it, would never return
		}
		cancel()
	}()
	_, _, err = c.Read(ctx, id, NoCaller)
	require.ErrorIs(t, err, context.Canceled)
	var me *messages.Error
	require.ErrorAs(t, err, &me)
	require.Equal(t, messages.CodeAborted, me.Code)
	release()
	// The registry is not stuck: a read with a ctx that never ends is answered.
	go func() { <-entered }()
	_, _, err = c.Read(context.Background(), id, NoCaller)
	require.NoError(t, err)
}

// TestAStartRunsItsJobActorsStartedOnItsCaller: with CallerRuns, a Start whose ctx
// can never end, made while the registry is idle, runs the new job actor's Started
// (here the producer's OnSettle) on its caller before Start returns
// (job.Spawner.Spawn's Handoff); a Start whose ctx can end never does (an OnSettle
// that blocks despite SPEC must not hold a caller that has to return at its ctx's
// end), nor does any without CallerRuns. Fails with the job actor's mailbox not
// held (Spawn ignoring its Handoff): every Started is a worker's.
func TestAStartRunsItsJobActorsStartedOnItsCaller(t *testing.T) {
	cancellable, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, tc := range []struct {
		callerRuns bool
		ctx        context.Context
	}{{true, context.Background()}, {true, cancellable}, {false, context.Background()}} {
		c := testRegistry(t, tc.callerRuns)
		runs := tc.callerRuns && tc.ctx.Done() == nil
		onCaller := 0
		for range callerRounds {
			s := &job.Settler{}
			subscribed := make(chan bool, 1)
			id, err := c.Start(tc.ctx, job.Spec{Kind: "bash", Label: "x", Run: func() (job.Hooks, error) {
				return job.Hooks{Cancel: func(string) error { return nil }, OnSettle: func(settle func(job.Outcome)) {
					subscribed <- inCall("Start")
					s.OnSettle(settle)
				}}, nil
			}})
			require.NoError(t, err)
			in := <-subscribed
			s.Settle(job.Outcome{Status: job.Completed}) // settled first: a failed round leaves no live job
			_, err = c.AwaitSettled(context.Background(), id, NoCaller)
			require.NoError(t, err)
			if in {
				require.True(t, runs, "callerRuns %v, ctx can end %v: the Started ran on the caller", tc.callerRuns, tc.ctx.Done() != nil)
				onCaller++
			}
		}
		if runs {
			require.Greater(t, onCaller, callerRounds/2, "most Starts of the idle registry run their job actor's Started")
		}
	}
}

// TestAStartWhoseCtxCanEndIsNotHeldByItsJobActorsStarted: with CallerRuns, a
// Start whose ctx can end returns while its job actor's Started is blocked in the
// producer's OnSettle (the dispatcher runs that Started, never the caller, which
// must be able to return at its ctx's end): had the caller been handed that run,
// it would be held there.
func TestAStartWhoseCtxCanEndIsNotHeldByItsJobActorsStarted(t *testing.T) {
	c := testRegistry(t, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 10 {
		entered, release := make(chan struct{}), make(chan struct{})
		s := &job.Settler{}
		returned := make(chan string, 1)
		go func() {
			id, err := c.Start(ctx, job.Spec{Kind: "bash", Label: "x", Run: func() (job.Hooks, error) {
				return job.Hooks{Cancel: func(string) error { return nil }, OnSettle: func(settle func(job.Outcome)) {
					close(entered)
					<-release // blocks until the Start has returned
					s.OnSettle(settle)
				}}, nil
			}})
			if err != nil {
				id = "" // reported below
			}
			returned <- id
		}()
		<-entered
		var id string
		held := false
		select {
		case id = <-returned:
		case <-time.After(10 * time.Second): // a bound, not a wait: a Start returns in µs
			held = true
		}
		close(release)
		if held {
			id = <-returned // released: the Start returns, and the job is settled below
		}
		require.NotEmpty(t, id, "the Start failed")
		s.Settle(job.Outcome{Status: job.Completed})
		_, err := c.AwaitSettled(context.Background(), id, NoCaller)
		require.NoError(t, err)
		require.False(t, held, "the Start was held by its job actor's blocked Started")
	}
}
