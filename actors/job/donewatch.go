package job

import (
	"reflect"
	"sync"
	"sync/atomic"
)

// shardSize bounds how many Done channels one watcher goroutine selects over: a
// goroutine per live job would cost ~2.5 KiB each; a shard costs that once per
// shardSize jobs, and a select over it stays cheap.
const shardSize = 64

// Watcher delivers each job's single Done value to a callback without a goroutine
// per job. It is a leaf helper: its lock guards only its shard list, which no actor
// state depends on. Shards exit when they have nothing to watch; Close stops them all.
type Watcher struct {
	mu struct {
		sync.Mutex
		shards []*shard
		closed bool
	}
	wg sync.WaitGroup
}

// Watch is the handle of one watched channel (24 B: it lives as long as its job;
// the channel itself goes to the shard in the add message).
type Watch struct {
	sh      *shard
	deliver func(Outcome, bool)
	removed atomic.Bool
}

type shard struct {
	w   *Watcher
	n   int // entries assigned, guarded by w.mu
	ctl chan shardCtl
}

// shardCtl is an add (add and done set), a stop (add is stopShard), or a poke
// (the zero value): "look for removed entries". 16 B: a shard's control buffer is
// shardSize+1 of them.
type shardCtl struct {
	add  *Watch
	done <-chan Outcome
}

// stopShard is the add value of a stop message.
var stopShard = new(Watch)

// ctlRoom is a shard's control buffer: at most shardSize adds are outstanding (a
// shard holds at most shardSize watches, counted from Add until released), plus
// Close's stop. Pokes never block (Remove drops one when the buffer is full; the
// shard sweeps after every control message anyway).
const ctlRoom = shardSize + 1

// NewWatcher returns an empty watcher.
func NewWatcher() *Watcher { return &Watcher{} }

// Add watches done and calls deliver once with its value (ok=false if it was closed
// without one). It returns nil if the watcher is closed.
func (w *Watcher) Add(done <-chan Outcome, deliver func(Outcome, bool)) *Watch {
	w.mu.Lock()
	if w.mu.closed {
		w.mu.Unlock()
		return nil
	}
	var sh *shard
	for _, s := range w.mu.shards {
		if s.n < shardSize {
			sh = s
			break
		}
	}
	if sh == nil {
		sh = &shard{w: w, ctl: make(chan shardCtl, ctlRoom)}
		w.mu.shards = append(w.mu.shards, sh)
		w.wg.Add(1)
		go sh.run()
	}
	sh.n++
	e := &Watch{sh: sh, deliver: deliver}
	w.mu.Unlock()
	sh.ctl <- shardCtl{add: e, done: done} // room: see ctlRoom
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
	select {
	case wt.sh.ctl <- shardCtl{}: // poke the shard to drop removed entries
	default: // the shard is busy with other control messages (it sweeps after each) or gone
	}
}

// Close stops every shard and waits for them; later Adds return nil. The stops
// are sent outside the lock: a shard whose control buffer is full may be waiting
// for the lock (release) before it can take another message. Once closed, no shard
// exits on its own, so each one listed gets its stop.
func (w *Watcher) Close() {
	w.mu.Lock()
	var shards []*shard
	if !w.mu.closed {
		w.mu.closed = true
		shards = w.mu.shards
	}
	w.mu.Unlock()
	for _, s := range shards {
		s.ctl <- shardCtl{add: stopShard}
	}
	w.wg.Wait()
}

// release accounts for one finished entry; it reports whether the shard should exit.
func (s *shard) release() bool {
	w := s.w
	w.mu.Lock()
	defer w.mu.Unlock()
	s.n--
	// An empty shard exits, except the first: on a quiet system a new shard per job
	// (goroutine, channel, stack growth) was ~30% of a job lifecycle's allocation.
	if s.n > 0 || w.mu.closed || (len(w.mu.shards) > 0 && w.mu.shards[0] == s) {
		return false
	}
	for i, x := range w.mu.shards {
		if x == s {
			w.mu.shards = append(w.mu.shards[:i], w.mu.shards[i+1:]...)
			break
		}
	}
	return true
}

func (s *shard) run() {
	defer s.w.wg.Done()
	entries := make([]*Watch, 0, shardSize)
	cases := make([]reflect.SelectCase, 1, shardSize+1)
	cases[0] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(s.ctl)}
	drop := func(i int) bool {
		entries = append(entries[:i], entries[i+1:]...)
		cases = append(cases[:i+1], cases[i+2:]...)
		return s.release()
	}
	for {
		chosen, v, ok := reflect.Select(cases)
		if chosen == 0 {
			ctl := v.Interface().(shardCtl)
			if ctl.add == stopShard {
				return
			}
			if ctl.add != nil {
				entries = append(entries, ctl.add)
				cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctl.done)})
			}
		} else {
			e := entries[chosen-1]
			if !e.removed.Load() {
				var o Outcome
				if ok {
					o = v.Interface().(Outcome)
				}
				e.deliver(o, ok)
			}
			if drop(chosen - 1) {
				return
			}
		}
		for i := len(entries) - 1; i >= 0; i-- {
			if entries[i].removed.Load() && drop(i) {
				return
			}
		}
	}
}
