package bench

import (
	"context"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/troupetest"
)

const (
	// historySize is the settled history of the *History100k / *Among100k benchmarks.
	historySize = 100_000
	// historyOwners spreads owned history over this many other sessions.
	historyOwners = 100
	// fillWindow is how many history jobs are in flight at once while filling: below
	// the default admission limit (10), so a bucket is never full.
	fillWindow = 8
	kind       = "bench"
	// settleBudget bounds every wait for the runtime to go quiet.
	settleBudget = 30 * time.Second
)

// settledAtOnce is a producer Run whose job settles completed at once: its Done
// channel already holds the outcome when Run returns. It holds nothing else (its
// Cancel is a static function: there is nothing left to cancel).
func settledAtOnce() (job.Hooks, error) {
	ch := make(chan job.Outcome, 1)
	ch <- job.Outcome{Status: job.Completed}
	return job.Hooks{Done: ch, Cancel: noCancel}, nil
}

// noCancel is the Cancel of producers the benchmark settles itself: a static
// function, so it allocates nothing.
func noCancel(string) error { return nil }

// untilCancelled returns a Run whose job runs until its Cancel settles it killed,
// through OnSettle (a job.Settler), as troupe's own producers settle.
// stream makes it a stream kind whose every read returns the same chunk.
func untilCancelled(stream bool) func() (job.Hooks, error) {
	return func() (job.Hooks, error) {
		s := &job.Settler{}
		h := job.Hooks{OnSettle: s.OnSettle, CancelNonBlocking: true, Cancel: func(string) error {
			s.Settle(job.Outcome{Status: job.Killed}) // idempotent: only the first counts
			return nil
		}}
		if stream {
			h.ReadOutput = readChunk
		}
		return h, nil
	}
}

func readChunk() (string, error) { return "chunk", nil }

// rig is a served troupe System with a global onJobDone listener that signals done
// once per settled job.
type rig struct {
	sys  *troupe.System
	done chan struct{}
}

func newRig(b *testing.B, mutate ...func(*troupe.Config)) *rig {
	b.Helper()
	sys, _ := troupetest.Served(b, mutate...)
	r := &rig{sys: sys, done: make(chan struct{}, 1024)}
	// The listener runs on the registry actor; every benchmark keeps fewer than
	// cap(done) signals outstanding, so the send never blocks.
	_, err := sys.Jobs().OnJobDone(context.Background(), sys.Scope(), func(*messages.JobSnapshot, registry.Owner) {
		r.done <- struct{}{}
	})
	require.NoError(b, err)
	return r
}

// agents registers n agent incarnations of sessions prefix-0 … prefix-(n-1).
func (r *rig) agents(b *testing.B, prefix string, n int) []*owner.Agent {
	b.Helper()
	out := make([]*owner.Agent, n)
	for i := range out {
		out[i] = troupetest.Agent(b, r.sys, prefix+"-"+strconv.Itoa(i))
	}
	return out
}

// fill registers n settled jobs spread round-robin over owners (a nil entry means
// unowned), with at most fillWindow in flight, and returns when every one has
// settled and been announced.
func (r *rig) fill(b *testing.B, owners []*owner.Agent, n int) {
	b.Helper()
	inflight := 0
	for i := 0; i < n; i++ {
		spec := job.Spec{Kind: kind, Label: "history", Owner: owners[i%len(owners)], Run: settledAtOnce}
		if _, err := r.sys.Jobs().Start(context.Background(), spec); err != nil {
			b.Fatalf("history job %d: %v", i, err)
		}
		if inflight++; inflight == fillWindow {
			<-r.done
			inflight--
		}
	}
	for ; inflight > 0; inflight-- {
		<-r.done
	}
}

// processes counts the actor system's registered processes (actors and futures).
func processes(sys *troupe.System) int {
	n := 0
	for _, m := range sys.Actors().ProcessRegistry.LocalPIDs.LocalPIDs {
		n += m.Count()
	}
	return n
}

// quiesce waits until the registry has drained its mailbox and the process count is
// back to want: every settled job's actor, poisoned after its commit, has stopped.
func (r *rig) quiesce(b *testing.B, want int) {
	b.Helper()
	troupetest.Barrier(b, r.sys)
	deadline := time.Now().Add(settleBudget)
	for processes(r.sys) != want {
		if time.Now().After(deadline) {
			b.Fatalf("quiesce: %d processes, want %d", processes(r.sys), want)
		}
		runtime.Gosched()
	}
	troupetest.Barrier(b, r.sys)
}

// lifecycle is the measured loop: start a job that settles at once, then wait for
// the onJobDone listener to fire for it.
func (r *rig) lifecycle(b *testing.B, a *owner.Agent) {
	b.Helper()
	b.ReportAllocs()
	spec := job.Spec{Kind: kind, Label: "bench", Owner: a, Run: settledAtOnce}
	jobs := r.sys.Jobs()
	var wk runsMeter
	wk.start()
	for b.Loop() {
		if _, err := jobs.Start(context.Background(), spec); err != nil {
			b.Fatal(err)
		}
		<-r.done
	}
	wk.stop(b.N)
	wk.report(b)
}

func BenchmarkLifecycleUnowned(b *testing.B) {
	r := newRig(b)
	r.lifecycle(b, nil)
}

func BenchmarkLifecycleOwned(b *testing.B) {
	r := newRig(b)
	alice := troupetest.Agent(b, r.sys, "alice")
	r.lifecycle(b, alice)
}

// BenchmarkLifecycleUnownedHistory100k: 100,000 settled unowned jobs first.
func BenchmarkLifecycleUnownedHistory100k(b *testing.B) {
	r := newRig(b)
	base := processes(r.sys)
	r.fill(b, []*owner.Agent{nil}, historySize)
	r.quiesce(b, base)
	r.lifecycle(b, nil)
}

// BenchmarkLifecycleOwnedHistory100k: 100,000 settled jobs of 100 other sessions
// first (1,000 each), then alice's lifecycle.
func BenchmarkLifecycleOwnedHistory100k(b *testing.B) {
	r := newRig(b)
	hist := r.agents(b, "hist", historyOwners)
	alice := troupetest.Agent(b, r.sys, "alice")
	base := processes(r.sys)
	r.fill(b, hist, historySize)
	r.quiesce(b, base)
	r.lifecycle(b, alice)
}

// read measures Read of a live stream job owned by alice (Client → registry, which
// calls ReadOutput and replies: one hop).
func (r *rig) read(b *testing.B, alice *owner.Agent) {
	b.Helper()
	b.ReportAllocs()
	id, err := r.sys.Jobs().Start(context.Background(), job.Spec{Kind: kind, Label: "stream", Owner: alice, Run: untilCancelled(true)})
	require.NoError(b, err)
	jobs := r.sys.Jobs()
	var wk runsMeter
	wk.start()
	for b.Loop() {
		text, _, err := jobs.Read(context.Background(), id, registry.AsAgent(alice))
		if err != nil || text != "chunk" {
			b.Fatalf("read: %q, %v", text, err)
		}
	}
	wk.stop(b.N)
	wk.report(b)
}

func BenchmarkRead(b *testing.B) {
	r := newRig(b)
	r.read(b, troupetest.Agent(b, r.sys, "alice"))
}

// BenchmarkReadAmong100k: the same read with 100,000 settled jobs of 100 other sessions.
func BenchmarkReadAmong100k(b *testing.B) {
	r := newRig(b)
	hist := r.agents(b, "hist", historyOwners)
	alice := troupetest.Agent(b, r.sys, "alice")
	base := processes(r.sys)
	r.fill(b, hist, historySize)
	r.quiesce(b, base)
	r.read(b, alice)
}

// killPool is how many live jobs BenchmarkKillToSettled starts (untimed) at a time;
// the unowned admission limit is raised to it.
const killPool = 256

// BenchmarkKillToSettled: kill a running job whose Cancel settles it killed
// (through OnSettle), and wait (AwaitSettled) until its settlement step has run.
// Starting the jobs is not timed: they are started killPool at a time with the
// timer stopped. It also reports mean-ns and p99-ns of the kill → settled time
// (killToSettled, settle_test.go).
func BenchmarkKillToSettled(b *testing.B) { killToSettled(b, untilCancelled(false)) }

// list measures List of alice, who has 10 settled jobs.
func (r *rig) list(b *testing.B, alice *owner.Agent) {
	b.Helper()
	r.fill(b, []*owner.Agent{alice}, 10)
	jobs := r.sys.Jobs()
	b.ReportAllocs()
	for b.Loop() {
		l, err := jobs.List(context.Background(), registry.AsAgent(alice))
		if err != nil || len(l) != 10 {
			b.Fatalf("list: %d jobs, %v", len(l), err)
		}
	}
}

// BenchmarkListOwner10 is the list baseline: alice's 10 jobs in an otherwise empty registry.
func BenchmarkListOwner10(b *testing.B) {
	r := newRig(b)
	r.list(b, troupetest.Agent(b, r.sys, "alice"))
}

// BenchmarkListOwner10Among100k: alice's 10 jobs among 100,000 of 100 other sessions.
func BenchmarkListOwner10Among100k(b *testing.B) {
	r := newRig(b)
	hist := r.agents(b, "hist", historyOwners)
	alice := troupetest.Agent(b, r.sys, "alice")
	base := processes(r.sys)
	r.fill(b, hist, historySize)
	r.quiesce(b, base)
	r.list(b, alice)
}

// --- protoactor's own floor, measured in the same run ---

// floorSystem is a bare protoactor system configured as troupe configures its own.
func floorSystem(b *testing.B) *actor.ActorSystem {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	sys := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }),
		actor.WithDeadLetterThrottleInterval(10*time.Millisecond))
	b.Cleanup(sys.Shutdown)
	return sys
}

// BenchmarkFloorSpawnStop: spawn a trivial actor and wait for its StopFuture.
func BenchmarkFloorSpawnStop(b *testing.B) {
	root := floorSystem(b).Root
	props := actor.PropsFromFunc(func(actor.Context) {})
	b.ReportAllocs()
	for b.Loop() {
		pid := root.Spawn(props)
		if err := root.StopFuture(pid).Wait(); err != nil {
			b.Fatal(err)
		}
	}
}

type ping struct{}

// BenchmarkFloorRequestResponse: a RequestFuture round trip to an echo actor.
func BenchmarkFloorRequestResponse(b *testing.B) { requestResponse(b) }

// requestResponse is the request/response floor's loop.
func requestResponse(b *testing.B) {
	root := floorSystem(b).Root
	echo := root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*ping); ok {
			c.Respond(m)
		}
	}))
	b.Cleanup(func() { _ = root.StopFuture(echo).Wait() })
	msg := &ping{}
	var runs runsMeter
	b.ReportAllocs()
	runs.start()
	for b.Loop() {
		if _, err := root.RequestFuture(echo, msg, 10*time.Second).Result(); err != nil {
			b.Fatal(err)
		}
	}
	runs.stop(b.N)
	runs.report(b)
}

// BenchmarkMutexRegistry: the lifecycle loop against mutexreg_test.go's registry.
func BenchmarkMutexRegistry(b *testing.B) {
	reg := newMutexRegistry(troupe.DefaultMaxConcurrentJobsPerOwner)
	b.Cleanup(reg.Close)
	done := make(chan struct{}, 1)
	reg.OnJobDone(func(string, job.Status, string) { done <- struct{}{} })
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.Start(kind, "bench", "", settledAtOnce); err != nil {
			b.Fatal(err)
		}
		<-done
	}
}

// --- memory ---

// treeApplied has sys's supervision inspector apply the lifecycle events it holds
// (Tree().Stats is a query, queued behind them): with nobody subscribed it lets
// up to 1,023 of them wait (supervision/inspector.go eventBatch), a bound for the
// whole system, not a cost per job or Activation — read before it, a memory figure
// counted up to ~200 B per item of events still queued (and not yet the tree
// entries they make) at 1,000 items. Called before every heap reading.
func treeApplied(b *testing.B, sys *troupe.System) {
	b.Helper()
	if _, err := sys.Tree().Stats(context.Background()); err != nil {
		b.Fatal(err)
	}
}

// heapInUse collects garbage (twice, so finalizer-freed objects are gone too) and
// returns the live heap plus goroutine stacks in use.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc + ms.StackInuse)
}

// writeHeapProfile writes a heap profile (in-use figures as of the GC heapInUse just
// ran) to the file named by env, if set: a diagnostic for where the measured bytes
// are held (go tool pprof -sample_index=inuse_space).
func writeHeapProfile(b *testing.B, env string) {
	path := os.Getenv(env)
	if path == "" {
		return
	}
	f, err := os.Create(path)
	require.NoError(b, err)
	defer f.Close()
	require.NoError(b, pprof.Lookup("heap").WriteTo(f, 0))
}

// exactHeapProfile records every allocation (not a sample) when env names a heap
// profile to write; it slows the benchmark down, so it is for diagnosis only.
func exactHeapProfile(env string) {
	if os.Getenv(env) != "" {
		runtime.MemProfileRate = 1
	}
}

// stackInUse returns the bytes of goroutine stacks in use (read right after
// heapInUse, so no collection is needed).
func stackInUse() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.StackInuse)
}

func shutdown(b *testing.B, sys *troupe.System) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), settleBudget)
	defer cancel()
	require.NoError(b, sys.Shutdown(ctx))
}

const (
	memSettled      = 100_000 // settled records measured
	memOwners       = 1_000   // owners they and the live jobs are spread over
	memLivePerOwner = 10      // = the default admission limit
	// memWarmSpawns is how many trivial actors warmProcessRegistry spawns and stops.
	memWarmSpawns = 200_000
)

// warmProcessRegistry spawns and stops trivial actors (in batches) until
// protoactor's process registry has grown to its steady size. That registry is
// 1024 buckets × 32 shard maps; a Go map never shrinks, so each shard map's first
// entry allocates its storage (≈ 270 B) once for the life of the process — about
// 8.8 MB after some 100k spawns, whatever troupe does. Without this warm-up the
// first 100k settled records would carry that one-off growth (≈ 87 B each).
// After memWarmSpawns spawns, fewer than 0.3% of the shard maps are still empty.
func warmProcessRegistry(b *testing.B, sys *troupe.System) {
	b.Helper()
	root := sys.Actors().Root
	props := actor.PropsFromFunc(func(actor.Context) {})
	pids := make([]*actor.PID, 256)
	futures := make([]*actor.Future, 256)
	for done := 0; done < memWarmSpawns; done += len(pids) {
		for i := range pids {
			pids[i] = root.Spawn(props)
		}
		for i, pid := range pids {
			futures[i] = root.StopFuture(pid)
		}
		for _, f := range futures {
			require.NoError(b, f.Wait())
		}
	}
}

// BenchmarkMemorySettledRecord reports the heap (plus stacks) the runtime keeps per
// settled record: 100,000 owned jobs that settled at once, spread over 1,000
// registered owners. Each owner first starts and settles one warm-up job, before
// the baseline, so per-owner registry state is not counted, and protoactor's
// process registry is warmed up (warmProcessRegistry) so that its one-off growth
// is not counted either: B/record is the steady-state cost, B/record-cold the same
// with that one-off growth (measured from a baseline taken before the warm-up).
// Both measurements wait until every job actor has stopped. The producer keeps
// nothing: its Done channel is garbage once troupe has read it, so nothing is
// subtracted — whatever of it troupe still retains counts against troupe. One op is
// one whole measurement on a fresh System.
func BenchmarkMemorySettledRecord(b *testing.B) {
	exactHeapProfile("TROUPE_BENCH_SETTLED_HEAPPROFILE")
	b.ReportAllocs()
	var warm, cold float64
	for i := 0; i < b.N; i++ {
		r := newRig(b)
		owners := r.agents(b, "mem", memOwners)
		base := processes(r.sys)
		r.fill(b, owners, memOwners) // warm-up: one record per owner
		r.quiesce(b, base)
		treeApplied(b, r.sys)
		coldBefore := heapInUse()
		warmProcessRegistry(b, r.sys)
		r.quiesce(b, base)
		treeApplied(b, r.sys)
		before := heapInUse()
		r.fill(b, owners, memSettled)
		r.quiesce(b, base)
		treeApplied(b, r.sys)
		after := heapInUse()
		writeHeapProfile(b, "TROUPE_BENCH_SETTLED_HEAPPROFILE")
		runtime.KeepAlive(owners)
		warm += float64(after-before) / memSettled
		cold += float64(after-coldBefore) / memSettled
		shutdown(b, r.sys)
	}
	b.ReportMetric(warm/float64(b.N), "B/record")
	b.ReportMetric(cold/float64(b.N), "B/record-cold")
}

// producerChanBytes measures what a producer's own Done channel occupies: n channels
// held in a slice allocated before the baseline.
func producerChanBytes(n int) float64 {
	hold := make([]chan job.Outcome, n)
	before := heapInUse()
	for i := range hold {
		hold[i] = make(chan job.Outcome, 1)
	}
	after := heapInUse()
	runtime.KeepAlive(hold)
	return float64(after-before) / float64(n)
}

// BenchmarkMemoryLiveIdleJob reports the heap plus stacks per live idle job: 10,000
// owned jobs (10 on each of 1,000 registered owners, warmed up as above, process
// registry included) whose producers never settle on their own (the benchmark settles
// them itself before shutdown). Each producer holds exactly one thing, its Done
// channel (its Cancel is the static noCancel, no ReadOutput); the bytes of such a
// channel are measured separately (producerChanBytes, same count) and subtracted.
// Reported: B/job, troupe's share; B/job-raw, the whole delta; B/producer, the
// subtracted part; B/job-stack, the part of B/job that is goroutine stacks (the
// watcher's shards); goroutines/job. A Read of every job before the measurement
// makes sure each job actor has started and its Done channel is being watched. One
// op is one whole measurement on a fresh System.
func BenchmarkMemoryLiveIdleJob(b *testing.B) { liveIdleJob(b, false) }

// BenchmarkMemoryLiveIdleJobOnSettle is BenchmarkMemoryLiveIdleJob for producers
// that settle through Hooks.OnSettle, as troupe's own producers do (shell, PTY,
// subagent, workflow): each holds exactly one *job.Settler (measured separately,
// producerSettlerBytes, and subtracted); no Done channel, no watcher shard.
func BenchmarkMemoryLiveIdleJobOnSettle(b *testing.B) { liveIdleJob(b, true) }

// producerSettlerBytes is the heap of n Settlers.
func producerSettlerBytes(n int) float64 {
	hold := make([]*job.Settler, n)
	before := heapInUse()
	for i := range hold {
		hold[i] = new(job.Settler)
	}
	after := heapInUse()
	runtime.KeepAlive(hold)
	return float64(after-before) / float64(n)
}

func liveIdleJob(b *testing.B, onSettle bool) {
	exactHeapProfile("TROUPE_BENCH_LIVE_HEAPPROFILE")
	b.ReportAllocs()
	var net, raw, prod, gor, stk float64
	n := memOwners * memLivePerOwner
	for i := 0; i < b.N; i++ {
		producer := producerChanBytes(n)
		if onSettle {
			producer = producerSettlerBytes(n)
		}
		r := newRig(b)
		owners := r.agents(b, "mem", memOwners)
		base := processes(r.sys)
		r.fill(b, owners, memOwners) // warm-up: one settled record per owner
		r.quiesce(b, base)
		warmProcessRegistry(b, r.sys)
		r.quiesce(b, base)
		chans := make([]chan job.Outcome, 0, n)
		settlers := make([]*job.Settler, 0, n)
		run := func() (job.Hooks, error) {
			if onSettle {
				s := new(job.Settler)
				settlers = append(settlers, s)
				return job.Hooks{OnSettle: s.OnSettle, Cancel: noCancel}, nil
			}
			ch := make(chan job.Outcome, 1)
			chans = append(chans, ch)
			return job.Hooks{Done: ch, Cancel: noCancel}, nil
		}
		ids := make([]string, 0, n)
		callers := make([]registry.Caller, 0, n)
		g0 := runtime.NumGoroutine()
		treeApplied(b, r.sys)
		before := heapInUse()
		stack0 := stackInUse()
		writeHeapProfileBase(b, "TROUPE_BENCH_LIVE_HEAPPROFILE")
		for k := 0; k < memLivePerOwner; k++ {
			for _, a := range owners {
				id, err := r.sys.Jobs().Start(context.Background(), job.Spec{Kind: kind, Label: "idle", Owner: a, Run: run})
				if err != nil {
					b.Fatal(err)
				}
				ids = append(ids, id)
				callers = append(callers, registry.AsAgent(a))
			}
		}
		for j, id := range ids {
			if _, _, err := r.sys.Jobs().Read(context.Background(), id, callers[j]); err != nil {
				b.Fatal(err)
			}
		}
		treeApplied(b, r.sys)
		after := heapInUse()
		stk += float64(stackInUse()-stack0) / float64(n)
		writeHeapProfile(b, "TROUPE_BENCH_LIVE_HEAPPROFILE")
		gor += float64(runtime.NumGoroutine()-g0) / float64(n)
		d := float64(after-before) / float64(n)
		raw += d
		prod += producer
		net += d - producer
		for _, ch := range chans {
			ch <- job.Outcome{Status: job.Completed}
		}
		for _, s := range settlers {
			s.Settle(job.Outcome{Status: job.Completed})
		}
		for range n {
			<-r.done
		}
		runtime.KeepAlive(owners)
		shutdown(b, r.sys)
	}
	f := float64(b.N)
	b.ReportMetric(net/f, "B/job")
	b.ReportMetric(raw/f, "B/job-raw")
	b.ReportMetric(prod/f, "B/producer")
	b.ReportMetric(stk/f, "B/job-stack")
	b.ReportMetric(gor/f, "goroutines/job")
}
