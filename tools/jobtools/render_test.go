package jobtools

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/tools"
)

// The pinned examples of SPEC §3.2–§3.4 (texts), §3.6 (truncation) and §3.7
// (notice text, summary and bounding).

func snap(id, kind, label string, status messages.JobStatus, detail ...string) *messages.JobSnapshot {
	s := &messages.JobSnapshot{Id: id, Kind: kind, Label: label, Status: status}
	if len(detail) > 0 {
		s.Detail = &detail[0]
	}
	return s
}

const (
	running   = messages.JobStatus_JOB_STATUS_RUNNING
	completed = messages.JobStatus_JOB_STATUS_COMPLETED
)

func TestOutputTextExamples(t *testing.T) {
	run := snap("bash-1", "bash", "sleep 60", running)
	require.Equal(t, "line one\n[status: running]", OutputText("line one\n", run))
	require.Equal(t, "line one\n[status: running]", OutputText("line one", run))
	require.Equal(t, "(no new output)\n[status: running]", OutputText("", run))
	require.Equal(t, "the answer\n[status: completed, completed]", OutputText("the answer", snap("subagent-1", "subagent", "research", completed, "completed")))
	require.Equal(t, "done deal\n[status: completed]", OutputText("done deal", snap("subagent-1", "subagent", "research", completed)))
}

func TestListAndKillTexts(t *testing.T) {
	require.Equal(t, "(no background jobs)", ListText(nil))
	require.Equal(t, "bash-1 [bash] running — pnpm test\nbash-2 [bash] completed — build",
		ListText([]*messages.JobSnapshot{snap("bash-1", "bash", "pnpm test", running), snap("bash-2", "bash", "build", completed, "exit code: 0")}))
	done := snap("bash-1", "bash", "x", completed, "exit code: 0")
	require.Equal(t, "job bash-1 had already finished [status: completed, exit code: 0]",
		KillText(messages.KillResult_KILL_RESULT_ALREADY_FINISHED, done))
	require.Equal(t, "requested cancellation of job bash-1",
		KillText(messages.KillResult_KILL_RESULT_REQUESTED, snap("bash-1", "bash", "x", messages.JobStatus_JOB_STATUS_STOPPING)))
}

func TestTruncateOutputPinnedExample(t *testing.T) {
	got := TruncateOutput(strings.Repeat("界", 100), "[status: running]", 48)
	require.Equal(t, "界界界\n[output truncated]\n[status: running]", got)
	require.Len(t, got, 46)
}

func TestTruncateKillAckPinnedExample(t *testing.T) {
	require.Equal(t, "uncated]", TruncateResult("requested cancellation of job bash-1", 8))
	res := Bound(NameKill, tools.TextResult("requested cancellation of job bash-1", KillValue{}), 8)
	require.Equal(t, "uncated]", res.Content[0].Text)
}

func TestTruncationRules(t *testing.T) {
	status := "[status: running]"
	// Fits: unchanged, at the exact limit too.
	full := "abc\n" + status
	require.Equal(t, full, TruncateOutput("abc", status, len(full)))
	require.Equal(t, "yz\n[output truncated]\n"+status, TruncateOutput("abcdefghijklmnopqrstuvwxyz", status, 39))
	// An existing producer marker is reused, not doubled.
	content := strings.Repeat("x", 100) + "\n[output truncated]"
	got := TruncateOutput(content, status, 60)
	require.Equal(t, 1, strings.Count(got, "[output truncated]"))
	require.True(t, strings.HasSuffix(got, "[output truncated]\n"+status), "%q", got)
	require.LessOrEqual(t, len(got), 60)
	// The fixed part alone too big: its tail.
	require.Equal(t, "ted]\n"+status, TruncateOutput("abcdefghijklmnopqrstuvwxyz", status, len(status)+5))
	// Results: tail plus marker, marker reused, limit 0 unbounded.
	require.Equal(t, "89\n[result truncated]", TruncateResult(strings.Repeat("0123456789", 4), 21))
	require.Equal(t, "9[result truncated]", TruncateResult("0123456789[result truncated]", 19))
	require.Equal(t, "0123456789", TruncateResult("0123456789", 0))
	// UTF-8 safety: a cut never splits a rune.
	for limit := 1; limit < 40; limit++ {
		got := TruncateResult(strings.Repeat("界", 30), limit)
		require.True(t, utf8.ValidString(got), "limit %d: %q", limit, got)
		require.LessOrEqual(t, len(got), limit)
	}
}

func TestBoundFollowsTheFinalizeRules(t *testing.T) {
	run := snap("bash-1", "bash", "x", running)
	long := strings.Repeat("y", 200)
	canonical := tools.TextResult(OutputText(long, run), OutputValue{Text: long, Job: Public(run)})

	// Rule 1: a canonical job_output success keeps its status line.
	got := Bound(NameOutput, canonical, 60)
	require.Equal(t, strings.Repeat("y", 60-len("\n[output truncated]\n[status: running]"))+"\n[output truncated]\n[status: running]", got.Content[0].Text)
	require.Equal(t, canonical.Value, got.Value)

	// Rule 2: a replaced text, an error, or a job_kill result is tail-bounded with
	// [result truncated]; a replacement loses the status line.
	replaced := canonical
	replaced.Content = []tools.Block{{Type: "text", Text: "policy says: " + long}}
	got = Bound(NameOutput, replaced, 60)
	require.True(t, strings.HasSuffix(got.Content[0].Text, "\n[result truncated]"))
	require.NotContains(t, got.Content[0].Text, "[status:")
	errored := Bound(NameOutput, tools.ErrorResult(errors.New(long)), 40)
	require.True(t, errored.IsError)
	require.Equal(t, strings.Repeat("y", 40-19)+"\n[result truncated]", errored.Content[0].Text)

	// Rule 3: multi-block or non-text content is returned unchanged.
	multi := tools.Result{Content: []tools.Block{{Type: "text", Text: long}, {Type: "text", Text: long}}}
	require.Equal(t, multi, Bound(NameOutput, multi, 10))
	reasoning := tools.Result{Content: []tools.Block{{Type: "reasoning", Text: long}}}
	require.Equal(t, reasoning, Bound(NameOutput, reasoning, 10))
}

// The finalize step applies whatever produced the result: a pre-hook denial, a
// short-circuited canonical value, a post replacement, a panic.
func TestFinalStepBoundsEveryProducer(t *testing.T) {
	run := snap("bash-1", "bash", "x", running)
	long := strings.Repeat("z", 300)
	final := func(_ context.Context, call tools.Call, res tools.Result) tools.Result {
		return Bound(call.Name, res, 64)
	}
	tool := tools.Tool{Name: NameOutput, Execute: func(context.Context, tools.Call) tools.Result {
		return tools.TextResult(OutputText(long, run), OutputValue{Text: long, Job: Public(run)})
	}}
	call := tools.Call{ID: "c1", Name: NameOutput, Args: []byte(`{"job_id":"bash-1"}`)}

	p := &tools.Pipeline{}
	p.AddFinal(final)
	out := p.Run(context.Background(), tool, call)
	require.True(t, strings.HasSuffix(out.Content[0].Text, "[output truncated]\n[status: running]"))

	deny := &tools.Pipeline{}
	deny.AddPre(func(context.Context, *tools.Call) (*tools.Result, error) { return nil, errors.New("denied: " + long) })
	deny.AddFinal(final)
	out = deny.Run(context.Background(), tool, call)
	require.True(t, out.IsError)
	require.LessOrEqual(t, len(out.Content[0].Text), 64)
	require.Contains(t, out.Content[0].Text, "[result truncated]")

	short := &tools.Pipeline{}
	short.AddPre(func(context.Context, *tools.Call) (*tools.Result, error) {
		r := tools.TextResult(OutputText(long, run), OutputValue{Text: long, Job: Public(run)})
		return &r, nil
	})
	short.AddFinal(final)
	out = short.Run(context.Background(), tool, call)
	require.Contains(t, out.Content[0].Text, "[output truncated]", "a short-circuited canonical success keeps the output marker")

	boom := &tools.Pipeline{}
	boom.AddAround(func(context.Context, tools.Call, func(context.Context, tools.Call) tools.Result) tools.Result {
		panic("around exploded: " + long)
	})
	boom.AddFinal(final)
	out = boom.Run(context.Background(), tool, call)
	require.True(t, out.IsError)
	require.LessOrEqual(t, len(out.Content[0].Text), 64)
	require.Contains(t, out.Content[0].Text, "[result truncated]")
}

func TestNoticeText(t *testing.T) {
	s := snap("bash-1", "bash", "pnpm test", completed, "exit code: 0")
	require.Equal(t, "background job bash-1 (bash: pnpm test) finished [status: completed, exit code: 0]. Read its output with job_output.", NoticeText(s))
	require.Equal(t, NoticeText(s), BoundNotice(s, 0))
	require.Equal(t, NoticeText(s), BoundNotice(s, len(NoticeText(s))))
	require.Equal(t, "bash pnpm test [status: completed, exit code: 0]", Summary(s))
}

func TestBoundNoticePinnedTable(t *testing.T) {
	x, d := strings.Repeat("x", 1000), strings.Repeat("d", 1000)
	longPty := strings.Repeat("printf hello; ", 20)
	for _, c := range []struct {
		limit int
		s     *messages.JobSnapshot
		want  string
	}{
		{61, snap("subagent-1", "subagent", x, completed, d), "background job subagent-1\nDone; job_output."},
		{64, snap("pty-send-100", "pty-send", longPty, completed, d), "background job pty-send-100\n[notice truncated]\nDone; job_output."},
		{8, snap("subagent-1", "subagent", x, completed, d), "_output."},
		{32, snap("pty-send-100", "pty-send", longPty, completed), "background job\nDone; job_output."},
		{80, snap("subagent-2", "subagent", x, completed, d), "background job subagent-2 (subagent: xxxxxx\n[notice truncated]\nDone; job_output."},
	} {
		got := BoundNotice(c.s, c.limit)
		require.Equal(t, c.want, got, "limit %d", c.limit)
		require.LessOrEqual(t, len(got), c.limit)
	}
	// 80 as SPEC states it: contains the head of the detail, ends with marker+action.
	got := BoundNotice(snap("subagent-2", "subagent", x, completed, d), 80)
	require.Contains(t, got, "background job subagent-2 (subagent: xxxx")
	require.True(t, strings.HasSuffix(got, "[notice truncated]\nDone; job_output."))
}

func TestSummaryIs120UTF16Units(t *testing.T) {
	units := func(s string) int { return len(utf16.Encode([]rune(s))) }
	// 1000-char label: 119 units kept, then the ellipsis.
	got := Summary(snap("subagent-1", "subagent", strings.Repeat("x", 1000), completed, "d"))
	require.Equal(t, "subagent "+strings.Repeat("x", 110)+"…", got)
	require.Equal(t, 120, units(got))

	// Exactly 120 units: unchanged; 121: cut.
	exact := snap("a", "k", strings.Repeat("y", 120-len("k  [status: running]")), running)
	require.Equal(t, 120, units("k "+exact.Label+" [status: running]"))
	require.Equal(t, "k "+exact.Label+" [status: running]", Summary(exact))
	over := snap("a", "k", exact.Label+"y", running)
	require.True(t, strings.HasSuffix(Summary(over), "…"))
	require.Equal(t, 120, units(Summary(over)))

	// A surrogate pair at units 119–120 (1-based) would be split: keep 118.
	split := snap("a", "subagent", strings.Repeat("x", 109)+"😀 tail", running)
	got = Summary(split)
	require.Equal(t, "subagent "+strings.Repeat("x", 109)+"…", got)
	require.Equal(t, 119, units(got))
	// A pair at units 118–119 fits whole: keep 119.
	whole := snap("a", "subagent", strings.Repeat("x", 108)+"😀 tail", running)
	got = Summary(whole)
	require.Equal(t, "subagent "+strings.Repeat("x", 108)+"😀…", got)
	require.Equal(t, 120, units(got))
	require.True(t, utf8.ValidString(got))
}
