package workflow_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/workflow"
	"github.com/troupe-rt/troupe/workflow/workflowtest"
)

// SPEC cases 181–183 (WORKFLOW.md's W5, W10 and W14 restate them in full).

func TestSpec181_MaxTotalAgentsChecksAreSynchronous(t *testing.T) {
	e := newEnv(t, func(c *workflow.Config) { c.MaxTotalAgents = nil }) // the default ceiling, 1000
	for n, msg := range map[int64]string{
		2000: "workflow maxTotalAgents 2000 exceeds the engine ceiling 1000",
		0:    "workflow maxTotalAgents must be a positive safe integer",
	} {
		req := e.request("return 1")
		req.MaxTotalAgents = i64(n)
		run, err := e.eng.Start(t.Context(), req)
		require.Nil(t, run)
		code, got := codeOf(t, err)
		require.Equal(t, workflow.CodeInvalidArgument, code)
		require.Equal(t, msg, got)
	}
	require.Empty(t, e.events.All())
}

func TestSpec182_RunTimeThrowResolvesError(t *testing.T) {
	e := newEnv(t)
	res := e.runScript("await agent('p')\nthrow new Error('late failure')")
	require.Equal(t, workflow.StopError, res.StopReason)
	require.NotEmpty(t, res.Error)
	require.Contains(t, res.Error, "late failure")
	require.Equal(t, 1, res.AgentsStarted)
}

func TestSpec183_MaxTokensChildIsNullAndTheRunCompletes(t *testing.T) {
	e := newEnv(t)
	e.stub.Set(func(s *workflowtest.Behaviour) {
		s.Reply = func(subagent.ResolvedRequest, int) subagent.Result {
			return subagent.Result{StopReason: subagent.StopMaxTokens}
		}
	})
	res := e.runScript("const v = await agent('long answer')\nreturn { v, ok: v === null }")
	require.Equal(t, workflow.StopCompleted, res.StopReason, res.Error)
	require.Equal(t, `{"v":null,"ok":true}`, string(res.Value))
}
