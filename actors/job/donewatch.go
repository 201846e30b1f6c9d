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

// Watcher delivers each job's single Done value to a callback without a goroutine
// per job. It is a leaf helper: its lock guards only its shards' slot tables, which
// no actor state depends on. Shards exit when they have nothing to watch (except the
// first); Close stops them all.
//
// A watched channel costs one slot (a channel and a *Watch, 16 B of its shard) and
// its share of the shard's goroutine, whose stack is mostly the compiled select's
// frame. The select is a Go select statement with shardSize receive arms (a nil
// channel is an arm that never fires), not reflect.Select: reflect.Select allocated
// a SelectCase, a runtime case, a sort-order entry and a receive buffer per watched
// channel on every wake, all held while the shard waits (~160 B per live job). The
// runtime's own cost of a blocked receive (one sudog per watched channel) remains.
type Watcher struct {
	mu struct {
		sync.Mutex
		shards []*shard
		closed bool
	}
	wg sync.WaitGroup
}

// Watch is the handle of one watched channel (24 B: it lives as long as its job;
// the channel itself is in its shard's slot).
type Watch struct {
	sh      *shard
	deliver func(Outcome, bool)
	removed atomic.Bool
}

// shard is one goroutine selecting over up to shardSize Done channels. Its slot
// table is guarded by the watcher's lock: Add fills a free slot and pokes the
// shard; the shard alone frees slots (a delivered or removed watch), and copies the
// channels to its own stack before each select.
type shard struct {
	w    *Watcher
	poke chan struct{} // buffer 1: "look at the slots again" (an add, a remove, Close)
	used uint64        // bit i set: slot i holds a watch
	done [shardSize]<-chan Outcome
	wt   [shardSize]*Watch
}

// NewWatcher returns an empty watcher.
func NewWatcher() *Watcher { return &Watcher{} }

// Add watches done and calls deliver once with its value (ok=false if it was closed
// without one). It returns nil if the watcher is closed. It never blocks on a shard.
func (w *Watcher) Add(done <-chan Outcome, deliver func(Outcome, bool)) *Watch {
	w.mu.Lock()
	if w.mu.closed {
		w.mu.Unlock()
		return nil
	}
	var sh *shard
	for _, s := range w.mu.shards {
		if ^s.used != 0 {
			sh = s
			break
		}
	}
	if sh == nil {
		sh = &shard{w: w, poke: make(chan struct{}, 1)}
		w.mu.shards = append(w.mu.shards, sh)
		w.wg.Add(1)
		go sh.run()
	}
	i := bits.TrailingZeros64(^sh.used)
	e := &Watch{sh: sh, deliver: deliver}
	sh.used |= 1 << i
	sh.done[i], sh.wt[i] = done, e
	w.mu.Unlock()
	sh.wake()
	return e
}

// Callback returns the watch of a producer that settles through Hooks.OnSettle:
// no shard, no goroutine and no select; the producer's settle call (Settle) runs
// deliver on the producer's goroutine. Remove works as for a channel's watch.
func Callback(deliver func(Outcome, bool)) *Watch { return &Watch{deliver: deliver} }

// Settle is the settle function a callback watch hands the producer: the first
// call delivers o unless the watch was removed; later calls do nothing.
func (wt *Watch) Settle(o Outcome) {
	if wt.removed.Swap(true) {
		return
	}
	wt.deliver(o, true)
}

// Remove stops watching (for a job settled by another path). It never blocks and
// is idempotent; a value already on its way may still be delivered (settlement is
// first-wins, so that is harmless).
func (wt *Watch) Remove() {
	if wt == nil || wt.removed.Swap(true) || wt.sh == nil {
		return
	}
	wt.sh.wake() // the shard frees removed slots each time it looks
}

// Close stops every shard and waits for them; later Adds return nil. A shard that
// sees the watcher closed exits at once, delivering at most the value it had just
// received.
func (w *Watcher) Close() {
	w.mu.Lock()
	var shards []*shard
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
func (s *shard) wake() {
	select {
	case s.poke <- struct{}{}:
	default:
	}
}

func (s *shard) run() {
	defer s.w.wg.Done()
	var chans [shardSize]<-chan Outcome // the select's channels: a copy of s.done
	fired := -1
	var o Outcome
	var ok bool
	for {
		e, exit := s.look(fired, &chans)
		if e != nil && !e.removed.Load() {
			e.deliver(o, ok)
		}
		if exit {
			return
		}
		fired, o, ok = s.wait(&chans)
	}
}

// look runs under the watcher's lock between two selects: it frees slot fired (if
// >= 0: its channel delivered) and the slot of every removed watch, copies the
// channels left into chans, and returns the fired slot's watch and whether the shard
// exits (the watcher is closed, or it has nothing left to watch and is not the
// first shard: on a quiet system a new shard per job, with goroutine, channel and
// stack growth, was ~30% of a job lifecycle's allocation).
func (s *shard) look(fired int, chans *[shardSize]<-chan Outcome) (e *Watch, exit bool) {
	w := s.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if fired >= 0 {
		e = s.wt[fired]
		s.free(fired)
	}
	for u := s.used; u != 0; u &= u - 1 {
		if i := bits.TrailingZeros64(u); s.wt[i].removed.Load() {
			s.free(i)
		}
	}
	if w.mu.closed {
		return e, true
	}
	if s.used == 0 && w.mu.shards[0] != s {
		for i, x := range w.mu.shards {
			if x == s {
				w.mu.shards = append(w.mu.shards[:i], w.mu.shards[i+1:]...)
				break
			}
		}
		return e, true
	}
	*chans = s.done
	return e, false
}

// free empties slot i (under the watcher's lock).
func (s *shard) free(i int) {
	s.used &^= 1 << i
	s.done[i], s.wt[i] = nil, nil
}
