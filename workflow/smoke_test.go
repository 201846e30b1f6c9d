package workflow_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/workflow"
)

func TestSmoke(t *testing.T) {
	e := newEnv(t)
	res := e.runScript("phase('a')\nconst x = await agent('hello')\nreturn { x, n: 6 * 7 }")
	require.Equal(t, workflow.StopCompleted, res.StopReason, res.Error)
	require.JSONEq(t, `{"x":"stub reply","n":42}`, string(res.Value))
	require.Equal(t, 1, res.AgentsStarted)
}
