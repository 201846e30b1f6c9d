package bench

import (
	"errors"
	"strconv"
	"sync"

	"github.com/troupe-rt/troupe/actors/job"
)

// mutexRegistry is the smallest registry with the semantics the lifecycle
// benchmarks exercise: per-kind ids, a per-owner admission count, first-wins
// settlement from the producer's Done channel, and done listeners called after
// the record is committed. It is the "how much does the actor model cost us"
// baseline: one mutex instead of a registry actor, a goroutine per job instead
// of a job actor and the sharded watcher.
type mutexRegistry struct {
	limit int

	mu        sync.Mutex
	counters  map[string]uint64
	buckets   map[string]int // owner ("" = unowned) → live jobs
	records   map[string]*mutexRecord
	listeners []func(id string, status job.Status, owner string)
	wg        sync.WaitGroup
}

type mutexRecord struct {
	id, kind, label, owner string
	status                 job.Status
	detail, output         string
	live                   bool
}

var errCapacity = errors.New("background job limit reached for this owner")

func newMutexRegistry(limit int) *mutexRegistry {
	return &mutexRegistry{
		limit:    limit,
		counters: map[string]uint64{},
		buckets:  map[string]int{},
		records:  map[string]*mutexRecord{},
	}
}

func (r *mutexRegistry) OnJobDone(fn func(id string, status job.Status, owner string)) {
	r.mu.Lock()
	r.listeners = append(r.listeners, fn)
	r.mu.Unlock()
}

// Start admits, runs the producer, allocates the id and registers the record, then
// watches Done with a goroutine of its own.
func (r *mutexRegistry) Start(kind, label, owner string, run func() (job.Hooks, error)) (string, error) {
	r.mu.Lock()
	if r.buckets[owner] >= r.limit {
		r.mu.Unlock()
		return "", errCapacity
	}
	hooks, err := run()
	if err != nil {
		r.mu.Unlock()
		return "", err
	}
	n := r.counters[kind] + 1
	r.counters[kind] = n
	id := kind + "-" + strconv.FormatUint(n, 10)
	r.buckets[owner]++
	r.records[id] = &mutexRecord{id: id, kind: kind, label: label, owner: owner, status: job.Running, live: true}
	r.mu.Unlock()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		o, ok := <-hooks.Done
		if !ok {
			o = job.Outcome{Status: job.Failed, Detail: "Error: producer done channel closed without an outcome"}
		}
		r.settle(id, o)
	}()
	return id, nil
}

// settle commits the first outcome, frees the slot, then calls the listeners
// outside the lock.
func (r *mutexRegistry) settle(id string, o job.Outcome) {
	r.mu.Lock()
	rec := r.records[id]
	if rec == nil || !rec.live {
		r.mu.Unlock()
		return
	}
	rec.live = false
	rec.status, rec.detail, rec.output = o.Status, o.Detail, o.Output
	if n := r.buckets[rec.owner]; n > 1 {
		r.buckets[rec.owner] = n - 1
	} else {
		delete(r.buckets, rec.owner)
	}
	ls := r.listeners
	r.mu.Unlock()
	for _, fn := range ls {
		fn(rec.id, rec.status, rec.owner)
	}
}

// Close waits for every watching goroutine (all jobs must have settled).
func (r *mutexRegistry) Close() { r.wg.Wait() }
