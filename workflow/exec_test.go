package workflow_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/workflow"
	"github.com/troupe-rt/troupe/workflow/workflowtest"
)

// WORKFLOW.md 6.2 Script execution

func TestWorkflowW7_PhasesLogsPipelineAndEvents(t *testing.T) {
	e := newEnv(t)
	e.stub.Set(func(s *workflowtest.Behaviour) {
		// starts run concurrently, so the index is the item's (from the prompt), not the start order
		s.Reply = func(r subagent.ResolvedRequest, _ int) subagent.Result {
			return text("answer-" + strconv.Itoa(map[string]int{"read a.ts": 0, "read b.ts": 1}[r.Prompt]))
		}
	})
	req := e.request("phase('Scan')\nlog('starting with ' + args.files.length + ' files')\nconst answers = await pipeline(args.files, (prev, item) => agent('read ' + item))\nphase('Report')\nreturn { answers, count: args.files.length }")
	req.Meta = json.RawMessage(`{"name":"test-flow","description":"a test workflow","phases":[{"title":"Scan"},{"title":"Report"}]}`)
	req.Args = json.RawMessage(`{"files":["a.ts","b.ts"]}`)
	run := e.start(req)
	res := result(t, run)
	e.dispose(run)
	require.Equal(t, workflow.Result{Value: json.RawMessage(`{"answers":["answer-0","answer-1"],"count":2}`), StopReason: workflow.StopCompleted, AgentsStarted: 2}, res)
	runs := e.stub.Runs()
	require.Len(t, runs, 2)
	for _, r := range runs {
		require.Equal(t, 1, e.stub.Disposes(r), "every stub run was disposed")
	}
	evs := e.events.Of(run.ID())
	require.Equal(t, workflow.EventStart, evs[0].Type)
	require.Equal(t, workflow.EventEnd, evs[len(evs)-1].Type)
	var phases, logs []string
	for _, ev := range filter(evs, workflow.EventPhase) {
		phases = append(phases, ev.Title)
	}
	for _, ev := range filter(evs, workflow.EventLog) {
		logs = append(logs, ev.Message)
	}
	require.Equal(t, []string{"Scan", "Report"}, phases)
	require.Equal(t, []string{"starting with 2 files"}, logs)
	starts, ends := filter(evs, workflow.EventAgentStart), filter(evs, workflow.EventAgentEnd)
	require.Len(t, starts, 2)
	require.Len(t, ends, 2)
	ids := map[string]bool{runs[0].ID: true, runs[1].ID: true}
	for _, ev := range ends {
		require.Equal(t, workflow.OutcomeCompleted, ev.Outcome)
		require.True(t, ids[ev.Agent.ChildID], ev.Agent.ChildID)
	}
	require.Equal(t, "test-flow", evs[0].Run.Meta.Name)
	require.Equal(t, workflow.ResultInfo{StopReason: workflow.StopCompleted, AgentsStarted: 2}, evs[len(evs)-1].Result)
}

func TestWorkflowW8_ReturnValuesAsJSON(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		body, value string
		agents      int
	}{
		{"await agent('p')", "null", 1},
		{"return 6 * 7", "42", 0},
		{"return null", "null", 0},
		{`return { b: 1, a: [], c: {}, "2": "x", "1": -0, e: 1e21, f: 0.1 + 0.2, g: "<&>" }`, `{"1":0,"2":"x","b":1,"a":[],"c":{},"e":1e+21,"f":0.30000000000000004,"g":"<&>"}`, 0},
	} {
		res := e.runScript(c.body)
		require.Equal(t, workflow.StopCompleted, res.StopReason, res.Error)
		require.Equal(t, c.value, string(res.Value), c.body)
		require.Equal(t, c.agents, res.AgentsStarted)
	}
}

func TestWorkflowW9_NonJSONReturnValues(t *testing.T) {
	e := newEnv(t)
	const pre, post = "WorkflowError: the workflow's return value is not plain JSON data — ", ". Return only JSON-serializable objects/arrays/scalars."
	for _, c := range []struct{ body, want string }{
		{"return { when: new Date(0) }", "workflow result.when: only plain objects and arrays are JSON data (exotic prototype)"},
		{"return { n: NaN }", "workflow result.n: non-finite numbers are not JSON data"},
		{"return { fn: () => 1 }", "workflow result.fn: functions are not plain JSON data"},
		{"return { a: undefined }", "workflow result.a: undefined is not JSON data"},
		{"return [1, , 3]", "workflow result[1]: sparse arrays are not JSON data"},
		{"const a = [1]; a.total = 3; return a", "workflow result.total: arrays with non-index properties are not JSON data"},
		{"return { [Symbol('k')]: 1 }", "workflow result: symbol-keyed properties are not plain JSON data"},
		{"return { big: 1n }", "workflow result.big: bigints are not JSON data"},
		{"const o = {}; o.self = o; return o", "workflow result.self: circular references are not JSON data"},
	} {
		res := e.runScript(c.body)
		require.Equal(t, workflow.StopError, res.StopReason, c.body)
		require.Equal(t, pre+c.want+post, res.Error, c.body)
		require.Equal(t, "null", string(res.Value))
	}
	res := e.runScript("return { get x() { throw new Error('read failed') } }")
	require.Equal(t, workflow.StopError, res.StopReason)
	require.Contains(t, res.Error, "workflow result: reading the value threw: Error: read failed")

	for _, c := range []struct{ body, value string }{
		{`return JSON.parse('{"__proto__": {"polluted": 1}, "ok": 2}')`, `{"__proto__":{"polluted":1},"ok":2}`},
		{"const v = { v: 1 }; return { a: v, b: v }", `{"a":{"v":1},"b":{"v":1}}`},
		{"return Object.assign(Object.create(null), { a: 1 })", `{"a":1}`},
		{"const o = { a: 1 }; Object.defineProperty(o, 'hidden', { value: 2, enumerable: false }); return o", `{"a":1}`},
		{"let n = 0; const o = { get c() { return ++n } }; const r = { o }; return r", `{"o":{"c":1}}`},
	} {
		res := e.runScript(c.body)
		require.Equal(t, workflow.StopCompleted, res.StopReason, res.Error)
		require.Equal(t, c.value, string(res.Value), c.body)
	}
}

func TestWorkflowW10_ScrubbedGlobalsAndThrownValues(t *testing.T) {
	e := newEnv(t)
	res := e.runScript("return [typeof setTimeout, typeof setInterval, typeof queueMicrotask, typeof console, typeof require, typeof process, typeof fetch, typeof meta, typeof args, typeof agent, typeof parallel, typeof pipeline, typeof phase, typeof log, typeof Date.now(), typeof Math.random()]")
	require.Equal(t, workflow.StopCompleted, res.StopReason, res.Error)
	require.Equal(t, `["undefined","undefined","undefined","undefined","undefined","undefined","undefined","undefined","undefined","function","function","function","function","function","number","number"]`, string(res.Value))

	res = e.runScript("throw new Error('boom')")
	require.Equal(t, workflow.StopError, res.StopReason)
	require.True(t, strings.HasPrefix(res.Error, "Error: boom"), res.Error)
	res = e.runScript("throw 'plain'")
	require.Equal(t, workflow.Result{Value: json.RawMessage("null"), StopReason: workflow.StopError, Error: "plain"}, res)
	res = e.runScript("throw { code: 42 }")
	require.Equal(t, "[object Object]", res.Error)
}

func TestWorkflowW11_SliceBudget(t *testing.T) {
	e := newEnv(t, func(c *workflow.Config) { c.SyncTimeoutMs = i64(50) })
	for _, c := range []struct {
		body   string
		agents int
	}{{"while (true) {}", 0}, {"await agent('p')\nwhile (true) {}", 1}} {
		began := time.Now()
		res := e.runScript(c.body)
		require.Less(t, time.Since(began), 2*time.Second)
		require.Equal(t, workflow.StopError, res.StopReason)
		require.Equal(t, "Error: Script execution timed out after 50ms", res.Error)
		require.Equal(t, c.agents, res.AgentsStarted)
	}
	d := newEnv(t)
	res := d.runScript("const end = Date.now() + 30\nwhile (Date.now() < end) {}\nreturn 1")
	require.Equal(t, workflow.StopCompleted, res.StopReason, res.Error)
	require.Equal(t, "1", string(res.Value))
}

// The hook functions are frozen, the globals ordinary writable properties: a script
// that overwrites a hook only breaks itself (WORKFLOW.md 2.2).
func TestWorkflowHooksFrozenGlobalsWritable(t *testing.T) {
	e := newEnv(t)
	res := e.runScript("const frozen = [agent, parallel, pipeline, phase, log].every(f => Object.isFrozen(f))\nagent = () => 'mine'\nreturn [frozen, agent()]")
	require.Equal(t, `[true,"mine"]`, string(res.Value), res.Error)
	res = e.runScript("return await agent('fresh runtime per run')")
	require.Equal(t, `"stub reply"`, string(res.Value), "the next run has its own globals")
}
