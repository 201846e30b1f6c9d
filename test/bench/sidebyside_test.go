package bench

// The side-by-side file: troupe's half of issue 15's comparison with DSH's
// LocalJobRegistry, one benchmark per row of the "Why" table, each
// shaped as that row names it, with the floor the table measures beside it in
// the same file (so `-bench '^BenchmarkSideBySide_'` runs every row and its
// floor in one run):
//
//	row                                          benchmark(s)                                   figure
//	10 jobs live, each settlement starting next  SideBySide_TenLiveChained                      ns/op = per job
//	100 owners, 8 in flight                      SideBySide_HundredOwnersEightInFlight          ns/op = per job
//	  floor: mutex-map registry                  SideBySide_HundredOwnersEightInFlightMutex     ns/op = per job
//	read of a stream job                         SideBySide_ReadStreamJob                       ns/op
//	  floor: request/response                    SideBySide_RequestResponse                     ns/op
//	kill → settled, mean / p99                   SideBySide_KillToSettled                       mean-ns, p99-ns
//	live idle job                                SideBySide_LiveIdleJob                         B/job (floor: B/bare-actor)
//
// Some duplicate benchmarks of bench_test.go (Read, FloorRequestResponse,
// KillToSettled, MemoryLiveIdleJob): these are the table's shapes exactly, kept
// together so the comparison reruns as one command.

import (
	"context"
	"runtime"
	"strconv"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/troupetest"
)

// chainedLive is how many jobs SideBySide_TenLiveChained keeps live: the
// default admission limit, so each start is admitted only because the previous
// settlement freed its slot.
const chainedLive = troupe.DefaultMaxConcurrentJobsPerOwner

// pipelineOwners and pipelineWindow are the "100 owners, 8 in flight" shape.
const (
	pipelineOwners = 100
	pipelineWindow = 8
)

// manualJob is a producer the benchmark settles itself: its Done channel is
// returned to the caller, who sends the outcome.
func manualJob() (chan job.Outcome, func() (job.Hooks, error)) {
	ch := make(chan job.Outcome, 1)
	return ch, func() (job.Hooks, error) { return job.Hooks{Done: ch, Cancel: noCancel}, nil }
}

// BenchmarkSideBySide_TenLiveChained: alice has 10 live jobs (her admission
// limit); one op settles the oldest, waits until the onJobDone listener has seen
// the settlement, and starts the next job in the freed slot. ns/op is the cost per
// job (settlement plus the start it enables) with 10 live throughout.
func BenchmarkSideBySide_TenLiveChained(b *testing.B) {
	r := newRig(b)
	alice := troupetest.Agent(b, r.sys, "alice")
	jobs := r.sys.Jobs()
	ctx := context.Background()
	start := func() chan job.Outcome {
		ch, run := manualJob()
		if _, err := jobs.Start(ctx, job.Spec{Kind: kind, Label: "chained", Owner: alice, Run: run}); err != nil {
			b.Fatal(err)
		}
		return ch
	}
	live := make([]chan job.Outcome, 0, chainedLive)
	for range chainedLive {
		live = append(live, start())
	}
	b.ReportAllocs()
	for b.Loop() {
		live[0] <- job.Outcome{Status: job.Completed}
		<-r.done
		copy(live, live[1:])
		live[len(live)-1] = start()
	}
	b.StopTimer()
	for _, ch := range live {
		ch <- job.Outcome{Status: job.Completed}
	}
	for range live {
		<-r.done
	}
}

// BenchmarkSideBySide_HundredOwnersEightInFlight: jobs that settle at once,
// started round robin over 100 registered owners with at most 8 in flight (a
// start waits for one settlement once 8 are outstanding). ns/op is the cost per
// job of the pipelined shape. Floor: …Mutex, the same loop on the mutex registry.
func BenchmarkSideBySide_HundredOwnersEightInFlight(b *testing.B) {
	r := newRig(b)
	owners := r.agents(b, "owner", pipelineOwners)
	base := processes(r.sys)
	r.fill(b, owners, pipelineOwners) // warm-up: one settled record per owner
	r.quiesce(b, base)
	jobs := r.sys.Jobs()
	ctx := context.Background()
	specs := make([]job.Spec, len(owners))
	for i, a := range owners {
		specs[i] = job.Spec{Kind: kind, Label: "pipelined", Owner: a, Run: settledAtOnce}
	}
	i, inflight := 0, 0
	b.ReportAllocs()
	for b.Loop() {
		if _, err := jobs.Start(ctx, specs[i%len(specs)]); err != nil {
			b.Fatal(err)
		}
		i++
		if inflight++; inflight == pipelineWindow {
			<-r.done
			inflight--
		}
	}
	for ; inflight > 0; inflight-- {
		<-r.done
	}
}

// BenchmarkSideBySide_HundredOwnersEightInFlightMutex is the floor of the row:
// the same loop against mutexreg_test.go's registry (100 owner strings, the
// default admission limit, 8 in flight).
func BenchmarkSideBySide_HundredOwnersEightInFlightMutex(b *testing.B) {
	reg := newMutexRegistry(troupe.DefaultMaxConcurrentJobsPerOwner)
	b.Cleanup(reg.Close)
	done := make(chan struct{}, pipelineWindow) // at most pipelineWindow outstanding: never blocks
	reg.OnJobDone(func(string, job.Status, string) { done <- struct{}{} })
	owners := make([]string, pipelineOwners)
	for i := range owners {
		owners[i] = "owner-" + strconv.Itoa(i)
	}
	i, inflight := 0, 0
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.Start(kind, "pipelined", owners[i%len(owners)], settledAtOnce); err != nil {
			b.Fatal(err)
		}
		i++
		if inflight++; inflight == pipelineWindow {
			<-done
			inflight--
		}
	}
	for ; inflight > 0; inflight-- {
		<-done
	}
}

// BenchmarkSideBySide_ReadStreamJob: Read of alice's live stream job (every read
// returns the same chunk). Floor: SideBySide_RequestResponse.
func BenchmarkSideBySide_ReadStreamJob(b *testing.B) {
	r := newRig(b)
	r.read(b, troupetest.Agent(b, r.sys, "alice"))
}

// BenchmarkSideBySide_RequestResponse is the request/response floor beside the
// read and the kill: a protoactor RequestFuture round trip to an echo actor.
func BenchmarkSideBySide_RequestResponse(b *testing.B) { requestResponse(b) }

// BenchmarkSideBySide_KillToSettled: Kill of a running job whose Cancel settles it
// killed, then AwaitSettled; every op's latency is kept, and the benchmark
// reports their mean (mean-ns, = ns/op minus the untimed refills) and 99th
// percentile (p99-ns). Jobs are started killPool at a time, untimed.
func BenchmarkSideBySide_KillToSettled(b *testing.B) { killToSettled(b, untilCancelled(false)) }

// BenchmarkSideBySide_LiveIdleJob reports the heap plus stacks per live idle job
// (B/job), measured as BenchmarkMemoryLiveIdleJob measures it (10,000 owned jobs
// over 1,000 warmed-up owners, process registry warmed up, each producer holding
// only its Done channel, whose bytes are measured apart and subtracted), and, in
// the same op, the table's floor: the bytes per idle trivial protoactor actor
// (B/bare-actor, 10,000 of them spawned on the same actor system, each having
// answered one request). One op is one whole measurement on a fresh System.
func BenchmarkSideBySide_LiveIdleJob(b *testing.B) {
	b.ReportAllocs()
	var perJob, perActor float64
	n := memOwners * memLivePerOwner
	for range b.N {
		producer := producerChanBytes(n)
		r := newRig(b)
		owners := r.agents(b, "mem", memOwners)
		base := processes(r.sys)
		r.fill(b, owners, memOwners) // warm-up: one settled record per owner
		r.quiesce(b, base)
		warmProcessRegistry(b, r.sys)
		r.quiesce(b, base)
		chans := make([]chan job.Outcome, 0, n)
		ids := make([]string, 0, n)
		callers := make([]registry.Caller, 0, n)
		treeApplied(b, r.sys)
		before := heapInUse()
		for range memLivePerOwner {
			for _, a := range owners {
				ch, run := manualJob()
				chans = append(chans, ch)
				id, err := r.sys.Jobs().Start(context.Background(), job.Spec{Kind: kind, Label: "idle", Owner: a, Run: run})
				if err != nil {
					b.Fatal(err)
				}
				ids = append(ids, id)
				callers = append(callers, registry.AsAgent(a))
			}
		}
		for j, id := range ids { // every job actor has started and watches its Done
			if _, _, err := r.sys.Jobs().Read(context.Background(), id, callers[j]); err != nil {
				b.Fatal(err)
			}
		}
		treeApplied(b, r.sys)
		after := heapInUse()
		perJob += float64(after-before)/float64(n) - producer
		perActor += bareActorBytes(b, r.sys, n)
		for _, ch := range chans {
			ch <- job.Outcome{Status: job.Completed}
		}
		for range chans {
			<-r.done
		}
		runtime.KeepAlive(owners)
		shutdown(b, r.sys)
	}
	b.ReportMetric(perJob/float64(b.N), "B/job")
	b.ReportMetric(perActor/float64(b.N), "B/bare-actor")
}

// bareActorBytes spawns n trivial actors on sys, has each answer one request, and
// returns the heap plus stacks per actor; it stops them before returning.
func bareActorBytes(b *testing.B, sys *troupe.System, n int) float64 {
	b.Helper()
	root := sys.Actors().Root
	props := actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*ping); ok {
			c.Respond(m)
		}
	})
	pids := make([]*actor.PID, n)
	treeApplied(b, sys)
	before := heapInUse()
	for i := range pids {
		pids[i] = root.Spawn(props)
	}
	for _, pid := range pids {
		if _, err := root.RequestFuture(pid, &ping{}, settleBudget).Result(); err != nil {
			b.Fatal(err)
		}
	}
	treeApplied(b, sys)
	after := heapInUse()
	for _, pid := range pids {
		require.NoError(b, root.StopFuture(pid).Wait())
	}
	return float64(after-before) / float64(n)
}
