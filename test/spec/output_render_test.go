package spec

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/producers/output"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/tools/jobtools"
	"github.com/troupe-rt/troupe/troupetest"
)

// bufferJob is a stream producer over troupe's bounded output buffer (what the shell
// and PTY producers use), so the model's delta renders as SPEC §3.12 renders it.
func bufferJob(buf *output.Buffer) job.Spec {
	done := make(chan job.Outcome, 1)
	return job.Spec{Kind: "bash", Label: "render", Run: func() (job.Hooks, error) {
		return job.Hooks{
			Cancel:     func(string) error { done <- job.Outcome{Status: job.Killed}; return nil },
			Done:       done,
			ReadOutput: buf.ReadDelta,
		}, nil
	}}
}

func jobOutput(t *testing.T, m *jobtools.Mount, id string) string {
	t.Helper()
	args, err := json.Marshal(map[string]any{"job_id": id})
	require.NoError(t, err)
	res := m.Pipeline().Run(context.Background(), m.Output(), tools.Call{ID: "c-" + id, Name: jobtools.NameOutput, Args: args})
	require.False(t, res.IsError)
	text, ok := res.SingleText()
	require.True(t, ok)
	return text
}

func TestSpec116_StderrSectionAndLogChannelStayOutOfTheModelsView(t *testing.T) {
	sys, _ := troupetest.NewSystem(t)
	m, err := jobtools.MountIn(t.Context(), sys.Jobs(), sys.Scope(), jobtools.DefaultConfig())
	require.NoError(t, err)
	buf := output.New(0)
	id, err := sys.Jobs().Start(context.Background(), bufferJob(buf))
	require.NoError(t, err)
	buf.Write(output.Stdout, []byte("out\n"))
	buf.Write(output.Stderr, []byte("warn\n"))
	buf.Write(output.Log, []byte("narrating for the human\n"))
	require.Equal(t, "out\n[stderr]\nwarn\n[status: running]", jobOutput(t, m, id))
	require.Equal(t, "(no new output)\n[status: running]", jobOutput(t, m, id))
}

func TestSpec117_DroppedOutputLineWhenRetentionEvicted(t *testing.T) {
	sys, _ := troupetest.NewSystem(t)
	m, err := jobtools.MountIn(t.Context(), sys.Jobs(), sys.Scope(), jobtools.DefaultConfig())
	require.NoError(t, err)
	buf := output.New(16)
	id, err := sys.Jobs().Start(context.Background(), bufferJob(buf))
	require.NoError(t, err)
	buf.Write(output.Stdout, []byte(strings.Repeat("x", 40)))
	text := jobOutput(t, m, id)
	require.Contains(t, text, "[some output was dropped from memory; full output: (unavailable)]")
	require.Contains(t, text, "[status: running]")
	require.NotContains(t, text, strings.Repeat("x", 17))
	require.Equal(t, "(no new output)\n[status: running]", jobOutput(t, m, id))
}
