// Package fault holds troupe's named fault points: places in the runtime where a
// test may inject a scheduling yield, a fault, or a planted bug.
//
// The contract:
//  1. Runtime code calls Yield(name) at a point where another goroutine's interleaving
//     matters (just before or after a settlement decision), Point(name) where a fault
//     may be injected, and Planted(name) where a test-only planted bug lives.
//  2. With no injector installed — always, outside tests — each call is one atomic
//     load and a nil check: Yield does nothing, Point and Planted return false.
//  3. A test installs an Injector with Install (one at a time per process: tests that
//     install one must not run in parallel with each other) and restores with the
//     returned func. All of its randomness derives from its seed: the k-th decision
//     it makes is a pure function of (seed, k). Which goroutine asks for the k-th
//     decision is up to the Go scheduler.
//  4. An installed injector also counts every hit of every point by name (Hits), so a
//     test can assert exact counts (for example one settlement commit per job).
//  5. Planted bugs survive nesting: an injector installed while another is installed
//     also enables the bugs planted in the one it replaces, until it is restored. A
//     mutation test plants a bug around a suite that installs its own (noise)
//     injector, and the suite runs with the bug.
package fault

import (
	"runtime"
	"sync"
	"sync/atomic"
)

var current atomic.Pointer[Injector]

// Injector decides, from one seed, which points fire. Build it with New and the
// options; it is safe for concurrent use.
type Injector struct {
	seed     uint64
	yieldPct uint64            // default probability (percent) that a Yield point yields
	pointPct map[string]uint64 // per-point probability (percent) that Point(name) fires
	planted  map[string]bool   // planted bugs enabled by the test
	n        atomic.Uint64     // decisions made so far

	mu struct {
		sync.Mutex
		hits map[string]int // hits per point name, guarded by mu
	}
}

// Option configures an Injector.
type Option func(*Injector)

// YieldPercent makes each Yield point call runtime.Gosched with probability pct/100.
func YieldPercent(pct int) Option {
	return func(in *Injector) { in.yieldPct = clampPct(pct) }
}

// PointPercent makes Point(name) return true with probability pct/100.
func PointPercent(name string, pct int) Option {
	return func(in *Injector) { in.pointPct[name] = clampPct(pct) }
}

// Plant enables the named planted bug (see Planted). Test-only.
func Plant(name string) Option {
	return func(in *Injector) { in.planted[name] = true }
}

func clampPct(p int) uint64 {
	return uint64(min(max(p, 0), 100))
}

// New returns an injector seeded with seed.
func New(seed uint64, opts ...Option) *Injector {
	in := &Injector{seed: seed, pointPct: map[string]uint64{}, planted: map[string]bool{}}
	in.mu.hits = map[string]int{}
	for _, o := range opts {
		o(in)
	}
	return in
}

// Install makes in the process's injector and returns a func that restores the
// previous one. Tests that install injectors must not run in parallel. The bugs
// planted in the injector being replaced are planted in in as well (rule 5), so in
// must not be installed while another goroutine installs one.
func Install(in *Injector) (restore func()) {
	if prev := current.Load(); prev != nil {
		for name := range prev.planted {
			in.planted[name] = true
		}
	}
	prev := current.Swap(in)
	return func() { current.Store(prev) }
}

// Active reports whether an injector is installed.
func Active() bool { return current.Load() != nil }

// Yield is a scheduling point: with an injector installed it counts the hit and
// calls runtime.Gosched with the injector's yield probability.
func Yield(name string) {
	in := current.Load()
	if in == nil {
		return
	}
	in.hit(name)
	if in.yieldPct > 0 && in.roll() < in.yieldPct {
		runtime.Gosched()
	}
}

// Point is a fault point: it reports whether the fault named name fires here. It is
// always false without an injector, and with one fires with the probability given
// by PointPercent (0 if none was given). Every call counts a hit.
func Point(name string) bool {
	in := current.Load()
	if in == nil {
		return false
	}
	in.hit(name)
	pct := in.pointPct[name]
	return pct > 0 && in.roll() < pct
}

// Planted reports whether the test enabled the planted bug name. Planted bugs exist
// only so that a test suite can show it catches them (TESTING.md's mutation check).
func Planted(name string) bool {
	in := current.Load()
	return in != nil && in.planted[name]
}

// Hits returns how many times points named name were reached while in was installed.
func (in *Injector) Hits(name string) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.mu.hits[name]
}

// Seed returns the injector's seed.
func (in *Injector) Seed() uint64 { return in.seed }

func (in *Injector) hit(name string) {
	in.mu.Lock()
	in.mu.hits[name]++
	in.mu.Unlock()
}

// roll returns the next seeded value in [0, 100).
func (in *Injector) roll() uint64 {
	return Mix(in.seed, in.n.Add(1)) % 100
}

// Mix is SplitMix64 of seed and k: the k-th value of the stream seeded by seed.
func Mix(seed, k uint64) uint64 {
	z := seed + k*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
