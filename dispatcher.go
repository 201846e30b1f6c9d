package troupe

import (
	"runtime"
	"sync"
)

// DefaultThroughput is how many messages a mailbox run processes before yielding
// (protoactor's default).
const DefaultThroughput = 300

// PoolDispatcher runs mailbox runs on a few long-lived worker goroutines. protoactor's
// default dispatcher starts a fresh goroutine per mailbox run, whose small stack must
// grow for troupe's handlers on nearly every run; measured on the job lifecycle, that
// growth was ~45% of the CPU. When every worker is busy (or blocked, for example an
// actor waiting on a store write), Schedule falls back to a fresh goroutine, so a
// blocked worker never stalls another actor.
type PoolDispatcher struct {
	work       chan func()
	throughput int
	wg         sync.WaitGroup
	mu         struct {
		sync.Mutex // guards closed and the send on work against Close
		closed     bool
	}
}

// NewPoolDispatcher starts workers goroutines (≤ 0: 2 × GOMAXPROCS).
func NewPoolDispatcher(workers int) *PoolDispatcher {
	if workers <= 0 {
		workers = 2 * runtime.GOMAXPROCS(0)
	}
	d := &PoolDispatcher{work: make(chan func()), throughput: DefaultThroughput}
	d.wg.Add(workers)
	for range workers {
		go func() {
			defer d.wg.Done()
			for fn := range d.work {
				fn()
			}
		}()
	}
	return d
}

// Schedule runs fn on an idle worker, or on a new goroutine if none is idle.
func (d *PoolDispatcher) Schedule(fn func()) {
	d.mu.Lock()
	if !d.mu.closed {
		select {
		case d.work <- fn:
			d.mu.Unlock()
			return
		default:
		}
	}
	d.mu.Unlock()
	go fn()
}

// Throughput is the mailbox batch size.
func (d *PoolDispatcher) Throughput() int { return d.throughput }

// Close stops the workers once they finish their current runs; later runs get
// fresh goroutines. Idempotent.
func (d *PoolDispatcher) Close() {
	d.mu.Lock()
	if !d.mu.closed {
		d.mu.closed = true
		close(d.work)
	}
	d.mu.Unlock()
	d.wg.Wait()
}
