package bench

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"runtime/metrics"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
)

// The settlement path's benchmarks beside bench_test.go's: kill → settled through
// OnSettle and through a Done channel, with the latency's mean and p99.

// untilCancelledDone is untilCancelled settling through a Done channel: the path
// of a producer that has no OnSettle (one of up to 64 channels a watcher shard
// selects over).
func untilCancelledDone() (job.Hooks, error) {
	ch := make(chan job.Outcome, 1)
	return job.Hooks{Done: ch, CancelNonBlocking: true, Cancel: func(string) error {
		select { // idempotent: only the first outcome is read anyway
		case ch <- job.Outcome{Status: job.Killed}:
		default:
		}
		return nil
	}}, nil
}

// BenchmarkKillToSettledDone is BenchmarkKillToSettled for a producer that
// settles through its Done channel.
func BenchmarkKillToSettledDone(b *testing.B) { killToSettled(b, untilCancelledDone) }

// BenchmarkKillToSettledRunner is BenchmarkKillToSettled for a producer that does
// not declare its Cancel non-blocking: the Cancel runs on a runner goroutine, and
// its result comes back to the job actor (two more goroutine hand-offs).
func BenchmarkKillToSettledRunner(b *testing.B) {
	killToSettled(b, func() (job.Hooks, error) {
		h, err := untilCancelled(false)()
		h.CancelNonBlocking = false
		return h, err
	})
}

// schedRuns estimates how many times goroutines were made to run so far: the
// runtime samples one in 8 of the transitions from runnable to running of each
// goroutine into /sched/latencies:seconds (gTrackingPeriod), so its count × 8.
// Every goroutine wake-up is one (so are yields and preemptions, rare here). Per
// op it is the figure the time of a hand-off path is bound by, and unlike the
// time it hardly moves with the machine's load.
func schedRuns() float64 {
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0
	}
	var n uint64
	for _, c := range s[0].Value.Float64Histogram().Counts {
		n += c
	}
	return float64(n * 8)
}

// runsMeter reports runs/op (schedRuns per op) of the timed ops: start and stop
// bracket them, so untimed setup (a refill) is left out.
type runsMeter struct {
	sum, at float64
	ops     int
}

func (m *runsMeter) start() { m.at = schedRuns() }
func (m *runsMeter) stop(ops int) {
	m.sum += schedRuns() - m.at
	m.ops += ops
}
func (m *runsMeter) report(b *testing.B) {
	if m.ops > 0 {
		b.ReportMetric(m.sum/float64(m.ops), "runs/op")
	}
}

// killToSettled is the kill → settled loop: Kill of a running job whose Cancel
// settles it killed, then AwaitSettled. Jobs are started killPool at a time with
// the timer stopped (the unowned admission limit is raised to killPool). Every
// op is timed on its own: mean-ns and p99-ns are reported beside ns/op.
func killToSettled(b *testing.B, run func() (job.Hooks, error)) {
	r := newRig(b, func(c *troupe.Config) { l := int64(killPool); c.MaxConcurrentJobsPerOwner = &l })
	jobs := r.sys.Jobs()
	spec := job.Spec{Kind: kind, Label: "killable", Run: run}
	ids := make([]string, 0, killPool)
	refill := func() {
		for len(ids) < killPool {
			id, err := jobs.Start(context.Background(), spec)
			if err != nil {
				b.Fatal(err)
			}
			ids = append(ids, id)
		}
		// Start returns once the job is registered; what the start set going
		// meanwhile is the start's work, not the kill's, and must not run inside the
		// timed kills: the job actors' first runs (Started: the OnSettle
		// subscription, or the Done channel's watch) and the supervision
		// inspector's bookkeeping of the 256 JobSpawned events (a tree entry per
		// job). Without this wait the first kills after a refill ran behind them
		// (the first kill was 5× as likely as any other to be in the slowest 1%,
		// and allocs/op counted the inspector's). Waiters is answered by each job's
		// actor, so after it every actor has started; the inspector's Stats is
		// answered after the events queued before it.
		for _, id := range ids {
			if _, err := jobs.Waiters(context.Background(), id); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := r.sys.Tree().Stats(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	refill()
	ctx := context.Background()
	var lat []time.Duration
	var runs runsMeter
	var tail *tailProbe
	if os.Getenv("TROUPE_BENCH_KILL_TAIL") != "" {
		tail = &tailProbe{}
	}
	b.ReportAllocs()
	runs.start()
	ran := 0
	for b.Loop() {
		if len(ids) == 0 {
			runs.stop(ran)
			b.StopTimer()
			refill()
			b.StartTimer()
			ran = 0
			runs.start()
		}
		ran++
		id := ids[len(ids)-1]
		ids = ids[:len(ids)-1]
		tail.before(ran - 1)
		t0 := time.Now()
		res, _, err := jobs.Kill(ctx, id, registry.NoCaller, registry.KillOptions{})
		if err != nil || res != messages.KillResult_KILL_RESULT_REQUESTED {
			b.Fatalf("kill %s: %v, %v", id, res, err)
		}
		snap, err := jobs.AwaitSettled(ctx, id, registry.NoCaller)
		if err != nil || snap.Status != job.Killed {
			b.Fatalf("await %s: %v, %v", id, snap, err)
		}
		lat = append(lat, time.Since(t0))
		tail.after(lat[len(lat)-1])
		<-r.done // the listener fired before AwaitSettled was answered
	}
	runs.stop(ran)
	b.StopTimer()
	tail.report(b)
	reportLatency(b, lat)
	runs.report(b)
	for _, id := range ids { // the pool's rest: settle it before shutdown
		if _, _, err := jobs.Kill(ctx, id, registry.NoCaller, registry.KillOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	for range ids {
		<-r.done
	}
}

// tailProbe (TROUPE_BENCH_KILL_TAIL=1) records, for every timed kill, what else
// happened during it — the process's involuntary context switches (a thread
// preempted by the kernel: other processes' load), its voluntary ones (a runtime
// thread parked and woken: work spread onto another P), a GC cycle ended, the
// goroutine runs, the kill's position after a refill — and logs how the slowest
// 1% compare with all kills. It costs two getrusage calls and two metric reads
// per kill, so the figures of a run with it are not the benchmark's.
type tailProbe struct {
	samples []tailSample
	cur     tailSample
	ru      syscall.Rusage
	gc      uint64
	runs    float64
}

type tailSample struct {
	d                   time.Duration
	pos                 int
	involuntary, parked int64
	gc                  bool
	runs                float64
}

func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func (p *tailProbe) before(pos int) {
	if p == nil {
		return
	}
	p.cur = tailSample{pos: pos}
	p.gc, p.runs = gcCycles(), schedRuns()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &p.ru)
}

func (p *tailProbe) after(d time.Duration) {
	if p == nil {
		return
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	p.cur.d = d
	p.cur.involuntary, p.cur.parked = ru.Nivcsw-p.ru.Nivcsw, ru.Nvcsw-p.ru.Nvcsw
	p.cur.gc, p.cur.runs = gcCycles() != p.gc, schedRuns()-p.runs
	p.samples = append(p.samples, p.cur)
}

func (p *tailProbe) report(b *testing.B) {
	if p == nil || len(p.samples) < 100 {
		return
	}
	share := func(s []tailSample) string {
		var inv, park, gc, first int
		var runs float64
		for _, x := range s {
			switch {
			case x.involuntary > 0:
				inv++
			case x.parked > 0:
				park++
			}
			if x.gc {
				gc++
			}
			if x.pos < 8 {
				first++
			}
			runs += x.runs
		}
		n := float64(len(s))
		return fmt.Sprintf("%d kills: preempted %.1f%%, else a thread parked %.1f%%, a GC cycle ended %.1f%%, among the first 8 after a refill %.1f%%, %.2f goroutine runs/kill",
			len(s), 100*float64(inv)/n, 100*float64(park)/n, 100*float64(gc)/n, 100*float64(first)/n, runs/n)
	}
	all := slices.Clone(p.samples)
	slices.SortFunc(all, func(x, y tailSample) int { return cmp.Compare(x.d, y.d) })
	b.Logf("kill tail: all %s", share(all))
	b.Logf("kill tail: slowest 1%% (≥ %v) %s", all[len(all)*99/100].d, share(all[len(all)*99/100:]))
}

// reportLatency reports the mean and the 99th percentile of lat (nearest rank).
func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	slices.Sort(lat)
	p99 := lat[min(len(lat)-1, (len(lat)*99+99)/100-1)]
	b.ReportMetric(float64(sum.Nanoseconds())/float64(len(lat)), "mean-ns")
	b.ReportMetric(float64(p99.Nanoseconds()), "p99-ns")
}
