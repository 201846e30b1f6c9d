package spec

import (
	"encoding/json"
	"github.com/troupe-rt/troupe/actors/registry"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/tools/jobtools"
	"github.com/troupe-rt/troupe/troupetest"
)

// SPEC §3.2–§3.4: job_output, job_list, job_kill (cases 70–78).

func TestSpec070_StatusLine(t *testing.T) {
	detail := "exit code: 0"
	running := &messages.JobSnapshot{Id: "bash-1", Kind: "bash", Label: "x", Status: job.Running}
	completed := &messages.JobSnapshot{Id: "bash-1", Kind: "bash", Label: "x", Status: job.Completed, Detail: &detail}
	require.Equal(t, "[status: running]", jobtools.StatusLine(running))
	require.Equal(t, "[status: completed, exit code: 0]", jobtools.StatusLine(completed))
	require.Equal(t, "[status: running]", jobtools.Public(running).StatusLine())
	require.Equal(t, "[status: completed, exit code: 0]", jobtools.Public(completed).StatusLine())
}

func TestSpec071_StreamReadIsConsumingWithPublicValue(t *testing.T) {
	e := serveTools(t, jobtools.Config{})
	alice, _ := e.agent(t, nil, "alice")
	p := live()
	p.Stream, p.Label = true, "sleep 60"
	p.Emit("line one\n")
	id := start(t, e.sys, p.Spec(alice))
	require.Equal(t, "bash-1", id)

	res := e.call(ctx(t), "alice", "job_output", `{"job_id":"bash-1"}`)
	require.Equal(t, "line one\n[status: running]", okText(t, res))
	v, ok := res.Value.(jobtools.OutputValue)
	require.True(t, ok, "value %T", res.Value)
	require.Equal(t, jobtools.OutputValue{Text: "line one\n", Job: jobtools.PublicJob{
		ID: "bash-1", Kind: "bash", Label: "sleep 60", Status: "running", StartedAt: v.Job.StartedAt,
	}}, v)
	raw, err := json.Marshal(v.Job)
	require.NoError(t, err)
	var keys map[string]any
	require.NoError(t, json.Unmarshal(raw, &keys))
	require.ElementsMatch(t, []string{"id", "kind", "label", "status", "startedAt"}, mapKeys(keys),
		"the public projection has no ownerSession, reported or outputLimitBytes")

	res = e.call(ctx(t), "alice", "job_output", `{"job_id":"bash-1"}`)
	require.Equal(t, "(no new output)\n[status: running]", okText(t, res))
}

func mapKeys(m map[string]any) []string {
	out := []string{}
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestSpec072_FinalOutputReadBeforeAndAfterSettling(t *testing.T) {
	e := serveTools(t, jobtools.Config{})
	p := troupetest.NewProducer()
	p.Kind, p.Label = "subagent", "research"
	id := start(t, e.sys, p.Spec(nil))
	require.Equal(t, "subagent-1", id)

	res := e.call(ctx(t), "", "job_output", `{"job_id":"subagent-1"}`)
	require.Equal(t, "(no new output)\n[status: running]", okText(t, res))

	p.Settle(job.Outcome{Status: job.Completed, Detail: "completed", Output: "the answer"})
	troupetest.Settled(t, e.sys, id, registry.NoCaller)
	for range 2 { // a final output is returned idempotently
		res = e.call(ctx(t), "", "job_output", `{"job_id":"subagent-1"}`)
		require.Equal(t, "the answer\n[status: completed, completed]", okText(t, res))
	}
}

func TestSpec073_WaitReturnsSettledFinalOutput(t *testing.T) {
	e := serveTools(t, jobtools.Config{})
	p := troupetest.NewProducer()
	p.Kind, p.Label = "subagent", "research"
	id := start(t, e.sys, p.Spec(nil))

	out := make(chan tools.Result, 1)
	go func() { out <- e.call(ctx(t), "", "job_output", `{"job_id":"`+id+`","wait":true}`) }()
	troupetest.AwaitWaiters(t, e.sys, id, 1)
	p.Settle(job.Outcome{Status: job.Completed, Output: "done deal"})
	require.Equal(t, "done deal\n[status: completed]", okText(t, recv(t, out)))
}

func TestSpec074_WaitIsCappedByMaxWaitTimeout(t *testing.T) {
	e := serveTools(t, jobtools.Config{WaitTimeoutMs: i64(10), MaxWaitTimeoutMs: i64(20)})
	id := start(t, e.sys, live().Spec(nil)) // never settles on its own

	begin := time.Now()
	res := e.call(ctx(t), "", "job_output", `{"job_id":"`+id+`","wait":true,"timeout_ms":600000}`)
	took := time.Since(begin)
	require.Equal(t, "(no new output)\n[status: running]", okText(t, res))
	// The wait's deadline is min(600000, 20) ms: it cannot fire earlier, and a
	// generous bound shows it was not the requested ten minutes.
	require.GreaterOrEqual(t, took, 20*time.Millisecond)
	require.Less(t, took, 5*time.Second)
	require.Equal(t, snapView{"running", false}, view(get(t, e.sys, id, "")))
}

func TestSpec075_EmptyAndUnknownJobIDsAreErrored(t *testing.T) {
	e := serveTools(t, jobtools.Config{})
	require.Equal(t, `Error: invalid job_id: expected a non-empty string, got ""`,
		errText(t, e.call(ctx(t), "", "job_output", `{"job_id":""}`)))
	require.Equal(t, "Error: unknown job bash-99",
		errText(t, e.call(ctx(t), "", "job_output", `{"job_id":"bash-99"}`)))
	// job_kill refuses an empty id the same way (SPEC §3.4).
	require.Equal(t, `Error: invalid job_id: expected a non-empty string, got ""`,
		errText(t, e.call(ctx(t), "", "job_kill", `{"job_id":""}`)))
}

func TestSpec076_ListIsFencedAndInRegistrationOrder(t *testing.T) {
	e := serveTools(t, jobtools.Config{})
	alice, _ := e.agent(t, nil, "alice")
	require.Equal(t, "(no background jobs)", okText(t, e.call(ctx(t), "alice", "job_list", `{}`)))

	pnpm := live()
	pnpm.Label = "pnpm test"
	require.Equal(t, "bash-1", start(t, e.sys, pnpm.Spec(alice)))
	research := live()
	research.Kind, research.Label = "subagent", "open research"
	require.Equal(t, "subagent-1", start(t, e.sys, research.Spec(nil)))
	build := troupetest.NewProducer()
	build.Label = "build"
	require.Equal(t, "bash-2", start(t, e.sys, build.Spec(alice)))
	build.Settle(job.Outcome{Status: job.Completed, Detail: "exit code: 0"})
	troupetest.Settled(t, e.sys, "bash-2", asSession("alice"))

	res := e.call(ctx(t), "alice", "job_list", `{}`)
	require.Equal(t, "bash-1 [bash] running — pnpm test\nsubagent-1 [subagent] running — open research\nbash-2 [bash] completed — build", okText(t, res))
	v, ok := res.Value.([]jobtools.PublicJob)
	require.True(t, ok, "value %T", res.Value)
	require.Len(t, v, 3)
	require.Equal(t, "exit code: 0", *v[2].Detail, "the value keeps the detail the text leaves out")

	e.agent(t, nil, "bob")
	require.Equal(t, "subagent-1 [subagent] running — open research", okText(t, e.call(ctx(t), "bob", "job_list", `{}`)))
}

func TestSpec077_KillRequestsCancellation(t *testing.T) {
	e := serveTools(t, jobtools.Config{})
	p := live()
	id := start(t, e.sys, p.Spec(nil))

	res := e.call(ctx(t), "", "job_kill", `{"job_id":"bash-1","reason":"superseded"}`)
	require.Equal(t, "requested cancellation of job bash-1", okText(t, res))
	v, ok := res.Value.(jobtools.KillValue)
	require.True(t, ok, "value %T", res.Value)
	require.Equal(t, "cancellation-requested", v.Outcome)
	require.Equal(t, "bash-1", v.Job.ID)
	require.Equal(t, "stopping", v.Job.Status)
	require.Equal(t, []string{"superseded"}, p.Cancels())
	troupetest.Settled(t, e.sys, id, registry.NoCaller)
}

func TestSpec078_KillOfFinishedJobLeavesTheDeltaUnread(t *testing.T) {
	e := serveTools(t, jobtools.Config{})
	p := troupetest.NewProducer()
	p.Stream = true
	p.Emit("unread tail")
	id := start(t, e.sys, p.Spec(nil))
	p.Settle(job.Outcome{Status: job.Completed, Detail: "exit code: 0"})
	troupetest.Settled(t, e.sys, id, registry.NoCaller)

	res := e.call(ctx(t), "", "job_kill", `{"job_id":"bash-1"}`)
	require.Equal(t, "job bash-1 had already finished [status: completed, exit code: 0]", okText(t, res))
	require.Equal(t, "already-finished", res.Value.(jobtools.KillValue).Outcome)
	require.Empty(t, p.Cancels(), "a finished job's cancel is not called")

	res = e.call(ctx(t), "", "job_output", `{"job_id":"bash-1"}`)
	require.Equal(t, "unread tail\n[status: completed, exit code: 0]", okText(t, res))
}
