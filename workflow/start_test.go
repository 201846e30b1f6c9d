package workflow_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/workflow"
)

// WORKFLOW.md 6.1 Start

func TestWorkflowW1_MetaNormalizesToItsJSON(t *testing.T) {
	e := newEnv(t)
	for _, meta := range []string{
		`{"name":"migrate","description":"migrate call sites","whenToUse":"large mechanical sweeps","phases":[{"title":"Discover","provider":"openai"},{"title":"Transform","detail":"one agent per file","model":"deepseek-v4-pro"}]}`,
		`{"name":"audit","description":"audit the repo"}`,
		`{"name":"audit","description":"audit the repo","phases":[]}`,
	} {
		req := e.request("return 1")
		req.Meta = json.RawMessage(meta)
		p, err := e.eng.Prepare(req)
		require.NoError(t, err)
		got, err := json.Marshal(p.Meta())
		require.NoError(t, err)
		require.Equal(t, meta, string(got))
	}
	require.Empty(t, e.events.All(), "Prepare publishes nothing")
}

func TestWorkflowW2_InvalidMetaCollectsEveryViolation(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct{ meta, msg string }{
		{`null`, "invalid meta: meta must be an object"},
		{`"a string"`, "invalid meta: meta must be an object"},
		{`[{"name":"x","description":"d"}]`, "invalid meta: meta must be an object"},
		{`{"name":"x","description":"d","color":"red"}`, "invalid meta: meta.color is not a recognized field (name/description/whenToUse/phases)"},
		{`{"description":"d"}`, "invalid meta: meta.name must be a non-empty string"},
		{`{"name":"x","description":42}`, "invalid meta: meta.description must be a non-empty string"},
		{`{"name":"x","description":"d","whenToUse":3}`, "invalid meta: meta.whenToUse must be a string"},
		{`{"name":"x","description":"d","phases":"Scan"}`, "invalid meta: meta.phases must be an array"},
		{`{"description":7,"extra":true,"phases":[{"title":"Scan"},"bad"]}`, "invalid meta: meta.extra is not a recognized field (name/description/whenToUse/phases); meta.name must be a non-empty string; meta.description must be a non-empty string; meta.phases[1] must be an object"},
		{`{"name":"x","description":"d","phases":[{"title":"","order":1,"model":9}]}`, "invalid meta: meta.phases[0].order is not a recognized field; meta.phases[0].title must be a non-empty string; meta.phases[0].model must be a string"},
	} {
		req := e.request("return 1")
		req.Meta = json.RawMessage(c.meta)
		_, err := e.eng.Prepare(req)
		code, msg := codeOf(t, err)
		require.Equal(t, workflow.CodeMetaInvalid, code, c.meta)
		require.Equal(t, c.msg, msg, c.meta)
		require.ErrorIs(t, err, workflow.ErrMetaInvalid)
	}
}

func TestWorkflowW3_ScriptParseFailures(t *testing.T) {
	e := newEnv(t)
	_, err := e.eng.Start(t.Context(), e.request("return ((("))
	code, msg := codeOf(t, err)
	require.Equal(t, workflow.CodeScriptParse, code)
	require.True(t, strings.HasPrefix(msg, "workflow script does not parse: SyntaxError"), msg)
	_, err = e.eng.Start(t.Context(), e.request("export const meta = { name: 'x', description: 'd' }\nreturn 1"))
	code, msg = codeOf(t, err)
	require.Equal(t, workflow.CodeScriptParse, code)
	require.Equal(t, "workflow meta rides the `meta` request field, not the script: remove the `export const meta = {...}` statement from the body", msg)
	require.Empty(t, e.events.All())
	require.Empty(t, e.stub.Runs())
}

func TestWorkflowW4_ProviderRoute(t *testing.T) {
	e := newEnv(t)
	req := e.request("return 1")
	req.SubagentProvider = str("")
	_, err := e.eng.Start(t.Context(), req)
	code, msg := codeOf(t, err)
	require.Equal(t, workflow.CodeInvalidArgument, code)
	require.Equal(t, "workflow subagentProvider must be a non-empty normalized string", msg)
	req.SubagentProvider = str(" stub")
	_, err = e.eng.Start(t.Context(), req)
	_, msg = codeOf(t, err)
	require.Equal(t, "workflow subagentProvider must be a non-empty normalized string", msg)
	req.SubagentProvider = str("missing")
	_, err = e.eng.Start(t.Context(), req)
	code, msg = codeOf(t, err)
	require.Equal(t, workflow.CodeAgentStart, code)
	require.Equal(t, `no subagent provider registered for "missing"`, msg)

	other, err := workflow.NewEngine(workflow.Host{Actors: e.sys.Actors(), Scope: e.sys.Scope()}, e.sys.Scope(), e.rt,
		workflow.Config{Provider: str("nonexistent")})
	require.NoError(t, err)
	_, err = other.Listen(e.sys.Scope(), e.events.Hear)
	require.NoError(t, err)
	_, err = other.Start(t.Context(), e.request("return 1"))
	code, msg = codeOf(t, err)
	require.Equal(t, workflow.CodeAgentStart, code)
	require.Equal(t, `no subagent provider registered for "nonexistent"`, msg)
	require.Empty(t, e.events.All())
}

func TestWorkflowW5_LimitsParentAndArgsFailSynchronously(t *testing.T) {
	e := newEnv(t, func(c *workflow.Config) { c.MaxTotalAgents = i64(2) })
	for _, c := range []struct {
		n   int64
		msg string
	}{
		{0, "workflow maxTotalAgents must be a positive safe integer"},
		{-1, "workflow maxTotalAgents must be a positive safe integer"},
		{1 << 53, "workflow maxTotalAgents must be a positive safe integer"},
		{3, "workflow maxTotalAgents 3 exceeds the engine ceiling 2"},
	} {
		req := e.request("return 1")
		req.MaxTotalAgents = i64(c.n)
		_, err := e.eng.Start(t.Context(), req)
		code, msg := codeOf(t, err)
		require.Equal(t, workflow.CodeInvalidArgument, code)
		require.Equal(t, c.msg, msg)
	}
	req := e.request("return 1")
	req.MaxTotalAgents = i64(2)
	_, err := e.eng.Prepare(req)
	require.NoError(t, err, "equal to the ceiling is accepted")

	def, err := workflow.NewEngine(workflow.Host{Actors: e.sys.Actors(), Scope: e.sys.Scope()}, e.sys.Scope(), e.rt, workflow.Config{Provider: str("stub")})
	require.NoError(t, err)
	_, err = def.Listen(e.sys.Scope(), e.events.Hear)
	require.NoError(t, err)
	req.MaxTotalAgents = i64(2000)
	_, err = def.Start(t.Context(), req)
	_, msg := codeOf(t, err)
	require.Equal(t, "workflow maxTotalAgents 2000 exceeds the engine ceiling 1000", msg)

	req = e.request("return 1")
	req.Parent = nil
	_, err = e.eng.Start(t.Context(), req)
	code, msg := codeOf(t, err)
	require.Equal(t, workflow.CodeInvalidArgument, code)
	require.Equal(t, "workflow parent agent is required", msg)

	req = e.request("return 1")
	req.Args = json.RawMessage(`{"a":`)
	_, err = e.eng.Start(t.Context(), req)
	code, msg = codeOf(t, err)
	require.Equal(t, workflow.CodeInvalidArgument, code)
	require.True(t, strings.HasPrefix(msg, "workflow args must be JSON data: "), msg)
	require.Empty(t, e.events.All())
}
