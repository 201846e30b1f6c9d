package spec

import (
	"errors"
	"github.com/troupe-rt/troupe/actors/registry"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/tools/jobtools"
	"github.com/troupe-rt/troupe/troupetest"
)

// SPEC §3.6 outputLimitBytes and the finalize step (cases 80, 81, 83, 85, 86).

// limited returns a producer's spec with an output limit.
func limited(p *troupetest.Producer, limit int64) job.Spec {
	s := p.Spec(nil)
	s.OutputLimitBytes = &limit
	return s
}

// longError is a roughly 1300-character error message.
func longError(what string) error {
	return errors.New(what + " failed: " + strings.Repeat("stack frame at producer.go:42; ", 42))
}

func requireBounded(t *testing.T, s string, limit int) {
	t.Helper()
	require.LessOrEqual(t, len(s), limit, "%q", s)
	require.True(t, utf8.ValidString(s), "%q", s)
}

func TestSpec080_OutputTruncatedToTheLimitKeepingStatus(t *testing.T) {
	e := serveTools(t, jobtools.Config{})
	p := live()
	p.Stream = true
	p.Emit(strings.Repeat("界", 100))
	start(t, e.sys, limited(p, 48))

	got := okText(t, e.call(ctx(t), "", "job_output", `{"job_id":"bash-1"}`))
	requireBounded(t, got, 48)
	require.Contains(t, got, "[output truncated]")
	require.Contains(t, got, "[status: running]")
	require.Equal(t, "界界界\n[output truncated]\n[status: running]", got) // SPEC §3.6's example
}

func TestSpec081_OutputWithinTheLimitIsUnchanged(t *testing.T) {
	e := serveTools(t, jobtools.Config{})
	p := live()
	p.Stream = true
	p.Emit("", "line\n")
	start(t, e.sys, limited(p, 64))

	require.Equal(t, "(no new output)\n[status: running]", okText(t, e.call(ctx(t), "", "job_output", `{"job_id":"bash-1"}`)))
	require.Equal(t, "line\n[status: running]", okText(t, e.call(ctx(t), "", "job_output", `{"job_id":"bash-1"}`)))
}

func TestSpec083_ReadFailureIsBoundedToTheLimit(t *testing.T) {
	e := serveTools(t, jobtools.Config{})
	readErr := longError("read")
	require.Greater(t, len(readErr.Error()), 1250)
	done := make(chan job.Outcome, 1)
	limit := int64(64)
	id := start(t, e.sys, job.Spec{Kind: "bash", Label: "noisy", OutputLimitBytes: &limit, Run: func() (job.Hooks, error) {
		return job.Hooks{
			Done:       done,
			Cancel:     func(string) error { return nil },
			ReadOutput: func() (string, error) { return "", readErr },
		}, nil
	}})

	got := errText(t, e.call(ctx(t), "", "job_output", `{"job_id":"bash-1"}`))
	requireBounded(t, got, 64)
	require.Contains(t, got, "[result truncated]")
	require.True(t, strings.HasSuffix(got, "\n[result truncated]"), "%q", got)
	require.True(t, strings.HasSuffix("Error: "+readErr.Error(), strings.TrimSuffix(got, "\n[result truncated]")),
		"the tail of the error is kept: %q", got)

	// No limit is found for a caller who cannot see the job (SPEC §3.6): the
	// error is not bounded.
	owned := troupetest.NewProducer()
	alice, _ := e.agent(t, nil, "alice")
	ownedSpec := owned.Spec(alice)
	ownedSpec.OutputLimitBytes = &limit
	foreign := start(t, e.sys, ownedSpec)
	e.agent(t, nil, "bob")
	msg := errText(t, e.call(ctx(t), "bob", "job_output", `{"job_id":"`+foreign+`"}`))
	require.Equal(t, "Error: job "+foreign+" belongs to another session", msg)

	done <- job.Outcome{Status: job.Completed}
	troupetest.Settled(t, e.sys, id, registry.NoCaller)
	owned.Settle(job.Outcome{Status: job.Completed})
	troupetest.Settled(t, e.sys, foreign, asSession("alice"))
}

func TestSpec085_KillAckBoundedByATinyLimit(t *testing.T) {
	e := serveTools(t, jobtools.Config{})
	p := live()
	id := start(t, e.sys, limited(p, 8))

	got := okText(t, e.call(ctx(t), "", "job_kill", `{"job_id":"bash-1"}`))
	requireBounded(t, got, 8)
	require.Equal(t, "uncated]", got) // the last 8 bytes of `\n[result truncated]`
	require.Equal(t, []string{""}, p.Cancels(), "no reason: cancel gets the empty reason")
	troupetest.Settled(t, e.sys, id, registry.NoCaller)
}

func TestSpec086_CancelFailureIsBoundedAndChangesNothing(t *testing.T) {
	e := serveTools(t, jobtools.Config{})
	p := troupetest.NewProducer()
	p.CancelErr = longError("cancel")
	id := start(t, e.sys, limited(p, 64))

	got := errText(t, e.call(ctx(t), "", "job_kill", `{"job_id":"bash-1","reason":"superseded"}`))
	requireBounded(t, got, 64)
	require.Contains(t, got, "[result truncated]")
	require.Equal(t, snapView{"running", false}, view(get(t, e.sys, id, "")))
	require.Equal(t, []string{"superseded"}, p.Cancels())

	p.Settle(job.Outcome{Status: job.Completed})
	troupetest.Settled(t, e.sys, id, registry.NoCaller)
}
