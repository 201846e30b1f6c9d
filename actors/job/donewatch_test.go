package job

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// delivery is one call of a Watch's deliver callback.
type delivery struct {
	i  int
	o  Outcome
	ok bool
}

// recorder collects deliveries; deliver(i) is the callback of watch i.
type recorder struct {
	ch     chan delivery // every delivery, in order
	counts []atomic.Int32
}

func newRecorder(n int) *recorder {
	// Room for every possible extra delivery, so a double delivery is seen, not blocked.
	return &recorder{ch: make(chan delivery, 4*n), counts: make([]atomic.Int32, n)}
}

func (r *recorder) deliver(i int) func(Outcome, bool) {
	return func(o Outcome, ok bool) {
		r.counts[i].Add(1)
		r.ch <- delivery{i: i, o: o, ok: ok}
	}
}

// funcTarget is a test's watch target: its delivery calls f.
type funcTarget struct {
	w Watch
	f func(Outcome, bool)
}

func (t *funcTarget) watched() *Watch            { return &t.w }
func (t *funcTarget) deliver(o Outcome, ok bool) { t.f(o, ok) }

// testWatcher is a watcher of funcTargets.
type testWatcher = watcher[*funcTarget]

func newTestWatcher() *testWatcher { return &testWatcher{} }

// add watches done for a new target delivering to f and returns its Watch, nil if
// the watcher is closed.
func add(w *testWatcher, done <-chan Outcome, f func(Outcome, bool)) *Watch {
	t := &funcTarget{f: f}
	if !w.Add(done, t) {
		return nil
	}
	return &t.w
}

func firstShard(w *testWatcher) *shard[*funcTarget] {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.shards[0]
}

func shardCount(w *testWatcher) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.mu.shards)
}

func TestWatcherDeliversEachValueExactlyOnce(t *testing.T) {
	const n = 3*shardSize + 5 // four shards
	w := newTestWatcher()
	rec := newRecorder(n)
	chans := make([]chan Outcome, n)
	want := make([]delivery, n)
	for i := range n {
		chans[i] = make(chan Outcome, 1)
		switch i % 3 {
		case 0: // a value
			want[i] = delivery{i: i, o: Outcome{Status: Completed, Detail: "exit code: " + strconv.Itoa(i), Output: "out " + strconv.Itoa(i)}, ok: true}
		case 1: // the zero value is still a value
			want[i] = delivery{i: i, o: Outcome{}, ok: true}
		case 2: // closed without a value
			want[i] = delivery{i: i, ok: false}
		}
	}

	// Add from several goroutines at once: Add's shard bookkeeping is shared.
	watches := make([]*Watch, n)
	var adds sync.WaitGroup
	for g := range 4 {
		adds.Go(func() {
			for i := g; i < n; i += 4 {
				watches[i] = add(w, chans[i], rec.deliver(i))
			}
		})
	}
	adds.Wait()
	for i, wt := range watches {
		require.NotNil(t, wt, "watch %d", i)
	}
	require.Equal(t, (n+shardSize-1)/shardSize, shardCount(w), "each shard holds at most shardSize channels")
	select {
	case d := <-rec.ch:
		t.Fatalf("delivered %d before anything was sent", d.i)
	default:
	}

	// Producers finish concurrently, in no particular order.
	var sends sync.WaitGroup
	for g := range 4 {
		sends.Go(func() {
			for i := n - 1 - g; i >= 0; i -= 4 {
				if want[i].ok {
					chans[i] <- want[i].o
				} else {
					close(chans[i])
				}
			}
		})
	}
	sends.Wait()

	got := make([]*delivery, n)
	for range n {
		d := <-rec.ch
		require.Nil(t, got[d.i], "watch %d delivered twice", d.i)
		got[d.i] = &d
	}
	for i := range n {
		require.Equal(t, want[i], *got[i], "watch %d", i)
	}

	// Shards with nothing left to watch exit on their own, except the first, which
	// stays for the next job.
	require.Equal(t, 1, shardCount(w))

	// Close waits for any shard still running; after it nothing more can arrive.
	w.Close()
	goleak.VerifyNone(t)
	require.Empty(t, rec.ch, "an extra delivery")
	for i := range n {
		require.EqualValues(t, 1, rec.counts[i].Load(), "watch %d", i)
	}
}

func TestWatcherShardsAreReusedAfterTheyEmpty(t *testing.T) {
	w := newTestWatcher()
	rec := newRecorder(3 * shardSize)
	// Waves of jobs that settle before the next wave starts: each wave fits one shard.
	for wave := range 3 {
		chans := make([]chan Outcome, shardSize)
		for j := range shardSize {
			chans[j] = make(chan Outcome, 1)
			require.NotNil(t, add(w, chans[j], rec.deliver(wave*shardSize+j)))
		}
		require.Equal(t, 1, shardCount(w), "wave %d", wave)
		for j := range shardSize {
			chans[j] <- Outcome{Status: Failed, Detail: fmt.Sprint(wave, j)}
		}
		for range shardSize {
			d := <-rec.ch
			require.Equal(t, fmt.Sprint(wave, d.i-wave*shardSize), d.o.Detail)
		}
	}
	require.Equal(t, 1, shardCount(w), "the first shard stays, idle")
	w.Close()
	goleak.VerifyNone(t)
}

func TestWatcherRemoveBeforeDeliveryStopsDelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = shardSize + shardSize/2 // two shards
		w := newTestWatcher()
		rec := newRecorder(n)
		chans := make([]chan Outcome, n)
		watches := make([]*Watch, n)
		for i := range n {
			chans[i] = make(chan Outcome, 1)
			watches[i] = add(w, chans[i], rec.deliver(i))
		}
		require.Equal(t, 2, shardCount(w))

		removed := func(i int) bool { return i%3 == 0 }
		for i := range n {
			if removed(i) {
				watches[i].Remove()
				watches[i].Remove() // idempotent
			}
		}
		// Remove is asynchronous: it hands the shard a control message. Once the shards
		// are idle again they have processed it; only then do the producers finish.
		synctest.Wait()
		for i := range n {
			chans[i] <- Outcome{Status: Completed, Detail: strconv.Itoa(i)}
		}
		// Every shard goroutine is now idle: whatever could be delivered has been.
		synctest.Wait()

		for i := range n {
			if removed(i) {
				require.Zero(t, rec.counts[i].Load(), "removed watch %d was delivered", i)
				require.Len(t, chans[i], 1, "removed watch %d: its value must not be consumed", i)
			} else {
				require.EqualValues(t, 1, rec.counts[i].Load(), "watch %d", i)
				require.Empty(t, chans[i])
			}
		}
		require.Equal(t, 1, shardCount(w), "removed and delivered entries both free their shard; the first stays")

		var nilWatch *Watch
		nilWatch.Remove() // a closed watcher's Add returns nil; Remove on it is harmless
		w.Close()
	})
}

func TestWatcherCloseStopsShards(t *testing.T) {
	const n = 2*shardSize + 3 // three shards
	w := newTestWatcher()
	rec := newRecorder(n)
	chans := make([]chan Outcome, n)
	watches := make([]*Watch, n)
	for i := range n {
		chans[i] = make(chan Outcome, 1)
		watches[i] = add(w, chans[i], rec.deliver(i))
	}
	require.Equal(t, 3, shardCount(w))

	w.Close()
	goleak.VerifyNone(t) // Close waited for every shard goroutine

	// Nothing watches the channels any more.
	for i := range n {
		chans[i] <- Outcome{Status: Completed}
	}
	require.Empty(t, rec.ch)
	for i := range n {
		require.Len(t, chans[i], 1)
	}

	// After Close: Add returns nil, Remove and Close return at once.
	require.Nil(t, add(w, make(chan Outcome), rec.deliver(0)))
	for _, wt := range watches {
		wt.Remove()
	}
	w.Close()
	goleak.VerifyNone(t)
	require.Empty(t, rec.ch)
}

// The job actor calls Remove when a job settles by another path (a teardown cancel
// that threw, or the actor stopping). That can happen after the watcher already
// delivered the Done value (the doneMsg is still queued behind it). A shard whose
// entries are all finished exits and never reads its poke channel again: a Remove
// that waited for room there would block, and with it the job actor, forever.
func TestWatcherRemoveAfterDeliveryNeverBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newTestWatcher()
		const n = 2*shardSize + 2
		rec := newRecorder(n + 1)

		// One long-lived job keeps the shard alive while n short jobs come and go on it.
		long := make(chan Outcome, 1)
		add(w, long, rec.deliver(n))
		watches := make([]*Watch, n)
		for i := range n {
			ch := make(chan Outcome, 1)
			watches[i] = add(w, ch, rec.deliver(i))
			ch <- Outcome{Status: Completed}
			require.Equal(t, i, (<-rec.ch).i)
		}
		require.Equal(t, 1, shardCount(w), "every job shared one shard")
		sh := firstShard(w)
		long <- Outcome{Status: Completed}
		require.Equal(t, n, (<-rec.ch).i)
		synctest.Wait() // the shard has exited

		// Each watch is removed once, after its delivery, as the job actor may do.
		done := make(chan struct{})
		go func() {
			defer close(done)
			for _, wt := range watches {
				wt.Remove()
			}
		}()
		synctest.Wait()
		blocked := true
		select {
		case <-done:
			blocked = false
		default:
		}
		// Unblock the remover so the bubble can end, then report.
		for blocked {
			select {
			case <-sh.poke:
			case <-done:
				blocked = false
				require.Fail(t, "Remove blocked on an exited shard's control channel")
			}
		}
		w.Close()
	})
}

// A Remove that comes after its watch was delivered (the job actor settling by
// another path while the doneMsg is still queued) must not touch the watch that
// has taken the freed slot since: each Add's handle is its own.
func TestWatcherStaleRemoveLeavesTheSlotsNextWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newTestWatcher()
		rec := newRecorder(2)
		first := make(chan Outcome, 1)
		old := add(w, first, rec.deliver(0))
		first <- Outcome{Status: Completed}
		require.Equal(t, 0, (<-rec.ch).i)
		synctest.Wait() // the shard has freed the slot

		next := make(chan Outcome, 1)
		sh := firstShard(w)
		nw := add(w, next, rec.deliver(1))
		require.Equal(t, 1, shardCount(w), "one shard")
		require.Same(t, &sh.poke, nw.poke.Load(), "the next watch took the freed slot's shard")
		old.Remove() // stale: its value was delivered
		synctest.Wait()
		next <- Outcome{Status: Killed}
		d := <-rec.ch
		require.Equal(t, delivery{i: 1, o: Outcome{Status: Killed}, ok: true}, d)
		w.Close()
		require.EqualValues(t, 1, rec.counts[0].Load())
		require.EqualValues(t, 1, rec.counts[1].Load())
	})
}
