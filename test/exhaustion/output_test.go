package exhaustion

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/producers/output"
	"github.com/troupe-rt/troupe/producers/process"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/tools/jobtools"
	"github.com/troupe-rt/troupe/troupetest"
)

// floodLine is the line the shell job repeats: 16 bytes, three of its runes
// multi-byte, so an eviction that cut a rune would show as invalid UTF-8.
const floodLine = "界界界abcdef\n"

// floodLines × floodLine is the 20 MiB the shell job writes.
const floodLines = 20 * mib / len(floodLine)

// floodCommand writes floodLines lines, exiting 0.
var floodCommand = fmt.Sprintf("yes '%s' | head -n %d", strings.TrimSuffix(floodLine, "\n"), floodLines)

// maxOutputHeap bounds the heap high-water above the baseline while a 20 MiB job
// nobody reads runs: retention keeps 256 KiB unread plus a 256 KiB record, so a
// bound well below the output's size shows the output is not accumulated.
const maxOutputHeap = 64 * mib

// jobOutputLimit is the outputLimitBytes of the job read through job_output.
const jobOutputLimit = 4096

// requireStreamTail requires body to be a tail of the repeated floodLine stream
// that ends at a line's end.
func requireStreamTail(t *testing.T, body string) {
	t.Helper()
	require.True(t, strings.HasSuffix(strings.Repeat(floodLine, len(body)/len(floodLine)+2), body),
		"not a tail of the job's output: %q…", body[:min(len(body), 64)])
}

// TestOutputOverTheCap: a real shell job writes 20 MiB that nobody reads until it
// has ended. Reading it then returns the newest retained bytes — the retention cap
// (output.DefaultRetainBytes) give or take a rune's bytes at the cut — followed by
// output.DroppedLine, all valid UTF-8; the heap high-water during the run stays far
// below the output's size. Reading it again returns nothing (the delta was
// consumed). A second such job with outputLimitBytes, read through job_output,
// comes back bounded by the limit: the output's tail, "[output truncated]", the
// status line.
func TestOutputOverTheCap(t *testing.T) {
	sys, _ := troupetest.NewSystem(t)
	_, err := sys.Jobs().MountAgents(context.Background(), sys.Scope())
	require.NoError(t, err)
	mount, err := jobtools.MountIn(t.Context(), sys.Jobs(), sys.Scope(), jobtools.Config{})
	require.NoError(t, err)

	spec := process.Shell(floodCommand, process.Config{})
	base := liveHeap()
	watch := watchHeap()
	began := time.Now()
	id, err := sys.Jobs().Start(context.Background(), spec)
	require.NoError(t, err)
	// 20 MiB through a real shell: on a loaded 2-core box this takes seconds, so the
	// wait is bounded by this package's budget, not a test system's shutdown budget
	snap := settledWithin(t, sys, id)
	took := time.Since(began)
	peak := above(watch.Stop(), base)
	t.Logf("%d MiB written in %s; heap high-water above baseline %.1f MiB", 20, took.Round(time.Millisecond), float64(peak)/mib)
	require.Equal(t, "completed", snap.Status.Name())
	require.Equal(t, "exit code: 0", snap.GetDetail())
	_, total := spec.Record.Bounds()
	require.Equal(t, int64(floodLines*len(floodLine)), total, "bytes the job wrote")
	require.Less(t, peak, uint64(maxOutputHeap), "heap high-water above baseline")

	text, _, err := sys.Jobs().Read(context.Background(), id, registry.NoCaller)
	require.NoError(t, err)
	require.True(t, utf8.ValidString(text), "the read is not valid UTF-8")
	require.True(t, strings.HasSuffix(text, floodLine+output.DroppedLine), "no dropped-bytes marker after the last line: …%q",
		text[max(0, len(text)-128):])
	body := strings.TrimSuffix(text, output.DroppedLine)
	require.LessOrEqual(t, len(body), output.DefaultRetainBytes, "retained bytes")
	require.GreaterOrEqual(t, len(body), output.DefaultRetainBytes-(utf8.UTFMax-1), "retained bytes")
	requireStreamTail(t, body)
	again, _, err := sys.Jobs().Read(context.Background(), id, registry.NoCaller)
	require.NoError(t, err)
	require.Empty(t, again, "a second read of the consumed delta")

	limited := process.Shell(floodCommand, process.Config{})
	limited.OutputLimitBytes = new(int64(jobOutputLimit))
	id, err = sys.Jobs().Start(context.Background(), limited)
	require.NoError(t, err)
	settledWithin(t, sys, id)
	got := jobOutput(t, mount, id)
	require.True(t, utf8.ValidString(got), "job_output is not valid UTF-8")
	require.LessOrEqual(t, len(got), jobOutputLimit)
	require.GreaterOrEqual(t, len(got), jobOutputLimit-(utf8.UTFMax-1), "job_output kept less of the tail than the limit allows")
	suffix := floodLine + output.DroppedLine + "\n" + jobtools.OutputTruncated + "\n[status: completed, exit code: 0]"
	require.True(t, strings.HasSuffix(got, suffix), "job_output does not end with the marker and status: …%q", got[max(0, len(got)-160):])
	requireStreamTail(t, strings.TrimSuffix(got, output.DroppedLine+"\n"+jobtools.OutputTruncated+"\n[status: completed, exit code: 0]"))
}

// settledWithin waits, within budget, until job id has settled and returns its snapshot.
func settledWithin(t *testing.T, sys *troupe.System, id string) *messages.JobSnapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	snap, err := sys.Jobs().AwaitSettled(ctx, id, registry.NoCaller)
	require.NoError(t, err)
	return snap
}

// jobOutput calls job_output on id (no agent) through the mount's pipeline, as a
// tool runtime would, and returns its text.
func jobOutput(t *testing.T, m *jobtools.Mount, id string) string {
	t.Helper()
	var tool tools.Tool
	for _, tl := range m.All() {
		if tl.Name == "job_output" {
			tool = tl
		}
	}
	require.NotEmpty(t, tool.Name, "no job_output tool")
	args, err := json.Marshal(map[string]string{"job_id": id})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	res := m.Pipeline().Run(ctx, tool, tools.Call{ID: "call-1", Name: "job_output", Args: args})
	require.False(t, res.IsError, "job_output failed: %#v", res.Content)
	text, ok := res.SingleText()
	require.True(t, ok, "job_output is not one text block: %#v", res.Content)
	return text
}
