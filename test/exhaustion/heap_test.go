package exhaustion

import (
	"runtime"
	"time"
)

// sampleEvery is how often a heapWatch reads the heap. ReadMemStats stops the
// world, so it is not read more often than this.
const sampleEvery = 50 * time.Millisecond

// liveHeap returns the heap in use by reachable objects: HeapAlloc right after a
// full collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// heapWatch samples HeapAlloc (live objects and garbage not yet collected) in a
// goroutine of its own until Stop, keeping the highest value it saw.
type heapWatch struct {
	stop chan struct{}
	peak chan uint64
}

func watchHeap() *heapWatch {
	w := &heapWatch{stop: make(chan struct{}), peak: make(chan uint64, 1)}
	go w.run()
	return w
}

func (w *heapWatch) run() {
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	var peak uint64
	for {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapAlloc)
		select {
		case <-w.stop:
			w.peak <- peak
			return
		case <-tick.C:
		}
	}
}

// Stop ends the sampling (after one last sample) and returns the high-water.
func (w *heapWatch) Stop() uint64 {
	close(w.stop)
	return <-w.peak
}

// above returns v - base, or 0 if v is below base (a collection between the two).
func above(v, base uint64) uint64 {
	if v < base {
		return 0
	}
	return v - base
}

const kib, mib = 1 << 10, 1 << 20
