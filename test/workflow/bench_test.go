package workflow_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/troupetest"
	"github.com/troupe-rt/troupe/workflow"
)

// The fan-out benchmark (issue 16): 1,000 scripted agents under
// maxConcurrentAgents 16 through a workflow run, against the same 1,000 children
// started directly through the subagent seam by 16 workers. Both use the auto stub
// (each child settles at once) on the same system. Goal: workflow ≤ 2× direct.
//
//	go test ./test/workflow -run '^$' -bench 'FanOut|IdleRun' -benchmem -count 3
const fanOut = 1000

// benchEnv is a system with the auto stub, an engine (provider stub) and a live
// parent; no event recorder, so both sides pay only for troupe.
type benchEnv struct {
	rt     *subagent.Runtime
	eng    *workflow.Engine
	parent *owner.Agent
}

func newBenchEnv(b *testing.B, concurrency int64) *benchEnv {
	// a short grace: the idle runs are parked in a promise no hook settles
	sys, logs := troupetest.Served(b)
	rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), slog.New(logs))
	require.NoError(b, err)
	_, err = rt.RegisterProvider(b.Context(), sys.Scope(), newStub("stub"))
	require.NoError(b, err)
	eng, err := workflow.NewEngine(workflow.Host{Actors: sys.Actors(), Scope: sys.Scope(), Inspector: sys.Tree().PID(), Logger: slog.New(logs)},
		sys.Scope(), rt, workflow.Config{Provider: str("stub"), MaxConcurrentAgents: i64(concurrency), DisposeGraceMs: i64(10)})
	require.NoError(b, err)
	return &benchEnv{rt: rt, eng: eng, parent: troupetest.Agent(b, sys, "parent-A")}
}

func BenchmarkFanOut_Workflow1000(b *testing.B) {
	e := newBenchEnv(b, 16)
	req := workflow.Request{Script: "return (await parallel(Array.from({ length: 1000 }, (_, i) => () => agent('c' + i)))).length",
		Meta: json.RawMessage(testMeta), Parent: e.parent}
	b.ResetTimer()
	for b.Loop() {
		run, err := e.eng.Start(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		res, err := run.Result(context.Background())
		if err != nil || res.StopReason != workflow.StopCompleted || string(res.Value) != "1000" {
			b.Fatalf("%v %+v", err, res)
		}
		if err := run.Dispose(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(fanOut), "children/op")
}

func BenchmarkFanOut_DirectSeam1000(b *testing.B) {
	e := newBenchEnv(b, 16)
	b.ResetTimer()
	for b.Loop() {
		var next atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= fanOut {
					run, err := e.rt.Start(context.Background(), "stub", subagent.Request{Prompt: "c", Label: "c"}, e.parent)
					if err != nil {
						errs <- err
						return
					}
					if _, err := run.Result(context.Background()); err != nil {
						errs <- err
						return
					}
					_ = run.Dispose(context.Background())
				}
			}()
		}
		wg.Wait()
		select {
		case err := <-errs:
			b.Fatal(err)
		default:
		}
	}
	b.ReportMetric(float64(fanOut), "children/op")
}

// BenchmarkIdleRun is the memory of an idle workflow runtime: each op starts a
// run whose script parks after one log() and keeps it alive until the timer
// stops. B/op and allocs/op (-benchmem) are what building one idle run
// allocates; live-B/run is the heap still in use per parked run.
func BenchmarkIdleRun(b *testing.B) {
	e := newBenchEnv(b, 16)
	parked := make(chan struct{}, 1024)
	req := workflow.Request{Script: "log('parked')\nawait new Promise(() => {})", Meta: json.RawMessage(testMeta), Parent: e.parent,
		Observe: func(ev workflow.Event) {
			if ev.Type == workflow.EventLog {
				parked <- struct{}{}
			}
		}}
	var runs []*workflow.Run
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for b.Loop() {
		run, err := e.eng.Start(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		<-parked
		runs = append(runs, run)
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if len(runs) > 0 {
		b.ReportMetric(float64(int64(after.HeapInuse)-int64(before.HeapInuse))/float64(len(runs)), "live-B/run")
	}
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(func() { _ = r.Dispose(context.Background()) })
	}
	wg.Wait()
}
