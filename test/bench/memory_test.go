package bench

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/tools/jobtools"
)

// awaitNotices waits until the owners' actors have delivered want completion
// notices in all (owner.Stats.Delivered), so none is still queued when the heap is
// read; it returns that count.
func awaitNotices(b *testing.B, owners []*owner.Agent, want int) int {
	b.Helper()
	deadline := time.Now().Add(settleBudget)
	for {
		n := 0
		for _, a := range owners {
			s, err := a.Stats(context.Background())
			require.NoError(b, err)
			n += s.Delivered
		}
		if n >= want {
			return n
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d notices delivered, want %d", n, want)
		}
		runtime.Gosched()
	}
}

// BenchmarkMemorySettledNoticedRecord is BenchmarkMemorySettledRecord with the job
// tools mounted in the global scope, so every one of the 100,000 owned jobs sends
// its completion notice to its owner, whose actor delivers it (the owners have no
// Surface: a delivered notice is counted and dropped). The measurement waits until
// every notice has been delivered. Reported: B/record, the steady-state heap per
// settled owned record whose notice was delivered (target ≤ 256 B, issue 15), and
// notices/record, the notices delivered per measured record (1: each was sent).
func BenchmarkMemorySettledNoticedRecord(b *testing.B) {
	exactHeapProfile("TROUPE_BENCH_NOTICED_HEAPPROFILE")
	b.ReportAllocs()
	var per, notices float64
	for i := 0; i < b.N; i++ {
		r := newRig(b)
		_, err := jobtools.MountIn(b.Context(), r.sys.Jobs(), r.sys.Scope(), jobtools.DefaultConfig())
		require.NoError(b, err)
		owners := r.agents(b, "mem", memOwners)
		base := processes(r.sys)
		r.fill(b, owners, memOwners) // warm-up: one record (and notice) per owner
		warmNotices := awaitNotices(b, owners, memOwners)
		r.quiesce(b, base)
		warmProcessRegistry(b, r.sys)
		r.quiesce(b, base)
		treeApplied(b, r.sys)
		before := heapInUse()
		r.fill(b, owners, memSettled)
		delivered := awaitNotices(b, owners, warmNotices+memSettled)
		r.quiesce(b, base)
		treeApplied(b, r.sys)
		after := heapInUse()
		writeHeapProfile(b, "TROUPE_BENCH_NOTICED_HEAPPROFILE")
		runtime.KeepAlive(owners)
		per += float64(after-before) / memSettled
		notices += float64(delivered-warmNotices) / memSettled
		shutdown(b, r.sys)
	}
	b.ReportMetric(per/float64(b.N), "B/record")
	b.ReportMetric(notices/float64(b.N), "notices/record")
}

// memRetain is the per-owner retention of BenchmarkMemoryRetainedHistory.
const memRetain = 10

// BenchmarkMemoryRetainedHistory measures bounded job history (issue 15): under
// Retention{PerOwner: 10}, 1,000 owners each first fill their retention (10
// settled records each, before the baseline), then 100,000 more owned jobs settle.
// Reported: B/job, the heap growth per job beyond the baseline (O(live +
// retained): about 0, where BenchmarkMemorySettledRecord's unbounded history keeps
// its B/record per job), and records, the settled records the registry still
// holds (exact: 10 per owner).
func BenchmarkMemoryRetainedHistory(b *testing.B) {
	b.ReportAllocs()
	var per, kept float64
	for i := 0; i < b.N; i++ {
		r := newRig(b, func(c *troupe.Config) { c.Retention = troupe.Retention{PerOwner: memRetain} })
		owners := r.agents(b, "mem", memOwners)
		base := processes(r.sys)
		r.fill(b, owners, memOwners*memRetain) // the retention is full from here on
		r.quiesce(b, base)
		warmProcessRegistry(b, r.sys)
		r.quiesce(b, base)
		treeApplied(b, r.sys)
		before := heapInUse()
		r.fill(b, owners, memSettled)
		r.quiesce(b, base)
		treeApplied(b, r.sys)
		after := heapInUse()
		f, err := r.sys.Jobs().Footprint(context.Background())
		require.NoError(b, err)
		require.Equal(b, memOwners*memRetain, f.Jobs, "records retained")
		runtime.KeepAlive(owners)
		per += float64(after-before) / memSettled
		kept += float64(f.Jobs)
		shutdown(b, r.sys)
	}
	b.ReportMetric(per/float64(b.N), "B/job")
	b.ReportMetric(kept/float64(b.N), "records")
}
