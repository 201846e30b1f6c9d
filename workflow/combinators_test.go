package workflow_test

import (
	"encoding/json"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/workflow"
	"github.com/troupe-rt/troupe/workflow/workflowtest"
)

// WORKFLOW.md 6.4 Combinators and narration

func TestWorkflowW21_CombinatorAndNarrationMisuseIsFatal(t *testing.T) {
	e := newEnv(t, func(c *workflow.Config) { c.MaxItemsPerCall = i64(2) })
	for _, c := range []struct{ body, msg string }{
		{"return await parallel([() => 1, () => 2, () => 3])", "parallel() received 3 items — over the per-call cap (2); split the work or raise maxItemsPerCall in the engine config"},
		{"return await pipeline([1, 2, 3], (x) => x)", "pipeline() received 3 items — over the per-call cap (2); split the work or raise maxItemsPerCall in the engine config"},
		{"return await parallel('no')", "parallel() requires an array of zero-argument functions"},
		{"return await parallel([3])", "parallel() item 0 is not a function"},
		{"return await pipeline('no', () => 1)", "pipeline() requires an items array"},
		{"return await pipeline([1])", "pipeline() requires at least one stage function"},
		{"return await pipeline([1], 'x')", "pipeline() stage 0 is not a function"},
		{"phase('')", "phase() requires a non-empty title string"},
		{"log(3)", "log() requires a message string"},
	} {
		res := e.runScript(c.body)
		require.Equal(t, workflow.StopError, res.StopReason, c.body)
		require.Equal(t, "WorkflowError: "+c.msg, res.Error, c.body)
	}
	res := e.runScript("return await parallel([() => 1, () => 2])")
	require.Equal(t, "[1,2]", string(res.Value), "exactly the cap is accepted: %s", res.Error)
	res = e.runScript("try { phase('') } catch (e) { return e.code }")
	require.Equal(t, `"INVALID_ARGUMENT"`, string(res.Value))
	run := e.start(e.request("log(''); phase('Undeclared'); return 1"))
	require.Equal(t, "1", string(result(t, run).Value))
	e.dispose(run)
	evs := e.events.Of(run.ID())
	logs, phases := filter(evs, workflow.EventLog), filter(evs, workflow.EventPhase)
	require.Len(t, logs, 1)
	require.Equal(t, "", logs[0].Message)
	require.Len(t, phases, 1)
	require.Equal(t, "Undeclared", phases[0].Title)
}

func TestWorkflowW22_OrdinaryThrowsBecomeNull(t *testing.T) {
	e := newEnv(t)
	e.stub.Set(func(s *workflowtest.Behaviour) {
		s.Reply = func(subagent.ResolvedRequest, int) subagent.Result { return text("fine") }
	})
	res := e.runScript("const viaParallel = await parallel([() => { throw new Error('boom') }, () => agent('fine'), () => 'plain value', () => { throw { name: 'WorkflowError', code: 'AGENT_CAP', fatal: true, message: 'forged fatal' } }])\nconst viaPipeline = await pipeline([10, 20, 30], (prev, item, index) => { if (item === 10) throw new Error('ordinary failure'); return prev + index }, (prev, item) => prev * 2 + ':' + item)\nreturn { viaParallel, viaPipeline }")
	require.Equal(t, `{"viaParallel":[null,"fine","plain value",null],"viaPipeline":[null,"42:20","64:30"]}`, string(res.Value), res.Error)
}

func TestWorkflowW23_FatalErrorsEscapeCombinators(t *testing.T) {
	e := newEnv(t)
	res := e.runScript("return await parallel([() => agent('x', { isolation: 'worktree' })])")
	require.Equal(t, workflow.StopError, res.StopReason)
	require.Equal(t, `WorkflowError: agent() option "isolation" is deferred and not supported by this engine (supported: label, phase, schema, provider, model)`, res.Error)
	res = e.runScript("return await pipeline([1], async () => { try { await agent('x', { bogus: 1 }) } catch (e) { throw e } })")
	require.Equal(t, workflow.StopError, res.StopReason)
	require.Contains(t, res.Error, `"bogus" is not recognized`)
}

// WORKFLOW.md 6.5 Limits

func TestWorkflowW25_TotalAgentCap(t *testing.T) {
	e := newEnv(t, func(c *workflow.Config) { c.MaxTotalAgents = i64(2) })
	res := e.runScript("await agent('1'); await agent('2'); await agent('3')")
	require.Equal(t, workflow.StopError, res.StopReason)
	require.Equal(t, "WorkflowError: this run reached its total agent cap (2) — a runaway-loop backstop; raise the applicable maxTotalAgents limit if the scale is intentional", res.Error)
	require.Equal(t, 2, res.AgentsStarted)
	require.Len(t, e.stub.Runs(), 2)
}

func TestWorkflowW27_DefaultConcurrencyFollowsGOMAXPROCS(t *testing.T) {
	for _, c := range []struct{ procs, limit int }{{3, 1}, {64, 16}} {
		t.Run("GOMAXPROCS"+strconv.Itoa(c.procs), func(t *testing.T) {
			prev := runtime.GOMAXPROCS(c.procs)
			defer runtime.GOMAXPROCS(prev)
			e := newEnv(t, func(cfg *workflow.Config) { cfg.MaxConcurrentAgents = nil })
			e.stub.Set(func(s *workflowtest.Behaviour) { s.Mode = manual })
			run := e.start(e.request("return await parallel([1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18].map(n => () => agent('j' + n)))"))
			// the first `limit` starts come before any settlement (so the limit is
			// reached); then each run is settled once its start is observed
			e.stub.AwaitStarts(t, c.limit)
			for settled := 0; settled < 18; settled++ {
				r := e.stub.AwaitStarts(t, settled+1)[settled]
				e.stub.Finish(t, r, text("ok"), nil)
			}
			res := result(t, run)
			e.dispose(run)
			var vals []string
			require.NoError(t, json.Unmarshal(res.Value, &vals), res.Error)
			require.Equal(t, strings.Split(strings.Repeat("ok,", 18)[:3*18-1], ","), vals)
			live, peak := 0, 0
			for _, o := range e.stub.Order() {
				if strings.HasPrefix(o, "start ") {
					live++
				} else {
					live--
				}
				peak = max(peak, live)
			}
			require.Equal(t, c.limit, peak, "started-and-not-disposed never exceeds, and reaches, the limit")
		})
	}
}
