package fault_test

import (
	"testing"

	"github.com/troupe-rt/troupe/internal/fault"
)

// The cost of a fault point in a production run (no injector installed): one
// atomic load and a nil check. Compare with the baseline, a call that does
// nothing, in the same run:
//
//	go test -run '^$' -bench 'Benchmark(FaultPointBaseline|YieldOff|PointOff)$' -benchmem -count 5 ./internal/fault/
//
// A job's lifecycle passes about six points (test/bench's BenchmarkLifecycleOwned
// is the whole lifecycle, for scale).

//go:noinline
func baseline(string) bool { return false }

var sink bool

func BenchmarkFaultPointBaseline(b *testing.B) {
	for b.Loop() {
		sink = baseline("job.settle.before-decide")
	}
}

func BenchmarkYieldOff(b *testing.B) {
	if fault.Active() {
		b.Fatal("an injector is installed")
	}
	for b.Loop() {
		fault.Yield("job.settle.before-decide")
	}
}

func BenchmarkPointOff(b *testing.B) {
	if fault.Active() {
		b.Fatal("an injector is installed")
	}
	for b.Loop() {
		sink = fault.Point("registry.start.crash")
	}
}
