package spec

import (
	"context"
	"github.com/troupe-rt/troupe/actors/registry"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/tools/jobtools"
	"github.com/troupe-rt/troupe/troupetest"
)

// SPEC §3.1 config and load, §3.10 prompt section (cases 65–69, 110).

func TestSpec065_ConfigSchemaDefaultsAndRejections(t *testing.T) {
	cfg, err := jobtools.ParseConfig([]byte(`{}`))
	require.NoError(t, err)
	r, err := cfg.Resolve()
	require.NoError(t, err)
	require.Equal(t, jobtools.Wakeup, r.CompletionDelivery)
	require.Equal(t, 3, r.MaxConsecutiveWakes)

	for _, bad := range []string{`{"completionDelivery":"loud"}`, `{"maxConsecutiveWakes":0}`} {
		_, err := jobtools.ParseConfig([]byte(bad))
		requireCode(t, err, messages.ErrInvalidConfig, "")
	}
	// The same checks hold for a config built in Go (SPEC §1.3 rule 18).
	loud := jobtools.Delivery("loud")
	requireCode(t, jobtools.Config{CompletionDelivery: &loud}.Validate(), messages.ErrInvalidConfig, "")
	requireCode(t, jobtools.Config{MaxConsecutiveWakes: i64(0)}.Validate(), messages.ErrInvalidConfig, "")
}

func TestSpec066_WaitDefaultAboveCapFailsToLoad(t *testing.T) {
	sys, _ := troupetest.NewSystem(t)
	_, err := sys.Jobs().MountAgents(context.Background(), sys.Scope())
	require.NoError(t, err)
	_, err = jobtools.MountIn(t.Context(), sys.Jobs(), sys.Scope(), jobtools.Config{WaitTimeoutMs: i64(100), MaxWaitTimeoutMs: i64(50)})
	require.ErrorIs(t, err, messages.ErrInvalidConfig)
	require.ErrorContains(t, err, "waitTimeoutMs (100) exceeds maxWaitTimeoutMs (50)")
	require.Equal(t, "tool-jobs: waitTimeoutMs (100) exceeds maxWaitTimeoutMs (50)", err.Error())

	// A refused load attached nothing: no controller serves a start.
	_, err = sys.Jobs().Start(context.Background(), live().Spec(nil))
	requireHinted(t, err, prefixNoController)

	// Equal values are fine.
	m, err := jobtools.MountIn(t.Context(), sys.Jobs(), sys.Scope(), jobtools.Config{WaitTimeoutMs: i64(50), MaxWaitTimeoutMs: i64(50)})
	require.NoError(t, err)
	require.NoError(t, m.Dispose(ctx(t)))
}

func TestSpec067_MaxConsecutiveWakesMustBeWholeTurns(t *testing.T) {
	// Infinity and 2.5 exist only in JSON configs (SPEC §1.3 rule 17): 1e999 is the
	// JSON number that overflows to Infinity when read as a double.
	for _, raw := range []string{`{"maxConsecutiveWakes":2.5}`, `{"maxConsecutiveWakes":1e999}`} {
		_, err := jobtools.ParseConfig([]byte(raw))
		require.ErrorIs(t, err, messages.ErrInvalidConfig, raw)
		require.ErrorContains(t, err, "maxConsecutiveWakes", raw)
	}
	_, err := jobtools.ParseConfig([]byte(`{"maxConsecutiveWakes":2.5}`))
	require.EqualError(t, err, "tool-jobs: maxConsecutiveWakes (2.5) must be a whole number of turns")

	sys, _ := troupetest.NewSystem(t)
	// In Go the value is an integer; one above 2^53−1 is not a safe integer.
	_, err = jobtools.MountIn(t.Context(), sys.Jobs(), sys.Scope(), jobtools.Config{MaxConsecutiveWakes: i64(1 << 53)})
	require.EqualError(t, err, "tool-jobs: maxConsecutiveWakes (9007199254740992) must be a whole number of turns")

	cfg, err := jobtools.ParseConfig([]byte(`{"maxConsecutiveWakes":1}`))
	require.NoError(t, err)
	m, err := jobtools.MountIn(t.Context(), sys.Jobs(), sys.Scope(), cfg)
	require.NoError(t, err)
	require.Equal(t, 1, m.Config().MaxConsecutiveWakes)
}

func TestSpec068_DisposingTheMountDisarmsStart(t *testing.T) {
	sys, _ := troupetest.NewSystem(t)
	_, err := sys.Jobs().MountAgents(context.Background(), sys.Scope())
	require.NoError(t, err)
	preset := childScope(t, sys.Scope(), "preset")
	m, err := jobtools.MountIn(t.Context(), sys.Jobs(), preset, jobtools.Config{})
	require.NoError(t, err)
	alice := agentUnder(t, sys, preset, "alice")

	p := live()
	id := start(t, sys, p.Spec(alice))
	require.Equal(t, "bash-1", id)

	require.NoError(t, m.Dispose(ctx(t)))
	require.Zero(t, countLabel(preset, "jobs.controller(tool-jobs)"))
	_, err = sys.Jobs().Start(context.Background(), live().Spec(alice))
	requireHinted(t, err, prefixNoController)
	require.NoError(t, m.Dispose(ctx(t)), "Dispose is idempotent")
}

func TestSpec069_ZeroConfigMountServesTools(t *testing.T) {
	sys, _ := troupetest.NewSystem(t)
	_, err := sys.Jobs().MountAgents(context.Background(), sys.Scope())
	require.NoError(t, err)
	preset := childScope(t, sys.Scope(), "preset")
	m, err := jobtools.MountIn(t.Context(), sys.Jobs(), preset, jobtools.Config{})
	require.NoError(t, err)

	names := []string{}
	for _, tl := range m.All() {
		names = append(names, tl.Name)
	}
	require.Contains(t, names, "job_output")
	require.Equal(t, []string{"job_output", "job_list", "job_kill"}, names)
	require.Equal(t, jobtools.Resolved{
		WaitTimeoutMs: 30000, MaxWaitTimeoutMs: 600000, CompletionDelivery: jobtools.Wakeup, MaxConsecutiveWakes: 3,
	}, m.Config())

	alice := agentUnder(t, sys, preset, "alice")
	p := troupetest.NewProducer()
	require.Equal(t, "bash-1", start(t, sys, p.Spec(alice)))
	p.Settle(job.Outcome{Status: job.Completed})
	troupetest.Settled(t, sys, "bash-1", registry.AsAgent(alice))
}

func TestSpec110_PromptSectionAndToolDescriptions(t *testing.T) {
	e := serveTools(t, jobtools.Config{})
	name, txt := e.mount.PromptSection()
	require.Equal(t, "tool:jobs", name)
	require.Equal(t, "Track every background job id you start. You are notified in-session when a job finishes — do not busy-poll or sleep on one; keep working on independent steps and do not duplicate a running job's work. Before giving a final answer, collect every still-relevant job with job_output (set wait: true only when you are genuinely blocked on it), and job_kill jobs that stopped mattering.", txt)

	desc := map[string]string{}
	for _, tl := range e.mount.All() {
		desc[tl.Name] = tl.Description
	}
	require.Equal(t, map[string]string{
		"job_output": "Read a background job. Stream jobs return only output since the previous read; final-output jobs return their result after settlement. Every response ends with `[status: ...]`. Reads are non-blocking unless `wait: true`, which waits up to the configured cap.",
		"job_list":   "List your background jobs (running and finished) with their ids, kinds, and statuses.",
		"job_kill":   "Request cancellation of a running background job by job id. Returns immediately; the job settles as killed once its work actually stops.",
	}, desc)
}
