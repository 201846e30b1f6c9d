package jobtools_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/tools/jobtools"
	"github.com/troupe-rt/troupe/troupetest"
)

// probeCtx counts every use of the context: a registry call (Client.Get) checks
// its ctx before it sends and waits on its Done, so a Finalize that asks the
// registry anything uses it; one that does not leaves the count at 0.
type probeCtx struct {
	context.Context
	uses atomic.Int64
}

func (p *probeCtx) Err() error            { p.uses.Add(1); return p.Context.Err() }
func (p *probeCtx) Done() <-chan struct{} { p.uses.Add(1); return p.Context.Done() }
func (p *probeCtx) Value(key any) any     { p.uses.Add(1); return p.Context.Value(key) }

// Once CaptureLimit has looked a visible job up at call start, Finalize bounds the
// result by what it found without asking the registry again — for a job without
// an outputLimitBytes as for one with it (whose result it still bounds). Without
// a capture (a call with no id) Finalize does look the job up, through its ctx:
// the probe sees that lookup. Fails with Finalize looking up again a job whose
// absent limit was not captured (job_output's redundant second Get).
func TestFinalizeDoesNotLookUpACapturedJobAgain(t *testing.T) {
	sys, _ := troupetest.NewSystem(t)
	m, err := jobtools.MountIn(t.Context(), sys.Jobs(), sys.Scope(), jobtools.DefaultConfig())
	require.NoError(t, err)
	start := func(limit *int64) string {
		p := troupetest.NewProducer()
		p.Stream = true
		p.OnCancel = &job.Outcome{Status: job.Killed}
		p.Emit(strings.Repeat("output line\n", 10))
		spec := p.Spec(nil)
		spec.OutputLimitBytes = limit
		id, err := sys.Jobs().Start(context.Background(), spec)
		require.NoError(t, err)
		return id
	}
	limit := int64(20)
	for _, tc := range []struct {
		name  string
		id    string
		bound bool
	}{{"no limit", start(nil), false}, {"limit", start(&limit), true}} {
		args, _ := json.Marshal(map[string]any{"job_id": tc.id})
		call := tools.Call{ID: "c-" + tc.name, Name: jobtools.NameOutput, Args: args}
		_, err := m.CaptureLimit(t.Context(), &call)
		require.NoError(t, err)
		res := m.Output().Execute(t.Context(), call)
		require.False(t, res.IsError, "%s: %v", tc.name, res.Content)
		probe := &probeCtx{Context: t.Context()}
		got := m.Finalize(probe, call, res)
		require.Zero(t, probe.uses.Load(), "%s: Finalize asked the registry again", tc.name)
		want := res
		if tc.bound {
			want = jobtools.Bound(jobtools.NameOutput, res, int(limit))
			require.NotEqual(t, res, want, "the limit bounds this result")
		}
		require.Equal(t, want, got, tc.name)

		uncaptured := call
		uncaptured.ID = ""
		probe = &probeCtx{Context: t.Context()}
		require.Equal(t, want, m.Finalize(probe, uncaptured, res), "%s, not captured", tc.name)
		require.NotZero(t, probe.uses.Load(), "%s: an uncaptured call's Finalize looks the job up", tc.name)
	}
}
