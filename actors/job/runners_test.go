package job

import (
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// parked waits (a probe, not a sleep) until p counts n runners parked and n
// runners are blocked in their select, ready to take a call.
func parked(t *testing.T, p *Runners, n int32) {
	t.Helper()
	for i := 0; p.idle.Load() != n || inSelect() != int(n); i++ {
		if i > 100_000 {
			t.Fatalf("runners parked: %d (%d in select), want %d", p.idle.Load(), inSelect(), n)
		}
		runtime.Gosched()
	}
}

// inSelect counts the goroutines blocked in a runner's select.
func inSelect() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "[select") && strings.Contains(g, "job.(*Runners).run(") {
			n++
		}
	}
	return n
}

// A call after one has returned runs on the runner that returned (its stack has
// grown), not on a new goroutine: the parked runner takes it.
func TestRunnersReuseAParkedRunner(t *testing.T) {
	p := NewRunners()
	defer func() { p.Close(); goleak.VerifyNone(t) }()
	done := make(chan struct{})
	p.Go(func() { close(done) })
	<-done
	parked(t, p, 1)
	release, running := make(chan struct{}), make(chan struct{})
	p.Go(func() { close(running); <-release })
	<-running
	require.Equal(t, int32(0), p.idle.Load(), "the parked runner took the call: none is left parked")
	close(release)
	parked(t, p, 1)
}

// Go never waits for a runner: while every runner is in a call that blocks, a new
// call still runs (on a goroutine of its own).
func TestRunnersACallThatBlocksHoldsUpOnlyItself(t *testing.T) {
	p := NewRunners()
	defer func() { p.Close(); goleak.VerifyNone(t) }()
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(3)
	for range 3 {
		p.Go(func() { started.Done(); <-release })
	}
	started.Wait()
	ran := make(chan struct{})
	p.Go(func() { close(ran) })
	<-ran
	close(release)
}

// After a burst, at most MaxIdleRunners runners stay parked; the rest exit.
func TestRunnersKeepAtMostMaxIdleParked(t *testing.T) {
	p := NewRunners()
	defer func() { p.Close(); goleak.VerifyNone(t) }()
	const burst = 3 * MaxIdleRunners
	release := make(chan struct{})
	var started, finished sync.WaitGroup
	started.Add(burst)
	finished.Add(burst)
	for range burst {
		p.Go(func() { defer finished.Done(); started.Done(); <-release })
	}
	started.Wait()
	before := runtime.NumGoroutine()
	close(release)
	finished.Wait()
	parked(t, p, MaxIdleRunners)
	for i := 0; runtime.NumGoroutine() > before-(burst-MaxIdleRunners); i++ {
		if i > 1_000_000 {
			t.Fatalf("goroutines: %d, want at most %d", runtime.NumGoroutine(), before-(burst-MaxIdleRunners))
		}
		runtime.Gosched()
	}
	require.Equal(t, int32(MaxIdleRunners), p.idle.Load())
}

// Close ends the parked runners (goleak sees none left), a runner in a call ends
// when it returns, and a Go after Close still runs its call.
func TestRunnersCloseEndsThemAndLaterCallsStillRun(t *testing.T) {
	p := NewRunners()
	done := make(chan struct{})
	p.Go(func() { close(done) })
	<-done
	parked(t, p, 1)
	release, running := make(chan struct{}), make(chan struct{})
	p.Go(func() { close(running); <-release })
	<-running
	p.Close()
	p.Close() // idempotent
	ran := make(chan struct{})
	p.Go(func() { close(ran) })
	<-ran
	close(release)
	goleak.VerifyNone(t)
}

// A nil *Runners runs each call on a goroutine of its own.
func TestRunnersNilRunsEachCall(t *testing.T) {
	var p *Runners
	ran := make(chan struct{})
	p.Go(func() { close(ran) })
	<-ran
	p.Close()
	goleak.VerifyNone(t)
}
