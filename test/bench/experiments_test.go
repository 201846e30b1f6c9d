package bench

import (
	"context"
	"os"
	"testing"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/job"
)

// The benchmarks below are diagnostics behind the README's profile findings, not
// acceptance figures: they rerun the unowned lifecycle with one change made from
// the outside (no runtime code touched), to measure what a fix would gain. They
// run only with TROUPE_BENCH_EXPERIMENTS=1.

func experiments(b *testing.B) {
	if os.Getenv("TROUPE_BENCH_EXPERIMENTS") != "1" {
		b.Skip("set TROUPE_BENCH_EXPERIMENTS=1 to run the diagnostic experiments")
	}
}

// poolDispatcher runs mailbox batches on a few long-lived goroutines (whose stacks
// have already grown) when one is idle, and on a fresh goroutine otherwise, as
// protoactor's default dispatcher always does.
type poolDispatcher struct {
	work chan func()
	stop chan struct{}
	done chan struct{}
}

func newPoolDispatcher(b *testing.B, workers int) *poolDispatcher {
	d := &poolDispatcher{work: make(chan func()), stop: make(chan struct{}), done: make(chan struct{}, workers)}
	for range workers {
		go func() {
			defer func() { d.done <- struct{}{} }()
			for {
				select {
				case fn := <-d.work:
					fn()
				case <-d.stop:
					return
				}
			}
		}()
	}
	// Registered before the System's own cleanup, so it runs after Shutdown.
	b.Cleanup(func() {
		close(d.stop)
		for range workers {
			<-d.done
		}
	})
	return d
}

func (d *poolDispatcher) Schedule(fn func()) {
	select {
	case d.work <- fn:
	default:
		go fn()
	}
}

func (d *poolDispatcher) Throughput() int { return 300 }

// BenchmarkExperimentLifecyclePoolDispatcher: troupe's actors on poolDispatcher.
func BenchmarkExperimentLifecyclePoolDispatcher(b *testing.B) {
	experiments(b)
	d := newPoolDispatcher(b, 4)
	r := newRig(b, func(c *troupe.Config) { c.Dispatcher = d })
	r.lifecycle(b, nil)
}

// BenchmarkExperimentLifecycleKeeper: one idle job stays live throughout, so the
// watcher's shard goroutine (and its control channel) outlives each lifecycle.
func BenchmarkExperimentLifecycleKeeper(b *testing.B) {
	experiments(b)
	r := newRig(b)
	_, err := r.sys.Jobs().Start(context.Background(), job.Spec{Kind: "keeper", Label: "keeper", Run: untilCancelled(false)})
	if err != nil {
		b.Fatal(err)
	}
	r.lifecycle(b, nil)
}

// BenchmarkExperimentLifecyclePoolKeeper: both changes.
func BenchmarkExperimentLifecyclePoolKeeper(b *testing.B) {
	experiments(b)
	d := newPoolDispatcher(b, 4)
	r := newRig(b, func(c *troupe.Config) { c.Dispatcher = d })
	_, err := r.sys.Jobs().Start(context.Background(), job.Spec{Kind: "keeper", Label: "keeper", Run: untilCancelled(false)})
	if err != nil {
		b.Fatal(err)
	}
	r.lifecycle(b, nil)
}
