package bench

// Scale curves: the cost per job at 1k…1M jobs against the mutex registry at the
// same size, the memory per idle resident Activation at 1k…20k against the same
// count of trivial protoactor actors, and up to 1M sessions persisted in bbolt
// through the Store API against raw bbolt puts of the same bytes. They hold up to
// half a GB of heap, write up to 4 GB of file and run for minutes, so they run only
// when TROUPE_BENCH_SCALE is set (SCALE=1 test/bench/run.sh); one op is one whole
// run at one size, so run them with -benchtime 1x (any b.N works: every figure is
// divided by b.N).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/troupetest"
)

// scaleEnv enables the scale benchmarks; without it they skip.
const scaleEnv = "TROUPE_BENCH_SCALE"

// requireScale skips b unless scaleEnv is set.
func requireScale(b *testing.B) {
	b.Helper()
	if os.Getenv(scaleEnv) == "" {
		b.Skip("scale benchmark (minutes, GBs): set " + scaleEnv + "=1, or run SCALE=1 test/bench/run.sh")
	}
}

// sizeLabel names a size as the sub-benchmark names it: 1k, 10k, 100k, 1M.
func sizeLabel(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "M"
	case n >= 1_000 && n%1_000 == 0:
		return strconv.Itoa(n/1_000) + "k"
	default:
		return strconv.Itoa(n)
	}
}

// memCounters returns the bytes and objects allocated so far by the whole process.
func memCounters() (bytes, objects uint64) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc, ms.Mallocs
}

// cpuTime returns the CPU time (user plus system) the process has used so far:
// unlike the wall time, it barely moves when other processes load the machine.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// --- cost per job ---

// scaleJobSizes are the sizes of the job curve.
var scaleJobSizes = []int{1_000, 10_000, 100_000, 1_000_000}

// scaleOwners is how many sessions the jobs of the curve are spread over (round
// robin, at most fillWindow in flight in all).
const scaleOwners = 100

// BenchmarkScaleJobs: one op starts N owned jobs whose producers settle at once,
// spread round robin over 100 registered owners with at most 8 in flight (below
// the admission limit), and returns once every one has settled and the runtime is
// quiet (troupe: every job actor stopped; mutex: every watching goroutine
// returned). impl=troupe is the runtime, impl=mutex the mutex registry of
// mutexreg_test.go doing the same at the same size. Untimed setup, before the
// baselines: a fresh registry, the owners and one warm-up job each (so per-owner
// state is not counted) and, for troupe, protoactor's process registry warmed up
// (warmProcessRegistry). The jobs are started in two halves; between them, with
// the timer stopped, the live heap is read. Reports ns/job (wall time), cpu-ns/job
// (the process's CPU time, GC included: what a loaded machine disturbs least),
// B/job and allocs/job (allocated by the whole process during both halves) and
// retained-B/job: the live heap plus stacks (after GC) that the second half added,
// per job of that half — the settled records. The first half absorbs one-off
// growth that is not per job (goroutine descriptors the runtime never frees, the
// previous benchmark's stragglers), which at 1k would otherwise be the larger part
// of the delta; at 1k the figure is still ± 200 B (heap readings vary by ≈ 100 KB).
func BenchmarkScaleJobs(b *testing.B) {
	requireScale(b)
	for _, n := range scaleJobSizes {
		b.Run("jobs="+sizeLabel(n), func(b *testing.B) {
			b.Run("impl=troupe", func(b *testing.B) { measureJobs(b, n, troupeJobs) })
			b.Run("impl=mutex", func(b *testing.B) { measureJobs(b, n, mutexJobs) })
		})
	}
}

// measureJobs runs the job curve's op b.N times. setup builds a fresh registry
// (untimed) and returns fill, which starts n jobs and returns once all settled and
// the registry is quiet, and teardown.
func measureJobs(b *testing.B, n int, setup func(*testing.B) (fill func(n int), teardown func())) {
	var elapsed, cpu time.Duration
	var allocBytes, allocObjects, retained float64
	half := n / 2
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		fill, teardown := setup(b)
		bytes0, objects0 := memCounters()
		b.StartTimer()
		start, cpu0 := time.Now(), cpuTime(b)
		fill(half)
		elapsed, cpu = elapsed+time.Since(start), cpu+cpuTime(b)-cpu0
		b.StopTimer()
		mid := heapInUse()
		b.StartTimer()
		start, cpu0 = time.Now(), cpuTime(b)
		fill(n - half)
		elapsed, cpu = elapsed+time.Since(start), cpu+cpuTime(b)-cpu0
		b.StopTimer()
		bytes1, objects1 := memCounters()
		after := heapInUse()
		teardown()
		allocBytes += float64(bytes1 - bytes0)
		allocObjects += float64(objects1 - objects0)
		retained += float64(after-mid) / float64(n-half)
		b.StartTimer()
	}
	jobs := float64(b.N) * float64(n)
	b.ReportMetric(float64(elapsed.Nanoseconds())/jobs, "ns/job")
	b.ReportMetric(float64(cpu.Nanoseconds())/jobs, "cpu-ns/job")
	b.ReportMetric(allocBytes/jobs, "B/job")
	b.ReportMetric(allocObjects/jobs, "allocs/job")
	b.ReportMetric(retained/float64(b.N), "retained-B/job")
}

// troupeJobs is measureJobs' setup for the runtime: a served System with
// scaleOwners registered agents.
func troupeJobs(b *testing.B) (fill func(int), teardown func()) {
	r := newRig(b)
	owners := r.agents(b, "scale", scaleOwners)
	base := processes(r.sys)
	r.fill(b, owners, scaleOwners) // warm-up: one settled record per owner
	r.quiesce(b, base)
	warmProcessRegistry(b, r.sys)
	r.quiesce(b, base)
	fill = func(n int) {
		r.fill(b, owners, n)
		r.quiesce(b, base)
	}
	teardown = func() {
		runtime.KeepAlive(owners)
		shutdown(b, r.sys)
	}
	return fill, teardown
}

// mutexJobs is measureJobs' setup for the baseline: the mutex registry with the
// same owners (plain session strings), admission limit and window.
func mutexJobs(b *testing.B) (fill func(int), teardown func()) {
	reg := newMutexRegistry(troupe.DefaultMaxConcurrentJobsPerOwner)
	done := make(chan struct{}, fillWindow) // at most fillWindow outstanding: never blocks
	reg.OnJobDone(func(string, job.Status, string) { done <- struct{}{} })
	owners := make([]string, scaleOwners)
	for i := range owners {
		owners[i] = "scale-" + strconv.Itoa(i)
	}
	fill = func(n int) {
		inflight := 0
		for i := 0; i < n; i++ {
			if _, err := reg.Start(kind, "history", owners[i%len(owners)], settledAtOnce); err != nil {
				b.Fatalf("mutex job %d: %v", i, err)
			}
			if inflight++; inflight == fillWindow {
				<-done
				inflight--
			}
		}
		for ; inflight > 0; inflight-- {
			<-done
		}
		reg.Close() // every watching goroutine has returned: quiet
	}
	fill(scaleOwners) // warm-up: one settled record per owner
	return fill, func() { runtime.KeepAlive(reg) }
}

// --- memory per idle resident Activation ---

// scaleActivationSizes are the sizes of the activation curve. Building and
// draining N Activations is linear in N since the directory and the registry index
// their entries (it was quadratic before: 80 s at 20k).
var scaleActivationSizes = []int{1_000, 10_000, 20_000, 100_000}

// BenchmarkScaleActivations: impl=troupe is BenchmarkMemoryIdleActivation's
// measurement (idleActivationMemory) at N idle resident Activations; impl=actor,
// the baseline, is the same count of trivial protoactor actors (spawned on a
// troupe System's actor system after the same process-registry warm-up, each
// answering one request before the reading, so all are started and idle). Both
// report B/activation (heap plus stacks per Activation, or per trivial actor) and
// goroutines/activation.
func BenchmarkScaleActivations(b *testing.B) {
	requireScale(b)
	for _, n := range scaleActivationSizes {
		b.Run("activations="+sizeLabel(n), func(b *testing.B) {
			b.Run("impl=troupe", func(b *testing.B) { measureActivations(b, n, idleActivationMemory) })
			b.Run("impl=actor", func(b *testing.B) { measureActivations(b, n, trivialActorMemory) })
		})
	}
}

// measureActivations runs measure b.N times and reports the mean of its figures.
func measureActivations(b *testing.B, n int, measure func(*testing.B, int) (bytesPer, goroutinesPer float64)) {
	var per, gor float64
	for i := 0; i < b.N; i++ {
		p, g := measure(b, n)
		per += p
		gor += g
	}
	b.ReportMetric(per/float64(b.N), "B/activation")
	b.ReportMetric(gor/float64(b.N), "goroutines/activation")
}

// actorBatch bounds the stop futures trivialActorMemory has outstanding at once.
const actorBatch = 1024

// trivialActorMemory is the activation curve's baseline: n idle trivial actors.
func trivialActorMemory(b *testing.B, n int) (bytesPer, goroutinesPer float64) {
	b.Helper()
	sys, _ := troupetest.NewSystem(b)
	warmProcessRegistry(b, sys)
	root := sys.Actors().Root
	props := actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*ping); ok {
			c.Respond(m)
		}
	})
	pids := make([]*actor.PID, n)
	g0 := runtime.NumGoroutine()
	before := heapInUse()
	for i := range pids {
		pids[i] = root.Spawn(props)
	}
	msg := &ping{}
	for _, pid := range pids {
		_, err := root.RequestFuture(pid, msg, settleBudget).Result()
		require.NoError(b, err)
	}
	after := heapInUse()
	goroutinesPer = float64(runtime.NumGoroutine()-g0) / float64(n)
	for len(pids) > 0 {
		batch := pids[:min(actorBatch, len(pids))]
		futures := make([]*actor.Future, len(batch))
		for i, pid := range batch {
			futures[i] = root.StopFuture(pid)
		}
		for _, f := range futures {
			require.NoError(b, f.Wait())
		}
		pids = pids[len(batch):]
	}
	return float64(after-before) / float64(n), goroutinesPer
}

// --- sessions persisted in bbolt ---

// scaleSessionSizes are the sizes of the session curves: with bbolt's syncs off
// while creating, and with every commit synced (the Store's contract). Concurrent
// Store.Creates share synced commits (bolt.Batch), so the synced curve reaches 1M.
// impl=raw commits each session on its own (0.66–0.85 ms per synced commit on a
// quiet machine, 5–8 ms loaded): synced, it stops at rawSyncedMax.
var scaleSessionSizes = map[bool][]int{
	false: {1_000, 10_000, 100_000, 1_000_000},
	true:  {1_000, 10_000, 100_000, 1_000_000},
}

// rawSyncedMax is the largest synced size impl=raw runs at (1M would take hours).
const rawSyncedMax = 10_000

// sessionCreators is how many goroutines create sessions concurrently.
const sessionCreators = 64

// BenchmarkScaleSessions: one op creates N sessions in a fresh bbolt file, with 64
// concurrent creators, then closes the file, reopens it and loads one session (the
// middle one), and lists every id. impl=store goes through session.OpenBolt and the
// Store API (Create of a header and a descriptor entry, as Manager.Start writes
// it; Load; IDs). The baselines write the same bytes (the JSON the Store writes) to
// raw bbolt, a flat bucket of headers and one of log entries: impl=raw commits
// each session on its own (bolt.Update), impl=raw-batch lets concurrent creators
// share commits (bolt.Batch, the same 1 ms window the Store uses for its writes
// that have company). sync=off turns bbolt's syncs off while creating
// only (as the other benchmarks build their sessions); sync=on keeps them, so every
// commit is a synced write. Reports ns/session (creation), file-B/session (the
// file's size after closing), ns/open+load (open the file, load one session: the
// OS page cache is warm, the process's mmap is not) and ns/ids (the full id
// scan). Session ids are "sess-0000000"…, handed out in order, so keys arrive
// nearly sorted.
func BenchmarkScaleSessions(b *testing.B) {
	requireScale(b)
	for _, synced := range []bool{false, true} {
		for _, n := range scaleSessionSizes[synced] {
			name := fmt.Sprintf("sync=%s/sessions=%s", onOff(synced), sizeLabel(n))
			b.Run(name, func(b *testing.B) {
				b.Run("impl=store", func(b *testing.B) { measureSessions(b, n, synced, openStoreFile) })
				if !synced || n <= rawSyncedMax {
					b.Run("impl=raw", func(b *testing.B) { measureSessions(b, n, synced, rawOpener(false)) })
				}
				b.Run("impl=raw-batch", func(b *testing.B) { measureSessions(b, n, synced, rawOpener(true)) })
			})
		}
	}
}

func onOff(v bool) string {
	if v {
		return "on"
	}
	return "off"
}

// sessionFile is a bbolt file of sessions as BenchmarkScaleSessions measures it:
// through the Store (storeFile) or raw (rawFile).
type sessionFile interface {
	// create writes session i.
	create(ctx context.Context, i int) error
	// load reads session i back and checks it.
	load(ctx context.Context, i int) error
	// ids lists every session id.
	ids(ctx context.Context) ([]string, error)
	// db is the bbolt handle (for NoSync).
	db() *bolt.DB
	Close() error
}

func sessionID(i int) string { return fmt.Sprintf("sess-%07d", i) }

// sessionCreatedAt is the creation time every benchmark session carries.
const sessionCreatedAt = 1_764_460_800_000

func sessionHeader(i int) session.Header {
	return session.Header{ID: sessionID(i), ParentSession: "P", Origin: "subagent", DelegationDepth: 1,
		CreatedAt: sessionCreatedAt}
}

// sessionDescriptor is the descriptor entry's payload, as Manager.Start writes it.
var sessionDescriptor = func() json.RawMessage {
	d, err := json.Marshal(activation.Descriptor{Version: activation.DescriptorVersion, Mode: "continuable",
		Provider: "spawn", Label: "bench"})
	if err != nil {
		panic(err)
	}
	return d
}()

// measureSessions runs the session curve's op b.N times on files opened by open.
func measureSessions(b *testing.B, n int, synced bool, open func(path string) (sessionFile, error)) {
	ctx := context.Background()
	var create, reopen, scan time.Duration
	var fileBytes float64
	for i := 0; i < b.N; i++ {
		path := filepath.Join(b.TempDir(), "sessions.db")
		f, err := open(path)
		require.NoError(b, err)
		f.db().NoSync = !synced
		start := time.Now()
		createSessions(b, f, n)
		create += time.Since(start)
		if !synced { // flush the build now, or the reopen's first commit would pay for it
			f.db().NoSync = false
			require.NoError(b, f.db().Sync())
		}
		require.NoError(b, f.Close())
		st, err := os.Stat(path)
		require.NoError(b, err)
		fileBytes += float64(st.Size())

		start = time.Now()
		f, err = open(path)
		require.NoError(b, err)
		require.NoError(b, f.load(ctx, n/2))
		reopen += time.Since(start)

		start = time.Now()
		ids, err := f.ids(ctx)
		scan += time.Since(start)
		require.NoError(b, err)
		require.Len(b, ids, n)
		require.NoError(b, f.Close())
		require.NoError(b, os.Remove(path)) // up to a GB: do not keep one per op
	}
	ops := float64(b.N)
	b.ReportMetric(float64(create.Nanoseconds())/ops/float64(n), "ns/session")
	b.ReportMetric(fileBytes/ops/float64(n), "file-B/session")
	b.ReportMetric(float64(reopen.Nanoseconds())/ops, "ns/open+load")
	b.ReportMetric(float64(scan.Nanoseconds())/ops, "ns/ids")
}

// createSessions creates sessions 0…n-1 in f with sessionCreators goroutines,
// each taking the next index in turn.
func createSessions(b *testing.B, f sessionFile, n int) {
	b.Helper()
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, sessionCreators)
	for range sessionCreators {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := f.create(ctx, i); err != nil {
					errs <- fmt.Errorf("session %d: %w", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// storeFile is the Store under measurement.
type storeFile struct{ s *session.Bolt }

func openStoreFile(path string) (sessionFile, error) {
	s, err := session.OpenBolt(path)
	if err != nil {
		return nil, err
	}
	return storeFile{s}, nil
}

func (f storeFile) create(ctx context.Context, i int) error {
	return f.s.Create(ctx, sessionHeader(i),
		[]session.Entry{{Kind: session.EntryDescriptor, Descriptor: sessionDescriptor}})
}

func (f storeFile) load(ctx context.Context, i int) error {
	snap, err := f.s.Load(ctx, sessionID(i))
	if err != nil {
		return err
	}
	if snap.Header.ID != sessionID(i) || len(snap.Log) != 1 {
		return fmt.Errorf("loaded %q with %d entries, want %q with 1", snap.Header.ID, len(snap.Log), sessionID(i))
	}
	return nil
}

func (f storeFile) ids(ctx context.Context) ([]string, error) { return f.s.IDs(ctx) }
func (f storeFile) db() *bolt.DB                              { return f.s.DB() }
func (f storeFile) Close() error                              { return f.s.Close() }

// rawFile is the baseline: the same bytes as the Store writes, in two flat
// buckets keyed by session id (headers; log entries under id + "/" + seq).
type rawFile struct {
	d     *bolt.DB
	batch bool // share commits (bolt.Batch) instead of one commit per session
}

var (
	rawHeaders = []byte("headers")
	rawLog     = []byte("log")
)

// rawOpener opens raw files with the Store's bbolt options.
func rawOpener(batch bool) func(path string) (sessionFile, error) {
	return func(path string) (sessionFile, error) {
		d, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
		if err != nil {
			return nil, err
		}
		if err := d.Update(func(tx *bolt.Tx) error {
			if _, err := tx.CreateBucketIfNotExists(rawHeaders); err != nil {
				return err
			}
			_, err := tx.CreateBucketIfNotExists(rawLog)
			return err
		}); err != nil {
			return nil, errors.Join(err, d.Close())
		}
		d.MaxBatchDelay = time.Millisecond
		return rawFile{d: d, batch: batch}, nil
	}
}

// rawEntryKey is the log key of a session's first entry.
func rawEntryKey(id string) []byte { return append([]byte(id+"/"), 0, 0, 0, 0, 0, 0, 0, 1) }

func (f rawFile) create(ctx context.Context, i int) error {
	h := sessionHeader(i)
	h.Version = session.HeaderVersion
	header, err := json.Marshal(h)
	if err != nil {
		return err
	}
	entry, err := json.Marshal(session.Entry{Seq: 1, Kind: session.EntryDescriptor, Descriptor: sessionDescriptor})
	if err != nil {
		return err
	}
	put := func(tx *bolt.Tx) error {
		if err := tx.Bucket(rawHeaders).Put([]byte(h.ID), header); err != nil {
			return err
		}
		return tx.Bucket(rawLog).Put(rawEntryKey(h.ID), entry)
	}
	if f.batch {
		return f.d.Batch(put)
	}
	return f.d.Update(put)
}

func (f rawFile) load(ctx context.Context, i int) error {
	id := sessionID(i)
	return f.d.View(func(tx *bolt.Tx) error {
		var h session.Header
		if err := json.Unmarshal(tx.Bucket(rawHeaders).Get([]byte(id)), &h); err != nil {
			return err
		}
		var e session.Entry
		if err := json.Unmarshal(tx.Bucket(rawLog).Get(rawEntryKey(id)), &e); err != nil {
			return err
		}
		if h.ID != id || e.Kind != session.EntryDescriptor {
			return fmt.Errorf("loaded %q (%s), want %q", h.ID, e.Kind, id)
		}
		return nil
	})
}

func (f rawFile) ids(ctx context.Context) ([]string, error) {
	var ids []string
	err := f.d.View(func(tx *bolt.Tx) error {
		return tx.Bucket(rawHeaders).ForEach(func(k, _ []byte) error {
			ids = append(ids, string(k))
			return nil
		})
	})
	return ids, err
}

func (f rawFile) db() *bolt.DB { return f.d }
func (f rawFile) Close() error { return f.d.Close() }
