package workflow_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/workflow"
	"github.com/troupe-rt/troupe/workflow/workflowtest"
)

// WORKFLOW.md 6.3 agent()

func TestWorkflowW12_TextChildAndItsRequest(t *testing.T) {
	e := newEnv(t)
	e.stub.Set(func(s *workflowtest.Behaviour) {
		s.Reply = func(subagent.ResolvedRequest, int) subagent.Result {
			return subagent.Result{StopReason: subagent.StopCompleted, Output: []tools.Block{{Type: "text", Text: "first "}, {Type: "tool_call"}, {Type: "text", Text: "second"}}}
		}
	})
	run := e.start(e.request("return await agent('line one\\nline two')"))
	res := result(t, run)
	require.Equal(t, `"first second"`, string(res.Value), res.Error)
	runs := e.stub.Runs()
	require.Len(t, runs, 1)
	r := runs[0]
	require.Equal(t, "line one\nline two", r.Req.Prompt)
	require.Equal(t, "line one", r.Req.Label)
	require.Nil(t, r.Req.OutputSchema)
	require.Nil(t, r.Req.Options)
	require.Equal(t, e.parent.Session(), r.Req.Parent.Session)
	require.NoError(t, r.CtxErrAtStart)
	e.dispose(run)
	require.Equal(t, 1, e.stub.Disposes(r))
}

func TestWorkflowW13_SchemaOptionsAndProviderOverride(t *testing.T) {
	e := newEnv(t)
	e.stub.Set(func(s *workflowtest.Behaviour) {
		s.Reply = func(subagent.ResolvedRequest, int) subagent.Result {
			return subagent.Result{StopReason: subagent.StopCompleted, Structured: json.RawMessage(`{"files":["x.ts","y.ts"]}`)}
		}
	})
	res := e.runScript("const found = await agent('list files', { model: 'deepseek-v4-pro', schema: { type: 'object', properties: { files: { type: 'array', items: { type: 'string' } } }, required: ['files'] } })\nreturn { first: found.files[0], count: found.files.length }")
	require.Equal(t, `{"first":"x.ts","count":2}`, string(res.Value), res.Error)
	r := e.stub.Runs()[0]
	require.Equal(t, `{"type":"object","properties":{"files":{"type":"array","items":{"type":"string"}}},"required":["files"]}`, string(r.Req.OutputSchema))
	require.Equal(t, &subagent.AgentOptions{Model: "deepseek-v4-pro"}, r.Req.Options)

	e.runScript("await agent('route me', { provider: 'openai' })")
	require.Equal(t, &subagent.AgentOptions{Provider: "openai"}, e.stub.Runs()[1].Req.Options)

	sel := newStub("selected")
	sel.Set(func(s *workflowtest.Behaviour) {
		s.Reply = func(subagent.ResolvedRequest, int) subagent.Result { return text("selected reply") }
	})
	_, err := e.rt.RegisterProvider(t.Context(), e.sys.Scope(), sel)
	require.NoError(t, err)
	req := e.request("return await agent('x')")
	req.SubagentProvider = str("selected")
	run := e.start(req)
	require.Equal(t, `"selected reply"`, string(result(t, run).Value))
	e.dispose(run)
	require.Len(t, sel.Runs(), 1)
	require.Len(t, e.stub.Runs(), 2, "stub saw none of the overridden run")
	e.stub.Set(func(s *workflowtest.Behaviour) {
		s.Reply = func(subagent.ResolvedRequest, int) subagent.Result { return text("stub reply") }
	})
	res = e.runScript("return await agent('x')")
	require.Equal(t, `"stub reply"`, string(res.Value))
	require.Len(t, e.stub.Runs(), 3)
	require.Len(t, sel.Runs(), 1)
}

func TestWorkflowW14_FailedChildResolvesNull(t *testing.T) {
	e := newEnv(t)
	e.stub.Set(func(s *workflowtest.Behaviour) {
		s.Reply = func(r subagent.ResolvedRequest, _ int) subagent.Result {
			if r.Prompt == "one" {
				return subagent.Result{StopReason: subagent.StopMaxTokens}
			}
			return text("ok")
		}
	})
	run := e.start(e.request("return await parallel([() => agent('one'), () => agent('two')])"))
	res := result(t, run)
	e.dispose(run)
	require.Equal(t, `[null,"ok"]`, string(res.Value), res.Error)
	outcomes := map[int]workflow.Outcome{}
	for _, ev := range filter(e.events.Of(run.ID()), workflow.EventAgentEnd) {
		outcomes[ev.Agent.Seq] = ev.Outcome
	}
	require.Equal(t, map[int]workflow.Outcome{1: workflow.OutcomeFailed, 2: workflow.OutcomeCompleted}, outcomes)

	e.stub.Set(func(s *workflowtest.Behaviour) {
		s.Reply = func(subagent.ResolvedRequest, int) subagent.Result { return text("prose") }
	})
	run = e.start(e.request("return await agent('p', { schema: { type: 'object' } })"))
	res = result(t, run)
	e.dispose(run)
	require.Equal(t, "null", string(res.Value))
	require.Equal(t, workflow.StopCompleted, res.StopReason)
	ends := filter(e.events.Of(run.ID()), workflow.EventAgentEnd)
	require.Len(t, ends, 1)
	require.Equal(t, workflow.OutcomeFailed, ends[0].Outcome)
}

func TestWorkflowW15_AgentValidationRejects(t *testing.T) {
	e := newEnv(t)
	calls := []string{
		"agent(42)", "agent('')", "agent('p', 'opts')", "agent('p', null)", "agent('p', { label: 3 })",
		"agent('p', { bogus: true })", "agent('p', { effort: 'high' })",
		"agent('p', { schema: { type: 'object', oneOf: [] } })", "agent('p', { schema: { type: 'string' } })",
		"agent('p', { get label() { throw new Error('read failed') } })",
	}
	var parts []string
	for _, c := range calls {
		parts = append(parts, "await "+c+".catch(e => e.code + ': ' + e.message)")
	}
	res := e.runScript("return [" + strings.Join(parts, ", ") + "]")
	require.Equal(t, workflow.StopCompleted, res.StopReason, res.Error)
	var got []string
	require.NoError(t, json.Unmarshal(res.Value, &got))
	want := []string{
		"INVALID_ARGUMENT: agent() requires a non-empty prompt string",
		"INVALID_ARGUMENT: agent() requires a non-empty prompt string",
		"INVALID_ARGUMENT: agent() options must be an object",
		"INVALID_ARGUMENT: agent() options must be an object",
		`INVALID_ARGUMENT: agent() option "label" must be a string`,
		`UNSUPPORTED_OPTION: agent() option "bogus" is not recognized (supported: label, phase, schema, provider, model)`,
		`UNSUPPORTED_OPTION: agent() option "effort" is deferred and not supported by this engine (supported: label, phase, schema, provider, model)`,
		"UNSUPPORTED_SCHEMA: agent() schema is outside the supported subset — unsupported JSON schema: schema cannot declare both type and oneOf",
		`UNSUPPORTED_SCHEMA: agent() schema is outside the supported subset — unsupported JSON schema: schema.type must be "object" (structured output is object-rooted)`,
	}
	require.Equal(t, want, got[:len(want)])
	require.True(t, strings.HasPrefix(got[len(want)], "INVALID_ARGUMENT: agent() options must be plain JSON data — agent() options: reading the value threw: Error: read failed"), got[len(want)])
	require.Empty(t, e.stub.Runs())
	require.Equal(t, 0, res.AgentsStarted)

	res = e.runScript("try { agent(42) } catch (e) { return 'sync' }\nreturn 'async'")
	require.Equal(t, `"async"`, string(res.Value))
}

func TestWorkflowW16_LabelsAndPhases(t *testing.T) {
	e := newEnv(t)
	run := e.start(e.request("phase('Find')\nawait agent('a prompt that is quite long and will surely get truncated down to a display label\\nwith a second line')\nawait agent('short', { label: 'named', phase: 'Custom' })\nawait agent('x', { label: '', phase: '' })\nreturn null"))
	require.Equal(t, workflow.StopCompleted, result(t, run).StopReason)
	e.dispose(run)
	var got []workflow.AgentInfo
	for _, ev := range filter(e.events.Of(run.ID()), workflow.EventAgentStart) {
		a := ev.Agent
		a.ChildID = ""
		got = append(got, a)
	}
	require.Equal(t, []workflow.AgentInfo{
		{Seq: 1, Label: "a prompt that is quite long and will surely get…", Phase: str("Find")},
		{Seq: 2, Label: "named", Phase: str("Custom")},
		{Seq: 3, Label: "", Phase: str("")},
	}, got)
}

func TestWorkflowW18_StartFailureRejectsAgentStart(t *testing.T) {
	e := newEnv(t)
	e.stub.Set(func(s *workflowtest.Behaviour) { s.Deferred = true })
	run := e.start(e.request("return await pipeline([1], () => agent('p'))"))
	r := e.stub.AwaitStarts(t, 1)[0]
	r.Publish <- errors.New("publication rolled back")
	res := result(t, run)
	e.dispose(run)
	require.Equal(t, workflow.StopError, res.StopReason)
	require.Equal(t, "WorkflowError: agent() could not start a child: Error: publication rolled back", res.Error)
	require.Empty(t, filter(e.events.Of(run.ID()), workflow.EventAgentStart))

	run = e.start(e.request("try { await agent('p') } catch (e) { return { code: e.code, fatal: e.fatal, name: e.name } }"))
	e.stub.AwaitStarts(t, 2)[1].Publish <- errors.New("publication rolled back")
	res = result(t, run)
	e.dispose(run)
	require.Equal(t, `{"code":"AGENT_START","fatal":true,"name":"WorkflowError"}`, string(res.Value), res.Error)
	require.Empty(t, filter(e.events.Of(run.ID()), workflow.EventAgentStart))
	require.Empty(t, filter(e.events.Of(run.ID()), workflow.EventAgentEnd))
}

func TestWorkflowW19_InfrastructureFaultIsAgentResult(t *testing.T) {
	e := newEnv(t)
	e.stub.Set(func(s *workflowtest.Behaviour) { s.Mode = manual })
	run := e.start(e.request("try { await agent('p'); return 'unreachable' } catch (e) { return { name: e.name, code: e.code, fatal: e.fatal, message: e.message, isError: e instanceof Error } }"))
	e.stub.Finish(t, e.stub.AwaitStarts(t, 1)[0], subagent.Result{}, errors.New("backend exploded"))
	res := result(t, run)
	e.dispose(run)
	require.Equal(t, `{"name":"WorkflowError","code":"AGENT_RESULT","fatal":true,"message":"child agent run failed: Error: backend exploded","isError":true}`, string(res.Value), res.Error)
	evs := e.events.Of(run.ID())
	require.Equal(t, []string{workflow.EventStart, workflow.EventAgentStart, workflow.EventAgentEnd, workflow.EventEnd}, types(evs))
	require.Equal(t, workflow.OutcomeFailed, evs[2].Outcome)

	run = e.start(e.request("try { await agent('p', { schema: { type: 'object' } }); return 'unreachable' } catch (e) { return e.message }"))
	e.stub.Finish(t, e.stub.AwaitStarts(t, 2)[1], subagent.Result{StopReason: subagent.StopCompleted, Structured: json.RawMessage("{")}, nil)
	res = result(t, run)
	e.dispose(run)
	var msg string
	require.NoError(t, json.Unmarshal(res.Value, &msg), res.Error)
	require.True(t, strings.HasPrefix(msg, "child agent run failed: workflow child result could not cross into the script: "), msg)
}

func TestWorkflowW20_ChildDisposeFailureIsLogged(t *testing.T) {
	for _, panics := range []bool{false, true} {
		e := newEnv(t)
		e.stub.Set(func(s *workflowtest.Behaviour) {
			s.Reply = func(subagent.ResolvedRequest, int) subagent.Result { return text("fine") }
			s.DisposeErr, s.DisposePanic = errors.New("dispose exploded"), panics
		})
		res := e.runScript("return await agent('p')")
		require.Equal(t, `"fine"`, string(res.Value), res.Error)
		n := 0
		for _, l := range e.logs.Lines() {
			if l == "workflow: child dispose failed: dispose exploded" {
				n++
			}
		}
		require.Equal(t, 1, n, "panics=%v: %q", panics, e.logs.Lines())
	}
}
