package workflow_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/tools/jobtools"
	"github.com/troupe-rt/troupe/tools/workflowtool"
	"github.com/troupe-rt/troupe/workflow"
	"github.com/troupe-rt/troupe/workflow/workflowtest"
)

func TestWorkflowW49_DefinitionAndPromptSection(t *testing.T) {
	e := newEnv(t)
	m := e.mount(workflowtool.Config{}, false)
	tool := m.Tool()
	require.Equal(t, "workflow", tool.Name)
	require.Equal(t, wantDescription, tool.Description)
	require.Equal(t, wantParameters, string(tool.Parameters))
	name, text := m.PromptSection()
	require.Equal(t, "tool:workflow", name)
	require.Equal(t, strings.ReplaceAll(wantPrompt, "<ToolName>", "workflow"), text)

	o := e.mount(workflowtool.Config{ToolName: str("orchestrate")}, false)
	name, text = o.PromptSection()
	require.Equal(t, "tool:orchestrate", name)
	require.True(t, strings.HasPrefix(text, "Use the orchestrate tool ONLY"), text)
	require.Equal(t, "orchestrate", o.Tool().Name)

	// background enabled: the sentence on the last line, the property last
	b := e.mount(workflowtool.Config{EnableRunInBackground: boolp(true)}, true)
	require.Equal(t, wantDescription+wantBackgroundSentence, b.Tool().Description)
	require.Equal(t, strings.Replace(wantParameters, `}},"required":["script","meta"]`, `},`+wantBackgroundProperty+`},"required":["script","meta"]`, 1),
		string(b.Tool().Parameters))
	var schema map[string]any
	require.NoError(t, json.Unmarshal(b.Tool().Parameters, &schema))

	// config errors are coded
	for _, cfg := range []workflowtool.Config{{ToolName: str("")}, {MaxResultChars: i64(0)}} {
		_, err := workflowtool.MountIn(e.sc, cfg, workflowtool.Deps{Engine: e.eng})
		require.ErrorIs(t, err, messages.ErrInvalidConfig)
	}
	_, err := workflowtool.MountIn(e.sc, workflowtool.Config{}, workflowtool.Deps{})
	require.ErrorIs(t, err, messages.ErrInvalidConfig)
}

func TestWorkflowW50_CompletedRunRendersAndDisposesEveryChild(t *testing.T) {
	e := newEnv(t)
	tool := e.mount(workflowtool.Config{}, false).Tool()
	res := e.call(testCtx(t), tool, toolArgs("await parallel([1,2,3,4,5,6,7].map(n => () => agent('p' + n)))\nreturn { findings: [1, 2] }", auditMeta))
	require.Equal(t, "workflow \"audit\" completed (7 agents).\nReturn value:\n{\n  \"findings\": [\n    1,\n    2\n  ]\n}", resultText(t, res, false))
	v, ok := res.Value.(workflowtool.Value)
	require.True(t, ok, "value %#v", res.Value)
	b, err := json.Marshal(res.Value)
	require.NoError(t, err)
	require.Equal(t, `{"runId":"`+v.RunID+`","agentsStarted":7,"result":{"findings":[1,2]}}`, string(b))
	starts := filter(e.events.All(), workflow.EventStart)
	require.Len(t, starts, 1)
	require.Equal(t, starts[0].Run.ID, v.RunID)
	runs := e.stub.Runs()
	require.Len(t, runs, 7)
	for _, r := range runs {
		require.Equal(t, 1, e.stub.Disposes(r), "stub run %s disposed before the tool returned", r.ID)
	}

	res = e.call(testCtx(t), tool, toolArgs("return await agent('x')", auditMeta))
	require.Equal(t, "workflow \"audit\" completed (1 agent).\nReturn value:\n\"stub reply\"", resultText(t, res, false))
	res = e.call(testCtx(t), tool, toolArgs("return", auditMeta))
	require.Equal(t, "workflow \"audit\" completed (0 agents).\nReturn value:\nnull", resultText(t, res, false))
}

func TestWorkflowW51_FailureRendering(t *testing.T) {
	for _, c := range []struct {
		res  workflow.Result
		want string
	}{
		{workflow.Result{StopReason: workflow.StopError, Error: "script threw: boom"}, "workflow run failed: script threw: boom"},
		{workflow.Result{StopReason: workflow.StopError}, "workflow run failed: unknown error"},
		{workflow.Result{StopReason: workflow.StopCancelled, Error: "user"}, "workflow run was cancelled (user)"},
		{workflow.Result{StopReason: workflow.StopCancelled}, "workflow run was cancelled"},
		{workflow.Result{StopReason: "weird"}, "workflow run ended abnormally (weird)"},
	} {
		require.Equal(t, c.want, workflowtool.RenderFailure(c.res))
	}
	e := newEnv(t)
	tool := e.mount(workflowtool.Config{}, false).Tool()
	res := e.call(testCtx(t), tool, toolArgs("return await agent('p', { bogus: 1 })", auditMeta))
	require.Equal(t, `Error: workflow run failed: WorkflowError: agent() option "bogus" is not recognized (supported: label, phase, schema, provider, model)`,
		resultText(t, res, true))
	require.Nil(t, res.Value)
}

func TestWorkflowW52_MaxResultCharsCutsTheTextNotTheValue(t *testing.T) {
	e := newEnv(t)
	tool := e.mount(workflowtool.Config{MaxResultChars: i64(40)}, false).Tool()
	res := e.call(testCtx(t), tool, toolArgs("await agent('p')\nreturn { blob: 'x'.repeat(500) }", auditMeta))
	require.Equal(t, "workflow \"audit\" completed (1 agent).\nReturn value:\n{\n  \"blob\": \""+strings.Repeat("x", 27)+"\n… [truncated: 476 more characters]",
		resultText(t, res, false))
	var got struct{ Blob string }
	require.NoError(t, json.Unmarshal(res.Value.(workflowtool.Value).Result, &got))
	require.Equal(t, strings.Repeat("x", 500), got.Blob)
}

func TestRenderSuccessNeverSplitsASurrogatePair(t *testing.T) {
	// "😀" is two UTF-16 units: a cut after 2 units of `"😀` backs off to 1
	out := workflowtool.RenderSuccess("n", 2, json.RawMessage(`"😀x"`), 2)
	require.Equal(t, "workflow \"n\" completed (2 agents).\nReturn value:\n\"\n… [truncated: 4 more characters]", out)
	require.Equal(t, "workflow \"n\" completed (0 agents).\nReturn value:\n\"😀x\"", workflowtool.RenderSuccess("n", 0, json.RawMessage(`"😀x"`), 5))
}

func TestWorkflowW54_BadCallsStartNothing(t *testing.T) {
	e := newEnv(t)
	tool := e.mount(workflowtool.Config{}, false).Tool()
	jobTool := e.mount(workflowtool.Config{}, true).Tool()
	ok := toolArgs("return 1", auditMeta)

	// (a) no calling agent
	res := e.jobs.Pipeline().Run(testCtx(t), tool, tools.Call{ID: "x", Name: tool.Name, Args: json.RawMessage(ok)})
	require.Equal(t, "Error: workflow tool requires a calling agent (exec.agent was undefined)", resultText(t, res, true))
	// (b) meta left to the engine
	require.Equal(t, "Error: invalid meta: meta.name must be a non-empty string",
		resultText(t, e.call(testCtx(t), tool, toolArgs("return 1", `{"name":"","description":"d"}`)), true))
	// (c) shapes
	for args, want := range map[string]string{
		`{}`:                     "Error: invalid script: expected a string",
		`{"script":7,"meta":{}}`: "Error: invalid script: expected a string",
		`{"script":"return 1"}`:  "Error: invalid meta: expected a JSON object",
		`{"script":"return 1","meta":{"name":"a","description":"d"},"args":[1]}`:  "Error: invalid args: expected a JSON object",
		`{"script":"return 1","meta":{"name":"a","description":"d"},"args":null}`: "Error: invalid args: expected a JSON object",
		`{"script":"return 1","meta":{"name":"a","description":"d"},"x":1}`:       "",
		`{"script":"return 1","meta":{"name":"a","description":"d"}}}`:            "",
		`{"script":"return 1","meta":null}`:                                       "Error: invalid meta: expected a JSON object",
		`{"script":"return 1","meta":{"name":"a","description":"d"},"args":"[]"}`: "Error: invalid args: expected a JSON object",
	} {
		text := resultText(t, e.call(testCtx(t), tool, args), true)
		if want == "" {
			require.True(t, strings.HasPrefix(text, "Error: invalid arguments: "), "%s → %s", args, text)
			continue
		}
		require.Equal(t, want, text, args)
	}
	// (d) ctx already cancelled
	done, cancel := context.WithCancel(context.Background())
	cancel()
	require.Equal(t, "Error: tool call aborted before dispatch", resultText(t, e.call(done, tool, ok), true))
	// (e) job mode, no controller serves the agent (an agent outside the plugin scope)
	b, err := e.sys.NewAgent(nil, "B", ownerOptions())
	require.NoError(t, err)
	require.NoError(t, e.sys.Jobs().RegisterAgent(context.Background(), b))
	res = jobTool.Execute(testCtx(t), tools.Call{ID: "y", Name: jobTool.Name, Args: json.RawMessage(ok), Caller: tools.AsAgent(b)})
	require.True(t, strings.HasPrefix(resultText(t, res, true), "Error: background jobs unavailable: no job controller serves this agent"), res.Content)

	require.Empty(t, e.events.All(), "no workflow/start")
	require.Empty(t, e.stub.Runs(), "no stub start")
	jobs, err := e.sys.Jobs().List(context.Background(), registry.AsAgent(b))
	require.NoError(t, err)
	require.Empty(t, jobs, "no job registered")
}

func TestWorkflowW55_ToolCtxCancelCancelsAndDisposesTheRun(t *testing.T) {
	e := newEnv(t, func(c *workflow.Config) { c.DisposeGraceMs = i64(30) })
	tool := e.mount(workflowtool.Config{}, false).Tool()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := e.callAsync(ctx, tool, toolArgs("await new Promise(() => {})\nreturn 1", auditMeta))
	var id string
	e.events.AwaitAny(t, func(ev workflow.Event) bool { id = ev.Run.ID; return ev.Type == workflow.EventStart })
	cancel()
	res := recv(t, out)
	require.Equal(t, "Error: workflow run was cancelled (workflow run cancelled: parent step aborted)", resultText(t, res, true))
	// disposed: its workflow/end was delivered before the tool returned
	ends := filter(e.events.Of(id), workflow.EventEnd)
	require.Len(t, ends, 1)
	require.Equal(t, workflow.StopCancelled, ends[0].Result.StopReason)
}

func (e *env) recordText(id string) string {
	e.t.Helper()
	rec, _, err := e.sys.Jobs().Record(context.Background(), id, registry.AsAgent(e.parent))
	require.NoError(e.t, err)
	require.NotNil(e.t, rec)
	chunks, _, _, err := rec.Read(0)
	require.NoError(e.t, err)
	var b strings.Builder
	for _, c := range chunks {
		b.WriteString(c.Text)
	}
	return b.String()
}

func TestWorkflowW56_RunIsAJobOfKindWorkflow(t *testing.T) {
	e := newEnv(t)
	e.stub.Set(func(s *workflowtest.Behaviour) { s.Mode = manual })
	tool := e.mount(workflowtool.Config{}, true).Tool()
	out := e.callAsync(testCtx(t), tool, toolArgs("phase('Scan')\nlog('hi')\nreturn await agent('p')", auditMeta))
	r := e.stub.AwaitStarts(t, 1)[0]
	list := e.call(testCtx(t), e.jobs.List(), `{}`)
	require.Equal(t, "workflow-1 [workflow] running — audit", resultText(t, list, false))
	snap, err := e.sys.Jobs().Get(context.Background(), "workflow-1", registry.AsAgent(e.parent))
	require.NoError(t, err)
	require.Equal(t, "A", snap.GetOwnerSession())
	e.stub.Finish(t, r, text("ok"), nil)
	res := recv(t, out)
	require.Equal(t, "workflow \"audit\" completed (1 agent).\nReturn value:\n\"ok\"", resultText(t, res, false))
	snap, err = e.sys.Jobs().AwaitSettled(testCtx(t), "workflow-1", registry.AsAgent(e.parent))
	require.NoError(t, err)
	require.Equal(t, job.Completed, snap.GetStatus())
	require.Empty(t, snap.GetDetail())
	require.True(t, snap.GetReported(), "the foreground wait claimed the report")
	require.GreaterOrEqual(t, snap.GetFinishedAt(), snap.GetStartedAt())
	outText := e.call(testCtx(t), e.jobs.Output(), `{"job_id":"workflow-1"}`)
	require.Equal(t, "workflow \"audit\" completed (1 agent).\nReturn value:\n\"ok\"\n[status: completed]", resultText(t, outText, false))
	e.noNotice()
	require.Equal(t, "phase: Scan\nlog: hi\nagent 1 started: p\nagent 1 completed: p\n", e.recordText("workflow-1"))
	require.Equal(t, 1, e.stub.Disposes(r))
}

func TestWorkflowW57_HumanKillAndJobKillReachTheRun(t *testing.T) {
	e := newEnv(t)
	e.stub.Set(func(s *workflowtest.Behaviour) { s.Mode = manual })
	tool := e.mount(workflowtool.Config{}, true).Tool()
	out := e.callAsync(testCtx(t), tool, toolArgs("return await agent('p')", auditMeta))
	r := e.stub.AwaitStarts(t, 1)[0]
	kr, err := e.ctl.Kill(testCtx(t), "A", "workflow-1")
	require.NoError(t, err)
	require.Equal(t, messages.KillResult_KILL_RESULT_REQUESTED, kr)
	res := recv(t, out)
	require.Equal(t, "Error: workflow run was cancelled (workflow run cancelled: cancelled by the user)", resultText(t, res, true))
	require.Equal(t, "cancelled by the user", context.Cause(r.Ctx).Error())
	snap, err := e.sys.Jobs().AwaitSettled(testCtx(t), "workflow-1", registry.AsAgent(e.parent))
	require.NoError(t, err)
	require.Equal(t, job.Killed, snap.GetStatus())
	require.Equal(t, "cancelled by the user", snap.GetDetail())
	e.noNotice()

	// job_kill from a parallel call
	out = e.callAsync(testCtx(t), tool, toolArgs("return await agent('p')", auditMeta))
	r = e.stub.AwaitStarts(t, 2)[1]
	kill := e.call(testCtx(t), e.jobs.Kill(), `{"job_id":"workflow-2","reason":"superseded"}`)
	require.False(t, kill.IsError, kill.Content)
	res = recv(t, out)
	require.True(t, strings.HasSuffix(resultText(t, res, true), "(workflow run cancelled: superseded)"), res.Content)
	require.Equal(t, "superseded", context.Cause(r.Ctx).Error())
	snap, err = e.sys.Jobs().AwaitSettled(testCtx(t), "workflow-2", registry.AsAgent(e.parent))
	require.NoError(t, err)
	require.Equal(t, job.Killed, snap.GetStatus())
	require.Equal(t, "superseded", snap.GetDetail())
	e.noNotice()
}

func TestWorkflowW59_BackgroundModeNotifiesTheOwner(t *testing.T) {
	e := newEnv(t)
	tool := e.mount(workflowtool.Config{EnableRunInBackground: boolp(true)}, true).Tool()
	res := e.call(testCtx(t), tool, toolArgs("return await agent('p')", auditMeta, `"run_in_background":true`))
	require.Equal(t, "started background workflow job workflow-1", resultText(t, res, false))
	b, err := json.Marshal(res.Value)
	require.NoError(t, err)
	require.Equal(t, `{"kind":"background","jobId":"workflow-1"}`, string(b))
	msg := recv(t, e.inbox.msgs)
	require.Contains(t, noticeText(msg), "background job workflow-1 (workflow: audit) finished [status: completed]. Read its output with job_output.")

	res = e.call(testCtx(t), tool, toolArgs("return await agent('p', { bogus: 1 })", auditMeta, `"run_in_background":true`))
	require.Equal(t, "started background workflow job workflow-2", resultText(t, res, false))
	msg = recv(t, e.inbox.msgs)
	require.Contains(t, noticeText(msg), "background job workflow-2 (workflow: audit) finished [status: failed, error]. Read its output with job_output.")
	outText := e.call(testCtx(t), e.jobs.Output(), `{"job_id":"workflow-2"}`)
	require.Equal(t, "workflow run failed: WorkflowError: agent() option \"bogus\" is not recognized (supported: label, phase, schema, provider, model)\n[status: failed, error]",
		resultText(t, outText, false))
	for _, r := range e.stub.Runs() {
		require.Equal(t, 1, e.stub.Disposes(r))
	}

	off := e.mount(workflowtool.Config{}, true).Tool()
	require.Equal(t, "Error: run_in_background is disabled for this tool instance (enableRunInBackground: false)",
		resultText(t, e.call(testCtx(t), off, toolArgs("return 1", auditMeta, `"run_in_background":true`)), true))
	noJobs := e.mount(workflowtool.Config{EnableRunInBackground: boolp(true)}, false).Tool()
	require.Equal(t, "Error: "+workflowtool.TextNoJobs,
		resultText(t, e.call(testCtx(t), noJobs, toolArgs("return 1", auditMeta, `"run_in_background":true`)), true))
	require.True(t, strings.HasPrefix(workflowtool.TextNoJobs, "background jobs unavailable: "))
	require.Contains(t, workflowtool.TextNoJobs, "workflowtool.Deps.Jobs")
}

func TestSpec181_MaxTotalAgentsAboveTheCeilingOrZeroThrowsSynchronously(t *testing.T) {
	e := newEnv(t, func(c *workflow.Config) { c.MaxTotalAgents = i64(1000) })
	for n, want := range map[int64]string{2000: "workflow maxTotalAgents 2000 exceeds the engine ceiling 1000", 0: "workflow maxTotalAgents must be a positive safe integer"} {
		req := e.request("return 1")
		req.MaxTotalAgents = i64(n)
		run, err := e.eng.Start(context.Background(), req)
		require.Nil(t, run)
		require.ErrorIs(t, err, workflow.ErrInvalidArgument)
		var me *messages.Error
		require.ErrorAs(t, err, &me)
		require.Equal(t, workflow.CodeInvalidArgument, me.Code)
		require.Equal(t, want, me.Message)
	}
	require.Empty(t, e.events.All())
}

func TestSpec182_ARunTimeThrowResolvesTheResultWithError(t *testing.T) {
	e := newEnv(t)
	run, err := e.eng.Start(context.Background(), e.request("await null\nthrow new Error('late')"))
	require.NoError(t, err)
	res, err := run.Result(testCtx(t))
	require.NoError(t, err, "Result never rejects for a run failure")
	require.Equal(t, workflow.StopError, res.StopReason)
	require.NotEmpty(t, res.Error)
	require.True(t, strings.HasPrefix(res.Error, "Error: late"), res.Error)
	require.NoError(t, run.Dispose(testCtx(t)))
}

func TestSpec183_AMaxTokensChildGivesNullAndTheRunCompletes(t *testing.T) {
	e := newEnv(t)
	e.stub.Set(func(s *workflowtest.Behaviour) {
		s.Reply = func(subagent.ResolvedRequest, int) subagent.Result {
			return subagent.Result{StopReason: subagent.StopMaxTokens}
		}
	})
	run, err := e.eng.Start(context.Background(), e.request("const v = await agent('p')\nreturn { v, ok: v === null }"))
	require.NoError(t, err)
	res, err := run.Result(testCtx(t))
	require.NoError(t, err)
	require.Equal(t, workflow.StopCompleted, res.StopReason)
	require.JSONEq(t, `{"v":null,"ok":true}`, string(res.Value))
	require.NoError(t, run.Dispose(testCtx(t)))
	ends := filter(e.events.Of(run.ID()), workflow.EventAgentEnd)
	require.Len(t, ends, 1)
	require.Equal(t, workflow.OutcomeFailed, ends[0].Outcome)
}

var _ = jobtools.NameList

// A foreground job-mode run that settles before the tool's wait could reach the
// job is still claimed by that wait: no completion notice, ever (the outcome is
// held until the wait is pending). Without the hold this sent notices (the demo
// caught it).
func TestForegroundJobRunThatEndsAtOnceSendsNoNotice(t *testing.T) {
	e := newEnv(t)
	tool := e.mount(workflowtool.Config{}, true).Tool()
	for i := range 30 {
		res := e.call(testCtx(t), tool, toolArgs("return 1", auditMeta))
		require.Equal(t, "workflow \"audit\" completed (0 agents).\nReturn value:\n1", resultText(t, res, false))
		id := "workflow-" + strconv.Itoa(i+1)
		snap, err := e.sys.Jobs().AwaitSettled(testCtx(t), id, registry.AsAgent(e.parent))
		require.NoError(t, err)
		require.True(t, snap.GetReported(), "%s: the foreground wait claimed the report", id)
	}
	e.noNotice()
}

// WORKFLOW.md 5.5: owner teardown reaches the run with its reason, and the
// foreground call still returns (errored, the run disposed).
func TestWorkflowJobOwnerTeardownCancelsTheRun(t *testing.T) {
	e := newEnv(t)
	e.stub.Set(func(s *workflowtest.Behaviour) { s.Mode = manual })
	tool := e.mount(workflowtool.Config{}, true).Tool()
	out := e.callAsync(testCtx(t), tool, toolArgs("return await agent('p')", auditMeta))
	r := e.stub.AwaitStarts(t, 1)[0]
	require.NoError(t, e.parent.Dispose(testCtx(t)))
	res := recv(t, out)
	require.Equal(t, "Error: workflow run was cancelled (workflow run cancelled: owner disposed)", resultText(t, res, true))
	require.Equal(t, "owner disposed", context.Cause(r.Ctx).Error())
	require.Equal(t, 1, e.stub.Disposes(r))
	// the owner's jobs go with it (its records are deleted at teardown)
	_, err := e.sys.Jobs().Get(context.Background(), "workflow-1", registry.AsAgent(e.parent))
	require.Error(t, err)
}
