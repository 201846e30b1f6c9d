package residue

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/troupetest"
)

const (
	// churnFull is the acceptance size: 100,000 incarnations.
	churnFull = 100_000
	// churnSmall is the size under -race or -short (the CI budget).
	churnSmall = 5_000
	// warmup incarnations run before the baseline heap is read: they grow the
	// runtime's and protoactor's pools and every map to their working size.
	warmup = 2_000
	// retainedBudget bounds the retained-heap growth of a whole churn (issue 12).
	retainedBudget = 1 << 20
	// stepBudget bounds one incarnation's round trips.
	stepBudget = 10 * time.Second
)

// churnCount is the number of incarnations the churn test runs.
func churnCount() int {
	if raceEnabled || testing.Short() {
		return churnSmall
	}
	return churnFull
}

// settledJob is a producer whose outcome is already on Done: the job settles
// completed as soon as its actor reads it.
func settledJob(a *owner.Agent) job.Spec {
	return job.Spec{Kind: "bash", Label: "churn", Owner: a, Run: func() (job.Hooks, error) {
		done := make(chan job.Outcome, 1)
		done <- job.Outcome{Status: job.Completed, Output: "ok"}
		return job.Hooks{Done: done, Cancel: func(string) error { return nil }}, nil
	}}
}

// incarnation runs one agent incarnation through its life: spawn, register, start
// one job, await its settlement (observers included), dispose.
func incarnation(tb testing.TB, sys *troupe.System, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), stepBudget)
	defer cancel()
	session := "churn-" + strconv.Itoa(n) // a new session each time: per-session residue shows
	a, err := sys.NewAgent(nil, session)
	if err != nil {
		tb.Fatal(err)
	}
	if err := sys.Jobs().RegisterAgent(ctx, a); err != nil {
		tb.Fatal(err)
	}
	id, err := sys.Jobs().Start(ctx, settledJob(a))
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := sys.Jobs().AwaitSettled(ctx, id, registry.AsAgent(a)); err != nil {
		tb.Fatal(err)
	}
	if err := a.Dispose(ctx); err != nil {
		tb.Fatal(err)
	}
}

// quiesce waits until the registry has processed what the last disposals sent it
// (an owner's Stopped arrives after its Dispose returned) and returns its table
// sizes. Each Footprint is one round trip behind every message already sent.
func quiesce(tb testing.TB, sys *troupe.System) registry.Footprint {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepBudget)
	defer cancel()
	var f registry.Footprint
	var err error
	for range 3 { // a Stopped may itself send the registry one more message
		f, err = sys.Jobs().Footprint(ctx)
		require.NoError(tb, err)
	}
	return f
}

// liveHeap is the heap held by reachable objects: HeapAlloc right after two full
// collections (the second frees what the first's finalizers released).
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// warmProcessRegistry makes protoactor's process registry allocate, once, what it
// allocates lazily: it is 1,024 concurrent maps of 32 shards, each a Go map that
// gets its first group of slots when the first PID lands in it and keeps it when
// the PID leaves (Go maps never shrink). Churn fills those 32,768 maps one by one
// (≈ 8 MiB in all, once per actor system, whatever the number of incarnations),
// which a heap difference would otherwise count against the incarnations that
// happened to land first in each. It sets and removes one key per shard.
func warmProcessRegistry(sys *troupe.System) {
	buckets := sys.Actors().ProcessRegistry.LocalPIDs.LocalPIDs
	if len(buckets) == 0 {
		return
	}
	// Keys that together hit every shard (the shard hash is the same in every bucket).
	var keys []string
	hit := map[any]bool{}
	for i := 0; len(hit) < len(buckets[0]); i++ {
		k := "residue-warm-" + strconv.Itoa(i)
		if sh := buckets[0].GetShard(k); !hit[sh] {
			hit[sh] = true
			keys = append(keys, k)
		}
	}
	for _, b := range buckets {
		for _, k := range keys {
			b.Set(k, nil)
			b.Remove(k)
		}
	}
}

// idle is the registry's footprint with the test's registrations only: Served's
// global controller and agent mount, and one counter for kind bash.
var idle = registry.Footprint{Kinds: 1, Registrations: 2, Controllers: 1, AgentMounts: 1}

// TestIncarnationChurnLeavesNoResidue churns agent incarnations — register, start
// one job, settle, dispose — and checks that nothing keyed by them remains: every
// registry table is back to its idle size, the supervision tree holds only the
// system's own nodes, and the retained heap grew by less than 1 MiB in total.
func TestIncarnationChurnLeavesNoResidue(t *testing.T) {
	sys, _ := troupetest.Served(t)
	ctx, cancel := context.WithTimeout(context.Background(), stepBudget)
	defer cancel()
	before, err := sys.Tree().Snapshot(ctx)
	require.NoError(t, err)

	warmProcessRegistry(sys)
	for i := range warmup {
		incarnation(t, sys, i)
	}
	warm := quiesce(t, sys)
	base := liveHeap()

	n := churnCount()
	start := time.Now()
	for i := range n {
		incarnation(t, sys, warmup+i)
	}
	elapsed := time.Since(start)
	churned := quiesce(t, sys)
	after := liveHeap()

	grew := int64(after) - int64(base)
	t.Logf("%d incarnations in %v (%v each): retained heap %+d B in total, %.2f B per incarnation (target 0, budget %d B in total)",
		n, elapsed.Round(time.Millisecond), (elapsed / time.Duration(n)).Round(time.Microsecond),
		grew, float64(grew)/float64(n), retainedBudget)
	assert.Equal(t, idle, warm, "registry tables after the warm-up")
	assert.Equal(t, idle, churned, "registry tables after the churn")
	assert.Less(t, grew, int64(retainedBudget), "retained heap grew by %d B over %d incarnations", grew, n)

	ctx, cancel = context.WithTimeout(context.Background(), stepBudget)
	defer cancel()
	snap, err := sys.Tree().Snapshot(ctx)
	require.NoError(t, err)
	require.Equal(t, len(before.Nodes), len(snap.Nodes), "supervision tree nodes after the churn: %v", snap.Nodes)
	stats, err := sys.Tree().Stats(ctx)
	require.NoError(t, err)
	require.Zero(t, stats.Rejected, "the supervision tree refused events: %v", stats.Rejections)
}

// BenchmarkIncarnationResidue reports the heap retained per incarnation after b.N
// churned incarnations (register, start one job, settle, dispose), measured after
// full collections against a baseline taken after a warm-up in the same run. The
// target is 0 B per incarnation.
func BenchmarkIncarnationResidue(b *testing.B) {
	sys, _ := troupetest.Served(b)
	warmProcessRegistry(sys)
	for i := range warmup {
		incarnation(b, sys, i)
	}
	quiesce(b, sys)
	base := liveHeap()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		incarnation(b, sys, warmup+i)
	}
	b.StopTimer()
	f := quiesce(b, sys)
	grew := float64(int64(liveHeap()) - int64(base))
	b.ReportMetric(grew/float64(b.N), "retained-B/incarnation")
	b.ReportMetric(0, "target-B/incarnation")
	if f != idle {
		b.Errorf("registry tables after the churn: %+v, want %+v", f, idle)
	}
}
