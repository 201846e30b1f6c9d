package job

import (
	"runtime"
	"testing"
)

// BenchmarkWatcherWake is one Done job's life in a full shard: Add beside
// shardSize-1 idle watched channels, the producer's send, and its delivery. Each
// op wakes the shard twice (the add, the value) and re-arms its select over every
// channel it watches.
func BenchmarkWatcherWake(b *testing.B) {
	w := newTestWatcher()
	defer w.Close()
	for range shardSize - 1 {
		add(w, make(chan Outcome, 1), func(Outcome, bool) {})
	}
	got := make(chan struct{})
	deliver := func(Outcome, bool) { got <- struct{}{} }
	b.ReportAllocs()
	for b.Loop() {
		ch := make(chan Outcome, 1)
		add(w, ch, deliver)
		ch <- Outcome{Status: Completed}
		<-got
	}
}

// BenchmarkWatcherIdleBytes reports what one idle watched channel costs the
// watcher (B/watch: heap plus goroutine stacks, the channels and the callback
// excluded): 100 shards of shardSize-1 idle channels. Each shard then gets one
// probe channel (its last slot) whose delivery shows the shard has taken in every
// add. One op is one whole measurement on a fresh Watcher.
func BenchmarkWatcherIdleBytes(b *testing.B) {
	const shards = 100
	n := shards * (shardSize - 1)
	var sum float64
	for b.Loop() {
		chans := make([]chan Outcome, n)
		for i := range chans {
			chans[i] = make(chan Outcome, 1)
		}
		probes := make([]chan Outcome, shards)
		for i := range probes {
			probes[i] = make(chan Outcome, 1)
		}
		got := make(chan struct{}, shards)
		idle := func(Outcome, bool) {}
		probe := func(Outcome, bool) { got <- struct{}{} }
		before := memInUse()
		w := newTestWatcher()
		for _, ch := range chans {
			add(w, ch, idle)
		}
		for _, ch := range probes {
			add(w, ch, probe)
			ch <- Outcome{}
		}
		for range shards {
			<-got
		}
		after := memInUse()
		sum += float64(after-before) / float64(n)
		w.Close()
		runtime.KeepAlive(chans)
	}
	b.ReportMetric(sum/float64(b.N), "B/watch")
}

// memInUse is the heap plus goroutine stacks in use after a full collection.
func memInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc + ms.StackInuse)
}
