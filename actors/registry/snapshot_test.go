package registry

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/troupe-rt/troupe/actors/job"
)

// A record's snapshot is one allocation, whatever it carries: live, settled (its
// finish time), settled with a detail. Each is the snapshot Meta.Snapshot builds
// from the same values, and each is its own: a caller that writes through one
// snapshot's FinishedAt or Detail changes neither the record nor another
// snapshot. Fails with the snapshot allocated apart from its fields' values (3 for
// a settled job with a detail, 2 without).
func TestRecordSnapshotIsOneAllocation(t *testing.T) {
	live := &record{Meta: job.Meta{ID: "bash-1", Label: "l", StartedAt: 5}, pid: actor.NewPID("local", "registry/bash-1"), status: job.Running}
	settled := &record{Meta: job.Meta{ID: "bash-2", Label: "l", StartedAt: 5}, status: job.Completed, finishedAt: 9, flags: flagReported}
	failed := &record{Meta: job.Meta{ID: "bash-3", Label: "l", StartedAt: 5}, status: job.Failed, finishedAt: 9, flags: flagHasDetail, detail: "Error: boom"}
	stopping := &record{Meta: job.Meta{ID: "bash-4", Label: "l", StartedAt: 5}, pid: actor.NewPID("local", "registry/bash-4"), status: job.Stopping, flags: flagHasDetail, detail: "why"}
	for _, r := range []*record{live, settled, failed, stopping} {
		var detail *string
		var finished *int64
		if r.hasDetail() {
			d := r.detail
			detail = &d
		}
		if r.status.Terminal() {
			f := r.finishedAt
			finished = &f
		}
		want := r.Snapshot(r.status, detail, finished, r.reported())
		a, b := r.snapshot(), r.snapshot()
		require.True(t, proto.Equal(want, a), "%s: %v, want %v", r.ID, a, want)
		if a.FinishedAt != nil {
			*a.FinishedAt = 1
			require.Equal(t, int64(9), b.GetFinishedAt(), "%s: snapshots share no finish time", r.ID)
			require.Equal(t, int64(9), r.finishedAt)
		}
		if a.Detail != nil {
			*a.Detail = "changed"
			require.Equal(t, r.detail, b.GetDetail(), "%s: snapshots share no detail", r.ID)
		}
		require.Equal(t, 1.0, testing.AllocsPerRun(100, func() { _ = r.snapshot() }), "%s: allocations per snapshot", r.ID)
	}
}
