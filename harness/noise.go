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
// with seed: every scheduling point inside troupe's actors yields with probability
// pct/100 — in the job actor (before and after a settlement decision, the Done
// delivery, after a Cancel hook), the registry (its settlement commit), the
// continuation directory (routing a followup, materializing, closing admission,
// releasing), the Activation (accepting, a turn's start and end, the dispose
// decision) and the owner actor (delivering a notice, a child's notice, a relay).
// It returns hits, which counts how often the named point was reached since: a
// suite asserts the points it means to stress were reached. Tests that call Chaos
// must not run in parallel with each other (the injector is per process).
func Chaos(t TB, seed uint64, pct int) (hits func(point string) int) {
	in := fault.New(seed, fault.YieldPercent(pct))
	restore := fault.Install(in)
	t.Cleanup(restore)
	return in.Hits
}

// TB is the part of testing.TB the harness uses.
type TB interface {
	Helper()
	Logf(format string, args ...any)
	Cleanup(func())
	Failed() bool
	Name() string
}
