package job

import (
	"reflect"
	"sync"
)

// shardSize bounds how many Done channels one watcher goroutine selects over: a
// goroutine per live job would cost ~2.5 KiB each; a shard costs that once per
// shardSize jobs, and a select over it stays cheap.
const shardSize = 32

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

// Watch is the handle of one watched channel.
type Watch struct {
	sh *shard
	id uint64
}

type watchEntry struct {
	id      uint64
	ch      reflect.Value
	deliver func(Outcome, bool)
}

type shard struct {
	w      *Watcher
	n      int // entries assigned, guarded by w.mu
	nextID uint64
	ctl    chan shardCtl
}

type shardCtl struct {
	add    *watchEntry
	remove uint64
	stop   bool
}

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
		sh = &shard{w: w, ctl: make(chan shardCtl, 2*shardSize+1)}
		w.mu.shards = append(w.mu.shards, sh)
		w.wg.Add(1)
		go sh.run()
	}
	sh.n++
	sh.nextID++
	e := &watchEntry{id: sh.nextID, ch: reflect.ValueOf(done), deliver: deliver}
	w.mu.Unlock()
	sh.ctl <- shardCtl{add: e}
	return &Watch{sh: sh, id: e.id}
}

// Remove stops watching (for a job settled by another path). Idempotent.
func (wt *Watch) Remove() {
	if wt == nil {
		return
	}
	w := wt.sh.w
	w.mu.Lock()
	closed := w.mu.closed
	w.mu.Unlock()
	if closed {
		return
	}
	// The control channel has room: at most shardSize adds and shardSize removes
	// are ever outstanding for one shard, and a shard that exited reads nothing more.
	wt.sh.ctl <- shardCtl{remove: wt.id}
}

// Close stops every shard and waits for them; later Adds return nil.
func (w *Watcher) Close() {
	w.mu.Lock()
	if !w.mu.closed {
		w.mu.closed = true
		for _, s := range w.mu.shards {
			s.ctl <- shardCtl{stop: true}
		}
	}
	w.mu.Unlock()
	w.wg.Wait()
}

// release accounts for one finished entry; it reports whether the shard should exit.
func (s *shard) release() bool {
	w := s.w
	w.mu.Lock()
	defer w.mu.Unlock()
	s.n--
	if s.n > 0 || w.mu.closed {
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
	entries := make([]*watchEntry, 0, shardSize)
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
			switch {
			case ctl.stop:
				return
			case ctl.add != nil:
				entries = append(entries, ctl.add)
				cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: ctl.add.ch})
			default:
				for i, e := range entries {
					if e.id == ctl.remove {
						if drop(i) {
							return
						}
						break
					}
				}
			}
			continue
		}
		e := entries[chosen-1]
		var o Outcome
		if ok {
			o = v.Interface().(Outcome)
		}
		e.deliver(o, ok)
		if drop(chosen - 1) {
			return
		}
	}
}
