package troupe

import (
	"runtime"
	"sync"
	"time"
)

// DefaultThroughput is how many messages a mailbox run processes before yielding
// (protoactor's default).
const DefaultThroughput = 300

// BlockedAfter is how long a PoolDispatcher worker may stay in one mailbox run, while
// runs wait in its queue, before it counts as blocked and an escape worker is started
// in its place. Runs of troupe's actors take microseconds; one that takes longer is
// waiting (on a store write, a producer's hook) or computing, and either way it must
// not hold up the runs queued behind it.
const BlockedAfter = 2 * time.Millisecond

// PoolDispatcher runs mailbox runs on a few long-lived worker goroutines, whose
// stacks have already grown. protoactor's default dispatcher starts a fresh
// goroutine per mailbox run, whose small stack must grow for troupe's handlers on
// nearly every run; measured on the job lifecycle, that growth was ~45% of the CPU.
//
// The contract:
//   - Schedule never starts a goroutine while the pool is open: a run goes to an idle
//     worker (the one idle the shortest, whose stack is the warmest) or, when every
//     worker is busy, to a FIFO queue the workers drain as they finish.
//   - A blocked worker never stalls another actor. A watchdog, awake only while runs
//     are queued and no worker is idle, marks a worker blocked when it has stayed in
//     the same run for at least BlockedAfter, and then starts escape workers so that
//     the pool again has its size in unblocked workers. Blocking is detected, not
//     assumed: a busy pool whose runs finish starts nothing.
//   - Escapes are bounded by the blocked workers: there are never more than the pool's
//     size plus the number of workers marked blocked. A worker about to go idle
//     retires while there are more unblocked workers than the pool's size, so the pool
//     shrinks back once the blocked runs return.
//   - After Close, Schedule starts a goroutine per run (protoactor's behaviour): the
//     actors of a system being shut down still stop.
type PoolDispatcher struct {
	size       int
	throughput int
	wake       chan struct{} // capacity 1: the watchdog is armed
	stop       chan struct{} // closed by Close: the watchdog returns
	wg         sync.WaitGroup
	mu         struct {
		sync.Mutex // guards everything below; held for O(1) steps only, never across a run
		queue      runQueue
		idle       []*poolWorker // parked workers, the most recently parked last
		workers    []*poolWorker // every live worker (idle, busy or blocked)
		blocked    int           // workers marked blocked and still in that run
		armed      bool          // the watchdog is (or is about to be) watching
		closed     bool
		escapes    uint64 // escape workers started, ever (tests and diagnostics)
	}
}

// poolWorker is one worker's state, touched under the dispatcher's lock.
type poolWorker struct {
	run     chan func() // capacity 1: the run handed to this parked worker; closed by Close
	index   int         // position in workers
	busy    bool
	runs    uint64 // runs started: the watchdog compares it across its checks
	seen    uint64 // runs at the watchdog's last check
	blocked bool
}

// NewPoolDispatcher starts workers goroutines (≤ 0: 2 × GOMAXPROCS) and the pool's
// watchdog goroutine. Close stops them.
func NewPoolDispatcher(workers int) *PoolDispatcher {
	if workers <= 0 {
		workers = 2 * runtime.GOMAXPROCS(0)
	}
	d := &PoolDispatcher{
		size:       workers,
		throughput: DefaultThroughput,
		wake:       make(chan struct{}, 1),
		stop:       make(chan struct{}),
	}
	d.mu.Lock()
	for range workers {
		d.startLocked(nil)
	}
	d.mu.Unlock()
	d.wg.Add(1)
	go d.watch()
	return d
}

// Schedule hands fn to an idle worker, or queues it for the next worker that
// finishes its run; it never blocks on a run and never starts a goroutine while the
// pool is open.
func (d *PoolDispatcher) Schedule(fn func()) {
	d.mu.Lock()
	if d.mu.closed {
		d.mu.Unlock()
		go fn()
		return
	}
	if n := len(d.mu.idle); n > 0 {
		w := d.mu.idle[n-1]
		d.mu.idle[n-1] = nil
		d.mu.idle = d.mu.idle[:n-1]
		w.busy = true
		w.runs++
		d.mu.Unlock()
		w.run <- fn // capacity 1, and w took nothing since it parked: never blocks
		return
	}
	d.mu.queue.push(fn)
	d.armLocked()
	d.mu.Unlock()
}

// Throughput is the mailbox batch size.
func (d *PoolDispatcher) Throughput() int { return d.throughput }

// Close stops the pool: the runs still queued, and every later run, get fresh
// goroutines; Close returns once every worker has finished its current run (a
// blocked one included: Close waits for it). Idempotent.
func (d *PoolDispatcher) Close() {
	d.mu.Lock()
	if !d.mu.closed {
		d.mu.closed = true
		close(d.stop)
		for _, w := range d.mu.idle {
			close(w.run)
		}
		d.mu.idle = nil
		// What is queued runs on fresh goroutines, as later runs do: a blocked worker
		// may be waiting for one of them.
		for fn := d.mu.queue.pop(); fn != nil; fn = d.mu.queue.pop() {
			go fn()
		}
	}
	d.mu.Unlock()
	d.wg.Wait()
}

// startLocked starts a worker; first, if not nil, is its first run.
func (d *PoolDispatcher) startLocked(first func()) {
	w := &poolWorker{run: make(chan func(), 1), index: len(d.mu.workers)}
	d.mu.workers = append(d.mu.workers, w)
	if first != nil {
		w.busy = true
		w.runs++
	} else {
		d.mu.idle = append(d.mu.idle, w)
	}
	d.wg.Add(1)
	go d.work(w, first)
}

// work is a worker's loop: run, then take the next queued run or park.
func (d *PoolDispatcher) work(w *poolWorker, fn func()) {
	defer d.wg.Done()
	for {
		if fn == nil {
			var ok bool
			if fn, ok = <-w.run; !ok {
				return // closed while parked
			}
		}
		fn()
		var keep bool
		if fn, keep = d.after(w); !keep {
			return
		}
	}
}

// after ends w's run in one step under the lock: it returns the next queued run for
// w, or nil with w parked, or reports false when w must exit instead — the pool is
// closed, or it has more unblocked workers than its size (w was an escape, or a
// blocked worker has come back).
func (d *PoolDispatcher) after(w *poolWorker) (func(), bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if w.blocked {
		w.blocked = false
		d.mu.blocked--
	}
	if fn := d.mu.queue.pop(); fn != nil {
		w.runs++
		return fn, true
	}
	w.busy = false
	if d.mu.closed || len(d.mu.workers)-d.mu.blocked > d.size {
		last := len(d.mu.workers) - 1
		moved := d.mu.workers[last]
		d.mu.workers[w.index], moved.index = moved, w.index
		d.mu.workers[last] = nil
		d.mu.workers = d.mu.workers[:last]
		return nil, false
	}
	d.mu.idle = append(d.mu.idle, w)
	return nil, true
}

// armLocked wakes the watchdog, unless it is already watching: called when a run is
// queued because no worker is idle.
func (d *PoolDispatcher) armLocked() {
	if d.mu.armed {
		return
	}
	d.mu.armed = true
	select {
	case d.wake <- struct{}{}:
	default: // a wake is already pending
	}
}

// watch is the watchdog: once armed, it checks every BlockedAfter until the queue
// is empty.
func (d *PoolDispatcher) watch() {
	defer d.wg.Done()
	t := time.NewTimer(BlockedAfter)
	t.Stop()
	for {
		select {
		case <-d.wake:
		case <-d.stop:
			return
		}
		for watching := true; watching; {
			t.Reset(BlockedAfter)
			select {
			case <-t.C:
			case <-d.stop:
				t.Stop()
				return
			}
			watching = d.check()
		}
	}
}

// check marks blocked every worker still in the run it was in at the previous check
// (so for at least BlockedAfter), starts escape workers while runs are queued and the
// pool has fewer unblocked workers than its size, and reports whether to keep
// watching (runs are still queued).
func (d *PoolDispatcher) check() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, w := range d.mu.workers {
		if w.busy && !w.blocked && w.runs == w.seen {
			w.blocked = true
			d.mu.blocked++
		}
		w.seen = w.runs
	}
	if d.mu.closed || d.mu.queue.len() == 0 {
		d.mu.armed = false
		return false
	}
	for len(d.mu.workers)-d.mu.blocked < d.size {
		fn := d.mu.queue.pop()
		if fn == nil {
			break
		}
		d.startLocked(fn)
		d.mu.escapes++
	}
	return true
}

// runQueue is a FIFO ring of runs.
type runQueue struct {
	buf  []func()
	head int
	n    int
}

func (q *runQueue) len() int { return q.n }

func (q *runQueue) push(fn func()) {
	if q.n == len(q.buf) {
		grown := make([]func(), max(16, 2*len(q.buf)))
		for i := range q.n {
			grown[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = grown, 0
	}
	q.buf[(q.head+q.n)%len(q.buf)] = fn
	q.n++
}

// pop returns the oldest run, or nil if none is queued.
func (q *runQueue) pop() func() {
	if q.n == 0 {
		return nil
	}
	fn := q.buf[q.head]
	q.buf[q.head] = nil
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	return fn
}
