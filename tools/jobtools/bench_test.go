package jobtools_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"runtime"
	"runtime/trace"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-rt/troupe/actors/registry"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/producers/process"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/tools/jobtools"
	"github.com/troupe-rt/troupe/troupetest"
)

// BenchmarkJobOutputStream is job_output on a live stream job through the tool
// pipeline (decode, read, render, finalize), with a ctx that can end as a model's
// tool call has (the benchmark's own). Baseline: BenchmarkRawRead.
func BenchmarkJobOutputStream(b *testing.B) {
	sys, _ := troupetest.NewSystem(b)
	m, err := jobtools.MountIn(b.Context(), sys.Jobs(), sys.Scope(), jobtools.DefaultConfig())
	require.NoError(b, err)
	p := troupetest.NewProducer()
	p.Stream = true
	p.OnCancel = &job.Outcome{Status: job.Killed}
	id, err := sys.Jobs().Start(context.Background(), p.Spec(nil))
	require.NoError(b, err)
	args, _ := json.Marshal(map[string]any{"job_id": id})
	pipe := m.Pipeline()
	call := tools.Call{ID: "c", Name: jobtools.NameOutput, Args: args}
	ctx := b.Context()
	for b.Loop() {
		if res := pipe.Run(ctx, m.Output(), call); res.IsError {
			b.Fatal(res.Content)
		}
	}
}

// BenchmarkRawRead is the registry read the tool wraps.
func BenchmarkRawRead(b *testing.B) {
	sys, _ := troupetest.Served(b)
	p := troupetest.NewProducer()
	p.Stream = true
	p.OnCancel = &job.Outcome{Status: job.Killed}
	id, err := sys.Jobs().Start(context.Background(), p.Spec(nil))
	require.NoError(b, err)
	for b.Loop() {
		if _, _, err := sys.Jobs().Read(context.Background(), id, registry.NoCaller); err != nil {
			b.Fatal(err)
		}
	}
}

type chanSurface chan time.Time

// EnqueuesOnly: an owner.InlineSurface (the benchmark drains each notice before
// the next settles, so the send never waits).
func (c chanSurface) EnqueuesOnly() {}

func (c chanSurface) Inject(owner.Message) error   { c <- time.Now(); return nil }
func (c chanSurface) Steer(owner.Message) error    { c <- time.Now(); return nil }
func (c chanSurface) Followup(owner.Message) error { c <- time.Now(); return nil }

// BenchmarkNoticeLatency measures settle (the producer sends its outcome) → the
// notice reaching the owner's delivery surface. Each op's settle → surface is a
// runtime/trace region "notice": run with -test.trace and count the goroutines made runnable
// inside those regions (wake-ups per notice, which a loaded machine leaves exact).
func BenchmarkNoticeLatency(b *testing.B) {
	noticeLatency(b, func(c chanSurface) owner.Surface { return c })
}

// queuedChanSurface is chanSurface without the owner.InlineSurface declaration:
// an embedder's surface that has not promised never to block.
type queuedChanSurface struct{ c chanSurface }

func (q queuedChanSurface) Inject(m owner.Message) error   { return q.c.Inject(m) }
func (q queuedChanSurface) Steer(m owner.Message) error    { return q.c.Steer(m) }
func (q queuedChanSurface) Followup(m owner.Message) error { return q.c.Followup(m) }

// BenchmarkNoticeLatencyQueuedSurface is NoticeLatency to a surface that is not an
// owner.InlineSurface: its owner's notices are handed to a worker.
func BenchmarkNoticeLatencyQueuedSurface(b *testing.B) {
	noticeLatency(b, func(c chanSurface) owner.Surface { return queuedChanSurface{c} })
}

func noticeLatency(b *testing.B, wrap func(chanSurface) owner.Surface) {
	sys, _ := troupetest.NewSystem(b)
	_, err := jobtools.MountIn(b.Context(), sys.Jobs(), sys.Scope(), jobtools.DefaultConfig())
	require.NoError(b, err)
	_, err = sys.Jobs().MountAgents(context.Background(), sys.Scope())
	require.NoError(b, err)
	surface := make(chanSurface, 1)
	a, err := sys.NewAgent(nil, "alice", owner.Options{Surface: wrap(surface)})
	require.NoError(b, err)
	require.NoError(b, sys.Jobs().RegisterAgent(context.Background(), a))
	a.SetBusy(true)
	var total time.Duration
	for b.Loop() {
		b.StopTimer()
		p := troupetest.NewProducer()
		_, err := sys.Jobs().Start(context.Background(), p.Spec(a))
		require.NoError(b, err)
		b.StartTimer()
		start := time.Now()
		region := trace.StartRegion(context.Background(), "notice")
		p.Settle(job.Outcome{Status: job.Completed})
		got := <-surface
		region.End()
		total += got.Sub(start)
	}
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/notice")
}

type ping struct{}

// BenchmarkJobtoolsFloorRequestResponse is NoticeLatency's floor in this package
// (the ratios program divides by it), as test/bench's FloorRequestResponse: a
// RequestFuture round trip to an echo actor on a bare protoactor system
// configured as troupe configures its own.
func BenchmarkJobtoolsFloorRequestResponse(b *testing.B) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	sys := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }),
		actor.WithDeadLetterThrottleInterval(10*time.Millisecond))
	b.Cleanup(sys.Shutdown)
	root := sys.Root
	echo := root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*ping); ok {
			c.Respond(m)
		}
	}))
	b.Cleanup(func() { _ = root.StopFuture(echo).Wait() })
	msg := &ping{}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := root.RequestFuture(echo, msg, 10*time.Second).Result(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMemoryOfGiBOutputJob runs a shell job that writes 1 GiB nobody reads and
// reports the peak heap while it runs: the output buffer and the record bound it.
func BenchmarkMemoryOfGiBOutputJob(b *testing.B) {
	sys, _ := troupetest.Served(b)
	for b.Loop() {
		runtime.GC()
		var base runtime.MemStats
		runtime.ReadMemStats(&base)
		var peak atomic.Uint64
		stop := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			t := time.NewTicker(10 * time.Millisecond)
			defer t.Stop()
			for {
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > peak.Load() {
					peak.Store(ms.HeapInuse)
				}
				select {
				case <-stop:
					return
				case <-t.C:
				}
			}
		}()
		id, err := sys.Jobs().Start(context.Background(), process.Shell("head -c 1073741824 /dev/zero", process.Config{}))
		require.NoError(b, err)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		_, err = sys.Jobs().AwaitSettled(ctx, id, registry.NoCaller)
		cancel()
		require.NoError(b, err)
		close(stop)
		<-sampled
		b.ReportMetric(float64(peak.Load()-min(peak.Load(), base.HeapInuse))/(1<<20), "peak-heap-MiB")
	}
}
