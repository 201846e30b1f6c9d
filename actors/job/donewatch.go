package job

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// shardSize bounds how many Done channels one watcher goroutine selects over: a
// goroutine per live job would cost ~2.5 KiB each; a shard costs its goroutine once
// per shardSize jobs, and a select over it stays cheap. It is the arm count of the
// generated select (donewatch_select.go, written by TestWatcherSelectIsGenerated),
// and a shard's slots are the bits of one uint64.
const shardSize = 64

// watcher delivers each job's single Done value to its target without a goroutine
// per job. It is a leaf helper: its lock guards only its shards' slot tables, which
// no actor state depends on. Shards exit when they have nothing to watch (except the
// first); Close stops them all. Watcher, the job actors' watcher, is watcher[*jobActor];
// its tests watch their own targets.
//
// A watched channel costs one slot (a channel and a T, 16 B of its shard), its
// target's Watch (8 B, a field of the target) and its share of the shard's
// goroutine, whose stack is mostly the compiled select's frame. The select is a Go
// select statement with shardSize receive arms (a nil channel is an arm that never
// fires), not reflect.Select: reflect.Select allocated a SelectCase, a runtime case,
// a sort-order entry and a receive buffer per watched channel on every wake, all
// held while the shard waits (~160 B per live job). The runtime's own cost of a
// blocked receive (one sudog per watched channel) remains.
type watcher[T target] struct {
	mu struct {
		sync.Mutex
		shards []*shard[T]
		closed bool
	}
	wg sync.WaitGroup
}

// Watcher is the job actors' Done watcher (one per System).
type Watcher = watcher[*jobActor]

// target is what a watched channel's value, or a settle callback's outcome, goes
// to: its Watch (a field of the target, so that a watch allocates nothing) and its
// delivery. A job actor's watch and delivery were a 24-B Watch and a 24-B closure
// per live job.
type target interface {
	watched() *Watch
	deliver(o Outcome, ok bool)
}

// Watch is the state of one target's single delivery: not watched yet (nil), watched
// by a shard (its poke channel, so that Remove can wake it), or finished (the
// address of finishedPoke: delivered, settled through the callback, or removed).
// Its zero value is ready: a producer settling through OnSettle needs no shard.
type Watch struct {
	poke atomic.Pointer[chan struct{}]
}

// finishedPoke's address marks a finished Watch; capturePoke's, a job actor's
// watch while its producer's non-blocking Cancel runs on it (jobActor.startCancel):
// an outcome settled meanwhile is captured, not sent.
var finishedPoke, capturePoke chan struct{}

// claim finishes the watch and reports whether this call did (first wins between
// the delivery, the callback's settle calls and Remove).
func (wt *Watch) claim() bool {
	_, ok := wt.claimFrom()
	return ok
}

// claimFrom is claim, also returning the state it finished the watch from.
func (wt *Watch) claimFrom() (prev *chan struct{}, ok bool) {
	for {
		p := wt.poke.Load()
		if p == &finishedPoke {
			return nil, false
		}
		if wt.poke.CompareAndSwap(p, &finishedPoke) {
			return p, true
		}
	}
}

// finished reports whether the watch has finished.
func (wt *Watch) finished() bool { return wt.poke.Load() == &finishedPoke }

// shard is one goroutine selecting over up to shardSize Done channels. Its slot
// table is guarded by the watcher's lock: Add fills a free slot and pokes the
// shard; the shard alone frees slots (a delivered or finished watch), and copies the
// channels to its own stack before each select.
type shard[T target] struct {
	w    *watcher[T]
	poke chan struct{} // buffer 1: "look at the slots again" (an add, a remove, Close)
	used uint64        // bit i set: slot i holds a watch
	done [shardSize]<-chan Outcome
	wt   [shardSize]T
}

// NewWatcher returns an empty watcher.
func NewWatcher() *Watcher { return &Watcher{} }

// Add watches done and delivers its value to t once (ok=false if it was closed
// without one), unless t's Watch finishes first (Remove). It reports false, and
// watches nothing, if the watcher is closed. It never blocks on a shard. t's Watch
// must not have been added before.
func (w *watcher[T]) Add(done <-chan Outcome, t T) bool {
	w.mu.Lock()
	if w.mu.closed {
		w.mu.Unlock()
		return false
	}
	var sh *shard[T]
	for _, s := range w.mu.shards {
		if ^s.used != 0 {
			sh = s
			break
		}
	}
	if sh == nil {
		sh = &shard[T]{w: w, poke: make(chan struct{}, 1)}
		w.mu.shards = append(w.mu.shards, sh)
		w.wg.Add(1)
		go sh.run()
	}
	if !t.watched().poke.CompareAndSwap(nil, &sh.poke) {
		w.mu.Unlock()
		sh.wake()   // a new shard with nothing to watch exits (unless it is the first)
		return true // finished before it was watched: nothing to deliver
	}
	i := bits.TrailingZeros64(^sh.used)
	sh.used |= 1 << i
	sh.done[i], sh.wt[i] = done, t
	w.mu.Unlock()
	sh.wake()
	return true
}

// settleOnce is the settle function of a target whose producer settles through
// Hooks.OnSettle: the first call delivers o unless the watch was removed; later
// calls do nothing. It runs the delivery on the caller's goroutine (no shard, no
// goroutine, no select).
func settleOnce[T target](t T, o Outcome) {
	if t.watched().claim() {
		t.deliver(o, true)
	}
}

// Remove stops watching (for a job settled by another path). It never blocks and
// is idempotent; a value already on its way may still be delivered by the shard
// that claimed it first (settlement is first-wins, so that is harmless).
func (wt *Watch) Remove() {
	if wt == nil {
		return
	}
	for {
		p := wt.poke.Load()
		if p == &finishedPoke {
			return
		}
		if wt.poke.CompareAndSwap(p, &finishedPoke) {
			if p != nil {
				wake(*p) // the shard frees finished slots each time it looks
			}
			return
		}
	}
}

// Close stops every shard and waits for them; later Adds return nil. A shard that
// sees the watcher closed exits at once, delivering at most the value it had just
// received.
func (w *watcher[T]) Close() {
	w.mu.Lock()
	var shards []*shard[T]
	if !w.mu.closed {
		w.mu.closed = true
		shards = w.mu.shards
	}
	w.mu.Unlock()
	for _, s := range shards {
		s.wake()
	}
	w.wg.Wait()
}

// wake pokes the shard without blocking: if a poke is already pending, the shard
// has yet to look at its slots, and will see whatever led to this one.
func (s *shard[T]) wake() { wake(s.poke) }

// wake pokes a shard's poke channel without blocking.
func wake(poke chan struct{}) {
	select {
	case poke <- struct{}{}:
	default:
	}
}

func (s *shard[T]) run() {
	defer s.w.wg.Done()
	var chans [shardSize]<-chan Outcome // the select's channels: a copy of s.done
	fired := -1
	var o Outcome
	var ok bool
	for {
		e, got, exit := s.look(fired, &chans)
		if got && e.watched().claim() {
			e.deliver(o, ok)
		}
		if exit {
			return
		}
		fired, o, ok = s.wait(&chans)
	}
}

// look runs under the watcher's lock between two selects: it frees slot fired (if
// >= 0: its channel delivered) and the slot of every finished watch, copies the
// channels left into chans, and returns the fired slot's target (got: there is one)
// and whether the shard
// exits (the watcher is closed, or it has nothing left to watch and is not the
// first shard: on a quiet system a new shard per job, with goroutine, channel and
// stack growth, was ~30% of a job lifecycle's allocation).
func (s *shard[T]) look(fired int, chans *[shardSize]<-chan Outcome) (e T, got, exit bool) {
	w := s.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if fired >= 0 {
		e, got = s.wt[fired], true
		s.free(fired)
	}
	for u := s.used; u != 0; u &= u - 1 {
		if i := bits.TrailingZeros64(u); s.wt[i].watched().finished() {
			s.free(i)
		}
	}
	if w.mu.closed {
		return e, got, true
	}
	if s.used == 0 && w.mu.shards[0] != s {
		for i, x := range w.mu.shards {
			if x == s {
				w.mu.shards = append(w.mu.shards[:i], w.mu.shards[i+1:]...)
				break
			}
		}
		return e, got, true
	}
	*chans = s.done
	return e, got, false
}

// free empties slot i (under the watcher's lock).
func (s *shard[T]) free(i int) {
	var zero T
	s.used &^= 1 << i
	s.done[i], s.wt[i] = nil, zero
}
