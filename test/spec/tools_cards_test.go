package spec

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/tools/jobtools"
)

// SPEC §3.5: the UI cards of the job tools (case 79).

func TestSpec079_PresentCallCards(t *testing.T) {
	e := serveTools(t, jobtools.Config{})
	args := map[string]string{
		jobtools.NameOutput: `{"job_id":"bash-1"}`,
		jobtools.NameList:   `{}`,
		jobtools.NameKill:   `{"job_id":"subagent-2"}`,
	}
	want := map[string]string{ // SPEC's objects, as JSON
		jobtools.NameOutput: `{"card":"generic","title":"Read output from background job bash-1","kind":"read","rawInput":"bash-1"}`,
		jobtools.NameList:   `{"card":"generic","title":"List background jobs","kind":"read"}`,
		jobtools.NameKill:   `{"card":"generic","title":"Kill background job subagent-2","kind":"execute","rawInput":"subagent-2"}`,
	}
	registered := e.mount.All()
	require.Len(t, registered, 3)
	for _, tool := range registered {
		card, ok := jobtools.PresentCall(tools.Call{ID: "c-" + tool.Name, Name: tool.Name, Args: json.RawMessage(args[tool.Name])})
		require.True(t, ok, "%s has a card", tool.Name)
		raw, err := json.Marshal(card)
		require.NoError(t, err)
		require.Equal(t, want[tool.Name], string(raw), tool.Name)
	}
	require.Equal(t, jobtools.Card{Card: "generic", Title: "Read output from background job bash-1", Kind: "read", RawInput: "bash-1"},
		must(jobtools.PresentCall(tools.Call{Name: jobtools.NameOutput, Args: json.RawMessage(`{"job_id":"bash-1","wait":true}`)})))
}

func must(card jobtools.Card, ok bool) jobtools.Card {
	if !ok {
		panic("no card")
	}
	return card
}
