package bench

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/job"
)

// The pipelined lifecycle: owned jobs whose producers settle at once, started round
// robin over pipelinedOwners registered owners with at most fillWindow (8) in flight
// in all (below the admission limit, so no start is refused) — BenchmarkScaleJobs'
// shape, as a steady-state per-job figure. One op is one job: its Start, plus, once
// the window is full, the wait for the oldest outstanding settlement's announcement
// (the global OnJobDone listener). BenchmarkMutexRegistryPipelined is the same loop
// on mutexreg_test.go's registry; run both in one invocation
// (-bench 'Pipelined$') for the ratio. Besides ns/op (wall time) both report
// cpu-ns/op: the process's CPU time (user plus system, GC included) over the loop
// and the final drain, per job — what a loaded machine disturbs least.

// pipelinedOwners is how many sessions the pipelined jobs are spread over.
const pipelinedOwners = 100

// BenchmarkLifecyclePipelined: 100 owners × 8 in flight on the runtime; ns/op is per job.
func BenchmarkLifecyclePipelined(b *testing.B) {
	r := newRig(b)
	owners := r.agents(b, "pipe", pipelinedOwners)
	base := processes(r.sys)
	r.fill(b, owners, pipelinedOwners) // warm-up: per-owner state is not counted
	r.quiesce(b, base)
	jobs := r.sys.Jobs()
	specs := make([]job.Spec, len(owners))
	for i, a := range owners {
		specs[i] = job.Spec{Kind: kind, Label: "bench", Owner: a, Run: settledAtOnce}
	}
	ctx := context.Background()
	inflight, i := 0, 0
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	var wk runsMeter
	wk.start()
	for b.Loop() {
		if _, err := jobs.Start(ctx, specs[i%len(specs)]); err != nil {
			b.Fatalf("job %d: %v", i, err)
		}
		i++
		if inflight++; inflight == fillWindow {
			<-r.done
			inflight--
		}
	}
	for ; inflight > 0; inflight-- {
		<-r.done
	}
	wk.stop(b.N)
	wk.report(b)
	reportCPU(b, cpu0)
	r.quiesce(b, base)
	runtime.KeepAlive(owners)
}

// BenchmarkMutexRegistryPipelined: the same loop on the mutex registry, with the
// same owners (plain session strings), admission limit and window.
func BenchmarkMutexRegistryPipelined(b *testing.B) {
	reg := newMutexRegistry(troupe.DefaultMaxConcurrentJobsPerOwner)
	b.Cleanup(reg.Close)
	done := make(chan struct{}, fillWindow) // at most fillWindow outstanding: never blocks
	reg.OnJobDone(func(string, job.Status, string) { done <- struct{}{} })
	owners := make([]string, pipelinedOwners)
	for i := range owners {
		owners[i] = "pipe-" + strconv.Itoa(i)
	}
	inflight, i := 0, 0
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	for b.Loop() {
		if _, err := reg.Start(kind, "bench", owners[i%len(owners)], settledAtOnce); err != nil {
			b.Fatalf("mutex job %d: %v", i, err)
		}
		i++
		if inflight++; inflight == fillWindow {
			<-done
			inflight--
		}
	}
	for ; inflight > 0; inflight-- {
		<-done
	}
	reportCPU(b, cpu0)
}

// reportCPU reports the process's CPU time since cpu0 per op (b.Loop's last b.N).
func reportCPU(b *testing.B, cpu0 time.Duration) {
	b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}
