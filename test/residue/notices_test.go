package residue

import (
	"context"
	"github.com/troupe-rt/troupe/actors/registry"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/tools/jobtools"
	"github.com/troupe-rt/troupe/troupetest"
)

// countingSurface counts the notices handed to the agent's loop.
type countingSurface struct{ n atomic.Int64 }

func (s *countingSurface) Inject(owner.Message) error   { s.n.Add(1); return nil }
func (s *countingSurface) Steer(owner.Message) error    { s.n.Add(1); return nil }
func (s *countingSurface) Followup(owner.Message) error { s.n.Add(1); return nil }

// TestLongIncarnationNoticesOncePerJob: an incarnation that lives through many
// jobs, with job tools mounted twice along its scope chain (global and its own
// scope, so every settlement fires two notice listeners), is handed exactly one
// notice per job and drops exactly one duplicate per job. The owner actor keeps
// only the last job it noticed (no per-job set that grows with the incarnation's
// life), which is enough because a job's duplicates arrive together.
func TestLongIncarnationNoticesOncePerJob(t *testing.T) {
	const jobs = 300
	sys, _ := troupetest.NewSystem(t)
	_, err := sys.Jobs().MountAgents(context.Background(), sys.Scope())
	require.NoError(t, err)
	_, err = jobtools.MountIn(t.Context(), sys.Jobs(), sys.Scope(), jobtools.DefaultConfig())
	require.NoError(t, err)
	surface := &countingSurface{}
	a, err := sys.NewAgent(nil, "long", owner.Options{Surface: surface})
	require.NoError(t, err)
	require.NoError(t, sys.Jobs().RegisterAgent(context.Background(), a))
	_, err = jobtools.MountIn(t.Context(), sys.Jobs(), a.Scope(), jobtools.DefaultConfig())
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), stepBudget)
	defer cancel()
	for range jobs {
		id, err := sys.Jobs().Start(ctx, settledJob(a))
		require.NoError(t, err)
		// The settlement's observers (both notice listeners) have run once this
		// returns, and their notices are queued at the owner ahead of Stats.
		_, err = sys.Jobs().AwaitSettled(ctx, id, registry.AsAgent(a))
		require.NoError(t, err)
	}
	st, err := a.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, jobs, st.Delivered, "notices delivered")
	require.Equal(t, jobs, st.Duplicates, "duplicates dropped (one per job: two mounts)")
	require.Zero(t, st.Failed)
	require.EqualValues(t, jobs, surface.n.Load(), "surface calls")
	require.NoError(t, a.Dispose(ctx))
}
