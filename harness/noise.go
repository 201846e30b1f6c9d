package harness

import (
	"runtime"
	"sync/atomic"

	"github.com/troupe-rt/troupe/internal/fault"
)

// Noise returns a scheduling-noise func: each call yields the processor
// (runtime.Gosched) with probability pct/100. The k-th call's decision is a pure
// function of (seed, k); which goroutine makes the k-th call is up to the Go
// scheduler. It is safe for concurrent use. Call it at the points of a test where
// a different interleaving could change the outcome: TESTING.md's seeded Gosched
// noise, which turns a rare race into a frequent one.
func Noise(seed uint64, pct int) func() {
	p := uint64(min(max(pct, 0), 100))
	var n atomic.Uint64
	return func() {
		if p > 0 && fault.Mix(seed, n.Add(1))%100 < p {
			runtime.Gosched()
		}
	}
}

// Chaos installs, until the test ends, troupe's internal fault injector seeded
// with seed: every scheduling point inside troupe's actors (before and after a job
// settlement decision, the Done delivery, the registry's settlement commit) yields
// with probability pct/100. Tests that call Chaos must not run in parallel with
// each other (the injector is per process).
func Chaos(t TB, seed uint64, pct int) {
	restore := fault.Install(fault.New(seed, fault.YieldPercent(pct)))
	t.Cleanup(restore)
}

// TB is the part of testing.TB the harness uses.
type TB interface {
	Helper()
	Logf(format string, args ...any)
	Cleanup(func())
	Failed() bool
	Name() string
}
