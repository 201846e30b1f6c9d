package bench

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/supervision"
	"github.com/troupe-rt/troupe/troupetest"
)

// Continuable subagents (actors/activation): followup → turn start on a resident
// Activation, followups per second through one Activation, cold restore from bbolt
// of a session of 10 and of 10,000 turns, and the memory of an idle resident
// Activation. The baseline is FloorRequestResponse, measured in the same run.

// benchRunner is a no-op turn runner: it signals started when RunTurn is called
// and returns at once — except for "hold …" turns, which signal held and return
// only when their ctx ends, and "gate …" turns, which wait for gate to close.
type benchRunner struct {
	started chan struct{}
	held    chan struct{}
	gate    chan struct{}
	gated   chan *owner.Agent // the agent of each "gate …" turn (activation.TurnAgent), as it starts
}

func newBenchRunner() *benchRunner {
	return &benchRunner{started: make(chan struct{}, 1<<16), held: make(chan struct{}, 1<<16), gate: make(chan struct{}),
		gated: make(chan *owner.Agent, 1<<10)}
}

var doneTurn = subagent.TurnResult{Messages: []subagent.Message{{Role: "assistant",
	Content: []subagent.Block{{Type: "text", Text: "ok"}}}}}

func (r *benchRunner) RunTurn(ctx context.Context, turn subagent.Turn) (subagent.TurnResult, error) {
	text := turn.Input.Content[0].Text
	switch {
	case strings.HasPrefix(text, "hold "):
		r.held <- struct{}{}
		<-ctx.Done()
		return subagent.TurnResult{}, context.Cause(ctx)
	case strings.HasPrefix(text, "gate "):
		r.gated <- activation.TurnAgent(ctx)
		<-r.gate
	}
	r.started <- struct{}{}
	return doneTurn, nil
}

// contRig is a served System with a continuation manager and a registered parent P.
type contRig struct {
	sys    *troupe.System
	store  session.Store
	m      *activation.Manager
	runner *benchRunner
	parent *owner.Agent
}

func newContRig(b *testing.B, store session.Store) *contRig {
	b.Helper()
	sys, _ := troupetest.Served(b)
	r := &contRig{sys: sys, store: store, runner: newBenchRunner()}
	rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), nil)
	require.NoError(b, err)
	_, err = rt.RegisterProvider(b.Context(), sys.Scope(), subagent.NewSpawn(sys.Actors(), r.runner))
	require.NoError(b, err)
	r.m, err = sys.StartContinuations(store, rt, r.runner, nil)
	require.NoError(b, err)
	r.parent = troupetest.Agent(b, sys, "P")
	return r
}

var coordinatorP = session.Source{Kind: "coordinator", Form: "relay", SenderSessionID: "P"}

// awaitLive waits until n Activations are resident (each poll a directory round trip).
func (r *contRig) awaitLive(b *testing.B, n int) {
	b.Helper()
	deadline := time.Now().Add(settleBudget)
	for r.m.Live(context.Background()) != n {
		if time.Now().After(deadline) {
			b.Fatalf("%d Activations live, want %d", r.m.Live(context.Background()), n)
		}
		runtime.Gosched()
	}
}

// residentIdle makes child id resident and idle between turns: begin starts (or
// cold-resumes) it with a "gate <id>" message; while that turn waits on the
// runner's gate, the child's own agent starts a grandchild whose turn is held until
// the System drains. The child then owns a resident child, so it stays (waiting)
// after every turn of its own.
func (r *contRig) residentIdle(b *testing.B, id string, begin func()) {
	b.Helper()
	r.runner.gate = make(chan struct{})
	begin()
	var c *owner.Agent
	select {
	case c = <-r.runner.gated: // the child's own agent, as its turn has it
	case <-time.After(settleBudget):
		b.Fatalf("child %s's gated turn never started", id)
	}
	deadline := time.Now().Add(settleBudget)
	_, _, err := r.m.Start(context.Background(), c, "spawn", "keeper", id+"-keeper", subagent.Request{Prompt: "hold " + id})
	require.NoError(b, err)
	<-r.runner.held
	close(r.runner.gate)
	<-r.runner.started // the gated turn ended; the child waits on its keeper
	deadline = time.Now().Add(settleBudget)
	for {
		st, ok := r.m.Status(context.Background(), id)
		require.True(b, ok, "child %s is not resident", id)
		if st.Residency == activation.Waiting {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("child %s: %s, want waiting", id, st.Residency)
		}
		runtime.Gosched()
	}
}

// newResident starts a fresh child and makes it resident and idle.
func (r *contRig) newResident(b *testing.B, id string) {
	b.Helper()
	r.residentIdle(b, id, func() {
		_, _, err := r.m.Start(context.Background(), r.parent, "spawn", "bench", id, subagent.Request{Prompt: "gate " + id})
		require.NoError(b, err)
	})
}

// release disposes child id made by newResident (its keeper first, see
// DrainContinuableChildren; the keeper's held turn is cancelled, so no turn
// starts) and deletes both sessions from the store: a benchmark that moves on to
// a fresh child holds no more than one child's history, in the store and in its
// resident Activation, whatever b.N (a heap growing with b.N would make each GC
// cycle, and so the figure, grow with it).
func (r *contRig) release(b *testing.B, id string) {
	b.Helper()
	ctx := context.Background()
	require.NoError(b, r.m.DrainContinuableChildren(ctx, r.parent, []string{id}))
	require.NoError(b, r.store.Delete(ctx, id))
	require.NoError(b, r.store.Delete(ctx, id+"-keeper"))
}

// rotateEvery keeps the sessions of the short-history followup benchmarks short:
// after this many followups the benchmark moves on to a fresh resident child (set
// up with the timer stopped) and releases the previous one (release), so the
// figure does not drift with b.N as the in-memory store's log grows. A turn no longer copies the history (Turn.History
// is handed over shared, or read on demand), so its cost does not grow with the
// session: BenchmarkContinuableFollowupToTurnStartHistory10k measures a long one.
const rotateEvery = 64

// BenchmarkContinuableFollowupToTurnStart: one op is a Followup to a resident,
// idle Activation (kept resident by a child it owns, see residentIdle) and the wait
// until its turn has started (RunTurn called). Sessions have at most rotateEvery
// turns. In-memory store: the runtime's own cost.
func BenchmarkContinuableFollowupToTurnStart(b *testing.B) {
	r := newContRig(b, session.NewMemory())
	ctx := context.Background()
	n, id := 0, ""
	b.ReportAllocs()
	for b.Loop() {
		if n%rotateEvery == 0 {
			b.StopTimer()
			if id != "" {
				r.release(b, id)
			}
			id = "c" + strconv.Itoa(n/rotateEvery)
			r.newResident(b, id)
			b.StartTimer()
		}
		n++
		region := trace.StartRegion(ctx, "followup")
		if _, err := r.m.Followup(ctx, r.parent, id, "x", coordinatorP); err != nil {
			b.Fatal(err)
		}
		<-r.runner.started
		region.End()
	}
}

// BenchmarkContinuableFollowupToTurnStartHistory10k: the same on a resident
// session of 10,000 completed turns (restored once, untimed; each op adds one).
func BenchmarkContinuableFollowupToTurnStartHistory10k(b *testing.B) {
	s := session.NewMemory()
	r := newContRig(b, s)
	buildSession(b, s, "big", 10_000)
	r.residentIdle(b, "big", func() {
		_, err := r.m.Followup(context.Background(), r.parent, "big", "gate big", coordinatorP)
		require.NoError(b, err)
	})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.m.Followup(ctx, r.parent, "big", "x", coordinatorP); err != nil {
			b.Fatal(err)
		}
		<-r.runner.started
	}
}

// throughputWindow bounds the followups accepted but not yet started.
const throughputWindow = 64

// BenchmarkContinuableFollowupThroughput: followups sent back to back to one
// resident Activation (each waits for its acceptance), with at most
// throughputWindow of them accepted but not yet started; every turn runs. Reports
// followups/s; ns/op is the time per followup. Every 8×rotateEvery followups the
// benchmark drains the window and moves on to a fresh resident child, releasing
// the previous one (untimed), to bound the history. In-memory store.
func BenchmarkContinuableFollowupThroughput(b *testing.B) {
	r := newContRig(b, session.NewMemory())
	ctx := context.Background()
	n, id, outstanding := 0, "", 0
	b.ReportAllocs()
	for b.Loop() {
		if n%(8*rotateEvery) == 0 {
			b.StopTimer()
			for ; outstanding > 0; outstanding-- {
				<-r.runner.started
			}
			if id != "" {
				r.release(b, id)
			}
			id = "c" + strconv.Itoa(n)
			r.newResident(b, id)
			b.StartTimer()
		}
		n++
		if outstanding == throughputWindow {
			<-r.runner.started
			outstanding--
		}
		if _, err := r.m.Followup(ctx, r.parent, id, "x", coordinatorP); err != nil {
			b.Fatal(err)
		}
		outstanding++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "followups/s")
	for ; outstanding > 0; outstanding-- {
		<-r.runner.started
	}
}

// openBolt opens a bbolt store in a temp dir, closed at cleanup (after the System's
// shutdown, which drains the manager: cleanups run last-in first-out).
func openBolt(b *testing.B) *session.Bolt {
	b.Helper()
	s, err := session.OpenBolt(filepath.Join(b.TempDir(), "sessions.db"))
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, s.Close()) })
	return s
}

// buildSession writes child id of P with turns completed turns, straight through
// the Store API (one Accept per turn, its start, user and assistant messages and
// end in one Append), as an Activation would have left it: nothing pending.
func buildSession(b *testing.B, s session.Store, id string, turns int) {
	b.Helper()
	ctx := context.Background()
	desc, err := json.Marshal(activation.Descriptor{Version: activation.DescriptorVersion, Mode: "continuable",
		Provider: "spawn", Label: "bench"})
	require.NoError(b, err)
	require.NoError(b, s.Create(ctx, session.Header{ID: id, ParentSession: "P", Origin: "subagent", DelegationDepth: 1},
		[]session.Entry{{Kind: session.EntryDescriptor, Descriptor: desc}}))
	snap, err := s.Activate(ctx, id)
	require.NoError(b, err)
	entries := make([]session.Entry, 0, 4*turns)
	for i := range turns {
		text := []session.Block{{Type: "text", Text: "turn " + strconv.Itoa(i) + " of the history, a line of a typical length for a prompt"}}
		m, err := s.Accept(ctx, id, snap.Header.Epoch, session.InboxMessage{ID: "hist-" + strconv.Itoa(i), Content: text,
			Source: session.Source{Kind: "user"}})
		require.NoError(b, err)
		entries = append(entries,
			session.Entry{Kind: session.EntryTurnStart, InboxID: m.ID},
			session.Entry{Kind: session.EntryMessage, Role: "user", Content: text},
			session.Entry{Kind: session.EntryMessage, Role: "assistant", Content: []session.Block{{Type: "text",
				Text: "the answer to turn " + strconv.Itoa(i) + ", also a line of a typical length for a reply"}}},
			session.Entry{Kind: session.EntryTurnEnd, InboxID: m.ID, StopReason: subagent.StopCompleted})
	}
	require.NoError(b, s.Append(ctx, id, snap.Header.Epoch, entries...))
}

// coldRestore measures a Followup to a settled child (no Activation) until its turn
// starts: the directory authorizes against the session's head, resumes it,
// accepts the message and records its turn start in one synced bbolt commit
// (Store.ResumeAccept: the head read and checked in its transaction, a new
// epoch, the message journaled and, being the only open message, its turn start
// logged; the header, descriptor, provider state and open messages read — not
// the log), spawns the Activation, which answers the followup
// and then runs the turn (no commit of its own). The no-op runner never reads the
// history (Turn.History.Messages), so nothing of the log is read. next returns the child for the next
// op; it and the wait for the previous Activation's disposal run with the timer
// stopped.
func coldRestore(b *testing.B, r *contRig, next func() string) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		id := next()
		b.StartTimer()
		region := trace.StartRegion(ctx, "restore")
		if _, err := r.m.Followup(ctx, r.parent, id, "x", coordinatorP); err != nil {
			b.Fatal(err)
		}
		<-r.runner.started
		region.End()
		b.StopTimer()
		r.awaitLive(b, 0)
		b.StartTimer()
	}
}

// syncBuilt flushes what a build wrote with syncs off (the timer is stopped), so
// a restore's first synced commit does not pay for the build's pages.
func syncBuilt(b *testing.B, s *session.Bolt) {
	if err := s.DB().Sync(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkContinuableColdRestore10Turns: cold restore of a session of 10 turns
// from bbolt. Each op restores a fresh session (built with the timer stopped, with
// bbolt's syncs off while building only), so every restore reads 10 turns.
func BenchmarkContinuableColdRestore10Turns(b *testing.B) {
	s := openBolt(b)
	r := newContRig(b, s)
	n := 0
	coldRestore(b, r, func() string {
		n++
		id := "cold-" + strconv.Itoa(n)
		s.DB().NoSync = true
		buildSession(b, s, id, 10)
		s.DB().NoSync = false
		syncBuilt(b, s)
		return id
	})
}

// BenchmarkContinuableColdRestore10TurnsNoSync is BenchmarkContinuableColdRestore10Turns
// with bbolt's syncs off for the restores too (no fdatasync in the op): the same
// code path and the same bbolt work, without the disk's wait. It and
// BenchmarkFloorBoltCommit, in the same run, split the synced figure into its CPU
// and hand-off share and its disk share, which a loaded machine's disk blurs.
func BenchmarkContinuableColdRestore10TurnsNoSync(b *testing.B) {
	s := openBolt(b)
	s.DB().NoSync = true
	r := newContRig(b, s)
	n := 0
	coldRestore(b, r, func() string {
		n++
		id := "cold-" + strconv.Itoa(n)
		buildSession(b, s, id, 10)
		return id
	})
}

// BenchmarkContinuableColdRestore10TurnsMemory is the same cold restore on the
// in-memory store (session.NewMemory): the runtime's own share, without bbolt. The
// store holds one built session at a time (the previous one is deleted, untimed).
func BenchmarkContinuableColdRestore10TurnsMemory(b *testing.B) {
	s := session.NewMemory()
	r := newContRig(b, s)
	n, prev := 0, ""
	coldRestore(b, r, func() string {
		if prev != "" {
			require.NoError(b, s.Delete(context.Background(), prev))
		}
		n++
		prev = "cold-" + strconv.Itoa(n)
		buildSession(b, s, prev, 10)
		return prev
	})
}

// BenchmarkContinuableColdRestore10kTurns: cold restore of a session of 10,000
// turns from bbolt, built once (syncs off while building). Each op adds one turn,
// so after N ops the session has 10,000+N turns (N is small: a restore takes
// milliseconds).
func BenchmarkContinuableColdRestore10kTurns(b *testing.B) {
	s := openBolt(b)
	r := newContRig(b, s)
	s.DB().NoSync = true
	buildSession(b, s, "big", 10_000)
	s.DB().NoSync = false
	syncBuilt(b, s)
	coldRestore(b, r, func() string { return "big" })
}

// BenchmarkFloorBoltCommit is the disk's share of a cold restore, measured in the
// same run: one op is one synced bbolt commit alone (Store.Accept of a message to a
// session of the same file, a write with no other in flight: bolt.Update), whose
// two fdatasyncs (its pages, then its meta page) are those of the cold restore's
// ResumeAccept commit. What a cold restore takes beyond it is CPU and hand-offs.
func BenchmarkFloorBoltCommit(b *testing.B) {
	s := openBolt(b)
	ctx := context.Background()
	s.DB().NoSync = true
	buildSession(b, s, "floor", 10)
	s.DB().NoSync = false
	syncBuilt(b, s)
	snap, err := s.Activate(ctx, "floor")
	require.NoError(b, err)
	msg := session.InboxMessage{ID: "m", Content: []session.Block{{Type: "text", Text: "x"}}, Source: coordinatorP}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Accept(ctx, "floor", snap.Header.Epoch, msg); err != nil {
			b.Fatal(err)
		}
	}
}

// memActivations is how many idle resident Activations BenchmarkMemoryIdleActivation holds.
const memActivations = 1_000

// BenchmarkMemoryIdleActivation reports the heap plus stacks per idle resident
// Activation. Each of 1,000 children is held resident by a parked queue, the state
// SPEC §6.4 leaves after an interrupt: its first turn (held by the runner) is
// interrupted while a followup waits behind it, so the Activation stays resident
// (waiting, parked) with no turn running and no goroutine of its own. What is
// counted: the Activation actor and its core (the restored history: the first
// prompt; one parked message), the child's own agent (owner actor, scope,
// registration) and the directory's entry. The store is bbolt (its pages are
// mmapped, not heap) with syncs off and no batch window, for speed only. Before
// the baseline: protoactor's process registry is warmed up (warmProcessRegistry,
// as for the job figures) and one child is started, settled and torn down
// (awaitTornDown). The "after" reading is taken once every child is idle with its
// queue parked (awaitIdle).
// Reports B/activation and goroutines/activation. One op is one whole measurement
// on a fresh System.
func BenchmarkMemoryIdleActivation(b *testing.B) {
	exactHeapProfile("TROUPE_BENCH_ACTIVATION_HEAPPROFILE")
	b.ReportAllocs()
	var per, gor float64
	for i := 0; i < b.N; i++ {
		p, g := idleActivationMemory(b, memActivations)
		per += p
		gor += g
	}
	b.ReportMetric(per/float64(b.N), "B/activation")
	b.ReportMetric(gor/float64(b.N), "goroutines/activation")
}

// awaitIdle waits until n children of P are idle: resident and waiting. A child
// whose message is queued waits only if its queue is parked (unparked, it would
// run), so this is "every child parked". One List call reads every child (Status
// copies the directory's whole live set on every call: O(n²) over n children).
func (r *contRig) awaitIdle(b *testing.B, n int) {
	b.Helper()
	deadline := time.Now().Add(settleBudget)
	for {
		listed, err := r.m.List(context.Background(), r.parent, false)
		require.NoError(b, err)
		idle := 0
		for _, l := range listed {
			if l.Status == "idle" {
				idle++
			}
		}
		if idle == n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d children idle, want %d", idle, n)
		}
		runtime.Gosched()
	}
}

// awaitTornDown waits until no node of session id is left in the supervision
// tree: its Activation has stopped and so has its agent's owner actor, the last
// step of the agent's disposal (which runs in the background once the Activation
// is gone). A baseline taken while that disposal still ran (its goroutine showed
// as −0.001 goroutines/activation) moved the reading by −340 to +90 B per
// Activation between runs on a loaded machine: whatever the disposal freed, or
// made, during the build was counted against the Activations.
func (r *contRig) awaitTornDown(b *testing.B, id string) {
	b.Helper()
	deadline := time.Now().Add(settleBudget)
	for {
		snap, err := r.sys.Tree().Snapshot(context.Background())
		require.NoError(b, err)
		if !slices.ContainsFunc(snap.Nodes, func(n supervision.Node) bool { return n.Session == id }) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("session %s still has nodes in the supervision tree:\n%s", id, snap)
		}
		runtime.Gosched()
	}
}

// idleActivationMemory is one measurement of BenchmarkMemoryIdleActivation with n
// children, on a fresh System and bbolt file: it returns the heap plus stacks and
// the goroutines per idle resident Activation (BenchmarkScaleActivations uses it
// at 10k and 20k). The heap is the live heap's growth; the stacks are those of the
// goroutines alive at the end and not at the baseline, each charged what a parked
// goroutine holds (warmGoroutines: its stack and its descriptor), so the reading is
// the same from run to run (±5 B) and still counts any goroutine an Activation keeps.
func idleActivationMemory(b *testing.B, n int) (bytesPer, goroutinesPer float64) {
	b.Helper()
	s, err := session.OpenBolt(filepath.Join(b.TempDir(), "mem.db"))
	require.NoError(b, err)
	s.DB().NoSync = true
	r := newContRig(b, s)
	ctx := context.Background()
	warmProcessRegistry(b, r.sys)
	_, _, err = r.m.Start(ctx, r.parent, "spawn", "warm", "warm", subagent.Request{Prompt: "warm"})
	require.NoError(b, err)
	<-r.runner.started
	r.awaitLive(b, 0)
	r.awaitTornDown(b, "warm")
	ids := make([]string, n)
	for k := range ids {
		ids[k] = "idle-" + strconv.Itoa(k)
	}
	perGoroutine := warmGoroutines(n + 1024)
	g0 := runtime.NumGoroutine()
	treeApplied(b, r.sys)
	before := liveHeap()
	writeHeapProfileBase(b, "TROUPE_BENCH_ACTIVATION_HEAPPROFILE")
	for _, id := range ids {
		if _, _, err := r.m.Start(ctx, r.parent, "spawn", "idle", id, subagent.Request{Prompt: "hold " + id}); err != nil {
			b.Fatal(err)
		}
		<-r.runner.held
		if _, err := r.m.Followup(ctx, r.parent, id, "parked", coordinatorP); err != nil {
			b.Fatal(err)
		}
		if err := r.m.Interrupt(ctx, id, activation.Authority{ParentSession: "P"}); err != nil {
			b.Fatal(err)
		}
	}
	r.awaitIdle(b, n)
	treeApplied(b, r.sys)
	after := liveHeap()
	writeHeapProfile(b, "TROUPE_BENCH_ACTIVATION_HEAPPROFILE")
	goroutines := runtime.NumGoroutine() - g0
	bytesPer = float64(after-before+int64(max(goroutines, 0))*perGoroutine) / float64(n)
	goroutinesPer = float64(goroutines) / float64(n)
	runtime.KeepAlive(ids)
	// The drain takes time linear in n (≈ 0.9 ms per Activation with its build, on 2
	// cores): the budget grows with n beyond settleBudget.
	drain, cancel := context.WithTimeout(context.Background(), max(settleBudget, time.Duration(n)*drainPerActivation))
	defer cancel()
	require.NoError(b, r.sys.Shutdown(drain))
	require.NoError(b, s.Close())
	return bytesPer, goroutinesPer
}

// liveHeap collects garbage (twice, so finalizer-freed objects are gone too) and
// returns the bytes of heap objects the last collection marked live
// (/gc/heap/live:bytes; HeapAlloc also counts what was allocated since that
// collection's mark, by whatever ran meanwhile). Goroutine stacks are not in it:
// an idle Activation's are counted from the live goroutines (idleActivationMemory),
// since StackInuse is mostly the runtime's caches — the stacks dead goroutines keep
// for reuse (up to 63 per P) and the free slots of stack spans — which moved it by
// −30 to −390 B per Activation from one run to the next with no goroutine more.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live)
	return int64(live[0].Value.Uint64())
}

// warmGoroutines runs k goroutines at once and lets them end, and returns what one
// of them held while parked (heap and stack): the cost idleActivationMemory charges
// for each goroutine the idle Activations keep. It also leaves k dead goroutine
// descriptors for the build to reuse: the runtime never frees one (≈ 480 B of
// heap), so goroutines that come and go while the children are built must not add
// new ones to the reading past the most alive at once so far. k is above what the
// build runs at once.
func warmGoroutines(k int) int64 {
	before := heapAndStacks()
	release := make(chan struct{})
	var parked, done sync.WaitGroup
	parked.Add(k)
	done.Add(k)
	for range k {
		go func() {
			defer done.Done()
			parked.Done()
			<-release
		}()
	}
	parked.Wait()
	per := (heapAndStacks() - before) / int64(k)
	close(release)
	done.Wait()
	return per
}

// heapAndStacks is the live heap plus the goroutine stacks in use, after a GC.
func heapAndStacks() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc + ms.StackInuse)
}

// writeHeapProfileBase writes the heap profile as of the baseline (the GC liveHeap
// just ran) to the file named by env plus ".base", if env is set: with it,
// go tool pprof -diff_base shows only what the measured Activations hold.
func writeHeapProfileBase(b *testing.B, env string) {
	b.Helper()
	if path := os.Getenv(env); path != "" {
		f, err := os.Create(path + ".base")
		require.NoError(b, err)
		defer f.Close()
		require.NoError(b, pprof.Lookup("heap").WriteTo(f, 0))
	}
}

// drainPerActivation is idleActivationMemory's shutdown budget per Activation
// (3 ms: a minute for 20k).
const drainPerActivation = 3 * time.Millisecond
