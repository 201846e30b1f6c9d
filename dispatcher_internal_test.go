package troupe

import (
	"bytes"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
)

// poolState is a consistent reading of d's bookkeeping.
type poolState struct{ workers, idle, blocked, queued int }

func (d *PoolDispatcher) state() (poolState, uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return poolState{len(d.mu.workers), len(d.mu.idle), d.mu.blocked, d.mu.queue.len()}, d.mu.escapes
}

// goroutineID reads the calling goroutine's id from its stack header.
func goroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	id, err := strconv.ParseUint(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	if err != nil {
		panic(err)
	}
	return id
}

// A pool busier than its workers queues runs for them: every run, including the
// runs that runs schedule (as a mailbox run does when it sends), executes on one of
// the pool's own goroutines, and no escape is started. In a synctest bubble time
// stands still while any goroutine runs, so a run is never mistaken for blocked.
func TestPoolDispatcherBusyPoolRunsEverythingOnItsWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const workers, senders, runs = 2, 8, 300
		d := NewPoolDispatcher(workers)
		defer d.Close()
		var (
			mu  sync.Mutex
			ran = map[uint64]int{}
			wg  sync.WaitGroup
		)
		var run func(depth int)
		run = func(depth int) {
			defer wg.Done()
			mu.Lock()
			ran[goroutineID()]++
			mu.Unlock()
			if depth > 0 {
				wg.Add(1)
				d.Schedule(func() { run(depth - 1) })
			}
		}
		var sending sync.WaitGroup
		for range senders {
			sending.Add(1)
			go func() {
				defer sending.Done()
				for range runs {
					wg.Add(1)
					d.Schedule(func() { run(2) })
				}
			}()
		}
		sending.Wait()
		wg.Wait()
		total := 0
		for _, n := range ran {
			total += n
		}
		require.Equal(t, senders*runs*3, total, "every run ran once")
		require.LessOrEqual(t, len(ran), workers, "runs ran on goroutines other than the pool's workers")
		synctest.Wait()
		st, escapes := d.state()
		require.Zero(t, escapes, "no worker was blocked, yet escapes were started")
		require.Equal(t, poolState{workers: workers, idle: workers}, st)
	})
}

// A worker blocked in a run (here: every worker) does not stall the runs queued
// behind it: once it has stayed in that run for BlockedAfter the watchdog starts an
// escape for the queued run, one per blocked worker at most, and when the blocked
// runs return the pool shrinks back to its size.
func TestPoolDispatcherBlockedWorkerNeverStallsAnother(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const workers = 2
		d := NewPoolDispatcher(workers)
		defer d.Close()
		release := make(chan struct{})
		entered := make(chan struct{}, workers)
		for range workers {
			d.Schedule(func() { entered <- struct{}{}; <-release })
		}
		for range workers {
			<-entered
		}
		st, _ := d.state()
		require.Equal(t, poolState{workers: workers}, st, "every worker is in a run, none counted blocked yet")

		start := time.Now()
		ran := make(chan struct{})
		d.Schedule(func() { close(ran) })
		synctest.Wait()
		st, escapes := d.state()
		require.Equal(t, poolState{workers: workers, queued: 1}, st, "queued, not started on a goroutine of its own")
		require.Zero(t, escapes)

		select {
		case <-ran:
		case <-time.After(10 * BlockedAfter): // fake time: passes only while every goroutine waits
			t.Fatal("the run queued behind the blocked workers never ran")
		}
		waited := time.Since(start)
		require.GreaterOrEqual(t, waited, BlockedAfter, "an escape before the workers were seen blocked")
		require.LessOrEqual(t, waited, 2*BlockedAfter, "the queued run waited past the detection bound")
		synctest.Wait()
		st, escapes = d.state()
		require.Equal(t, uint64(1), escapes, "one queued run: one escape")
		require.Equal(t, poolState{workers: workers + 1, idle: 1, blocked: workers}, st)

		// Another queued run goes to the idle escape: no new goroutine.
		again := make(chan struct{})
		d.Schedule(func() { close(again) })
		<-again
		synctest.Wait()
		_, escapes = d.state()
		require.Equal(t, uint64(1), escapes)

		close(release)
		synctest.Wait()
		st, _ = d.state()
		require.Equal(t, poolState{workers: workers, idle: workers}, st, "the pool shrinks back to its size")
	})
}

// Close hands what is still queued to fresh goroutines (a blocked worker may wait on
// it), waits for the blocked worker, and later runs get goroutines of their own.
func TestPoolDispatcherCloseRunsTheQueueAndLaterRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := NewPoolDispatcher(1)
		release := make(chan struct{})
		entered := make(chan struct{})
		d.Schedule(func() { close(entered); <-release })
		<-entered
		d.Schedule(func() { close(release) }) // queued behind the blocked worker
		d.Close()                             // returns only once the queued run has released the worker
		select {
		case <-release:
		default:
			t.Fatal("Close returned before the queued run ran")
		}
		later := make(chan struct{})
		d.Schedule(func() { close(later) })
		<-later
		d.Close() // idempotent
	})
}

// The same guarantee through protoactor: with every worker of the pool blocked in
// an actor's handler, another actor on the pool still answers a request.
func TestPoolDispatcherBlockedActorsDoNotStallAnotherActor(t *testing.T) {
	const workers = 2
	d := NewPoolDispatcher(workers)
	sys := actor.NewActorSystem()
	defer d.Close()
	defer sys.Shutdown()
	release := make(chan struct{})
	entered := make(chan struct{}, workers)
	blocker := actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(string); ok {
			entered <- struct{}{}
			<-release
		}
	}, actor.WithDispatcher(d))
	var blocked []*actor.PID
	for range workers {
		pid := sys.Root.Spawn(blocker)
		blocked = append(blocked, pid)
		sys.Root.Send(pid, "block")
	}
	for range workers {
		<-entered
	}
	echo := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(int); ok {
			c.Respond(m + 1)
		}
	}, actor.WithDispatcher(d)))
	res, err := sys.Root.RequestFuture(echo, 41, 10*time.Second).Result()
	require.NoError(t, err, "an actor stalled behind blocked workers")
	require.Equal(t, 42, res)
	close(release)
	for _, pid := range append(blocked, echo) {
		require.NoError(t, sys.Root.StopFuture(pid).Wait())
	}
}
