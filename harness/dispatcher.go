package harness

import (
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// DefaultThroughput is the throughput a Dispatcher reports: how many messages a
// mailbox run processes before it calls runtime.Gosched (protoactor's default).
const DefaultThroughput = 300

// Dispatcher is a seeded protoactor dispatcher for deterministic schedules. Every
// mailbox run scheduled on it is queued; one worker goroutine runs the queued runs
// one at a time, picking the next with a math/rand/v2 PCG seeded from the seed.
//
// What is deterministic: the order in which queued runs execute, as a function of
// the seed and of the sequence of Schedule calls. Every actor using this dispatcher
// runs on the one worker, so no two of them ever run at once, and every message one
// of them sends to another is queued from the worker, at a point fixed by the
// schedule. (A run an actor's message makes on its sender's goroutine, an
// internal/mailbox Inline one, is then made inside the sending actor's run on the
// worker; troupe lets a Client call's goroutine run the registry only on its
// PoolDispatcher, registry.Config.CallerRuns, never on this one.) A scenario whose every event starts inside the dispatcher (or is
// submitted while it is Paused, from one goroutine, in a fixed order) replays
// exactly: same seed, same interleaving, same trace.
//
// What is not: anything that happens on a goroutine outside the dispatcher. The
// test's own goroutines (client calls such as Kill or Wait send from the calling
// goroutine), producer goroutines, the job Done watcher (actors/job/donewatch.go:
// it forwards a producer's outcome to the job actor from its own goroutine), wait
// timers, Scope.Dispose goroutines, and actors spawned without this dispatcher
// (protoactor's own system actors, an embedder's actors) submit runs whenever the
// Go scheduler lets them. The seed then still decides every pick among what is queued, but what
// is queued at each pick depends on real time. Replay such a schedule by its seed
// to get the same decisions, not necessarily the same interleaving.
//
// A mailbox run drains its mailbox (protoactor's loop), so the unit of interleaving
// is a run, not a single message. Runs must not block waiting for another actor's
// run: with one worker that would deadlock (troupe's actors never do).
type Dispatcher struct {
	seed       uint64
	throughput int
	wake       chan struct{} // capacity 1: a Schedule or state change since the worker last looked
	done       chan struct{} // closed when the worker exits

	mu struct {
		sync.Mutex
		rng      *rand.Rand // picks the next run; touched only under mu
		queue    []func()
		paused   bool
		closing  bool
		stopped  bool // the worker has exited; Schedule drops runs
		running  bool // a run is executing
		runs     uint64
		dropped  uint64
		trace    uint64 // FNV-1a over (queue length, pick) of every pick
		panicVal any
		idle     []chan struct{} // WaitIdle callers
	}
}

var _ actor.Dispatcher = (*Dispatcher)(nil)

// NewDispatcher starts a seeded dispatcher and its worker goroutine. Close stops it.
func NewDispatcher(seed uint64) *Dispatcher {
	d := &Dispatcher{
		seed:       seed,
		throughput: DefaultThroughput,
		wake:       make(chan struct{}, 1),
		done:       make(chan struct{}),
	}
	d.mu.rng = rand.New(rand.NewPCG(seed, seed^0x5eed5eed5eed5eed))
	d.mu.trace = 14695981039346656037
	go d.work()
	return d
}

// Seed returns the dispatcher's seed.
func (d *Dispatcher) Seed() uint64 { return d.seed }

// Schedule queues a mailbox run (protoactor calls it). It never blocks and never
// runs fn itself. After Close has finished, runs are dropped (counted by Dropped).
func (d *Dispatcher) Schedule(fn func()) {
	d.mu.Lock()
	if d.mu.stopped {
		d.mu.dropped++
		d.mu.Unlock()
		return
	}
	d.mu.queue = append(d.mu.queue, fn)
	d.mu.Unlock()
	d.poke()
}

// Throughput is protoactor's per-run yield interval.
func (d *Dispatcher) Throughput() int { return d.throughput }

// Pause stops the worker from starting new runs (a run in progress finishes).
// Runs scheduled while paused are queued; Resume lets the worker pick among them.
func (d *Dispatcher) Pause() {
	d.mu.Lock()
	d.mu.paused = true
	d.mu.Unlock()
}

// Resume undoes Pause.
func (d *Dispatcher) Resume() {
	d.mu.Lock()
	d.mu.paused = false
	d.mu.Unlock()
	d.poke()
}

// WaitIdle returns a channel closed once the dispatcher is idle: nothing queued
// and no run executing. Runs submitted later by outside goroutines are not
// covered: idleness is a barrier for dispatcher-side traffic only.
func (d *Dispatcher) WaitIdle() <-chan struct{} {
	ch := make(chan struct{})
	d.mu.Lock()
	if d.idleLocked() {
		close(ch)
	} else {
		d.mu.idle = append(d.mu.idle, ch)
	}
	d.mu.Unlock()
	return ch
}

// Queued returns how many runs are waiting.
func (d *Dispatcher) Queued() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.mu.queue)
}

// Runs returns how many runs have executed.
func (d *Dispatcher) Runs() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.runs
}

// Dropped returns how many runs were scheduled after Close and dropped.
func (d *Dispatcher) Dropped() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.dropped
}

// Trace fingerprints the schedule so far: a hash of the queue length and the pick
// at every step. Two executions with the same trace made the same choices from the
// same queues.
func (d *Dispatcher) Trace() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.trace
}

// Err reports a panic that escaped a run (protoactor recovers panics in Receive, so
// this means a bug in a mailbox or in the dispatcher's caller), or nil. The worker
// survives such a panic.
func (d *Dispatcher) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.panicVal == nil {
		return nil
	}
	return fmt.Errorf("harness: a mailbox run panicked: %v", d.mu.panicVal)
}

// Close runs whatever is queued (Pause no longer holds it back), stops the worker
// and waits for it. Call it after the actor system using d has shut down. It is
// idempotent.
func (d *Dispatcher) Close() {
	d.mu.Lock()
	d.mu.closing = true
	d.mu.paused = false
	d.mu.Unlock()
	d.poke()
	<-d.done
}

func (d *Dispatcher) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *Dispatcher) idleLocked() bool { return len(d.mu.queue) == 0 && !d.mu.running }

func (d *Dispatcher) work() {
	defer close(d.done)
	for {
		d.mu.Lock()
		if d.idleLocked() {
			for _, ch := range d.mu.idle {
				close(ch)
			}
			d.mu.idle = nil
		}
		if len(d.mu.queue) == 0 && d.mu.closing {
			d.mu.stopped = true
			d.mu.Unlock()
			return
		}
		if len(d.mu.queue) == 0 || d.mu.paused {
			d.mu.Unlock()
			<-d.wake
			continue
		}
		n := len(d.mu.queue)
		i := d.mu.rng.IntN(n)
		fn := d.mu.queue[i]
		d.mu.queue[i] = d.mu.queue[n-1]
		d.mu.queue[n-1] = nil
		d.mu.queue = d.mu.queue[:n-1]
		d.mu.running = true
		d.mu.runs++
		d.mu.trace = fnv(fnv(d.mu.trace, uint64(n)), uint64(i))
		d.mu.Unlock()
		d.run(fn)
		d.mu.Lock()
		d.mu.running = false
		d.mu.Unlock()
	}
}

func (d *Dispatcher) run(fn func()) {
	defer func() {
		if v := recover(); v != nil {
			d.mu.Lock()
			if d.mu.panicVal == nil {
				d.mu.panicVal = v
			}
			d.mu.Unlock()
		}
	}()
	fn()
}

func fnv(h, v uint64) uint64 {
	for range 8 {
		h ^= v & 0xff
		h *= 1099511628211
		v >>= 8
	}
	return h
}
