package jobtools

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/tools"
)

// The cards of SPEC §3.5 for calls that name no usable job id, and for ids a
// person must not see raw (bounded, valid UTF-8, one line).
func TestPresentCallEdgeCases(t *testing.T) {
	card := func(name, args string) Card {
		c, ok := PresentCall(tools.Call{Name: name, Args: json.RawMessage(args)})
		require.True(t, ok, name)
		return c
	}
	for _, args := range []string{``, `{}`, `{"job_id":""}`, `{"job_id":7}`, `{"job_id":`, `[1]`} {
		require.Equal(t, Card{Card: "generic", Title: "Read output from background job", Kind: "read"}, card(NameOutput, args), args)
		require.Equal(t, Card{Card: "generic", Title: "Kill background job", Kind: "execute"}, card(NameKill, args), args)
	}
	require.Equal(t, Card{Card: "generic", Title: "List background jobs", Kind: "read"}, card(NameList, `{"x":1}`))

	_, ok := PresentCall(tools.Call{Name: "subagent", Args: json.RawMessage(`{"job_id":"bash-1"}`)})
	require.False(t, ok, "only the job tools have cards")

	bad := card(NameKill, "{\"job_id\":\"bash-1\\n\\u0007x\xff\"}")
	require.Equal(t, "bash-1\uFFFD\uFFFDx\uFFFD", bad.RawInput, "control characters and invalid bytes become U+FFFD")
	require.Equal(t, "Kill background job "+bad.RawInput, bad.Title)

	exact := strings.Repeat("a", MaxCardIDBytes)
	require.Equal(t, exact, card(NameOutput, `{"job_id":"`+exact+`"}`).RawInput, "an id of exactly the cap is whole")

	long := card(NameOutput, `{"job_id":"`+strings.Repeat("界", 1000)+`"}`)
	require.LessOrEqual(t, len(long.RawInput), MaxCardIDBytes)
	require.True(t, utf8.ValidString(long.RawInput))
	require.True(t, strings.HasSuffix(long.RawInput, "界…"), "cut at a rune boundary, marked: %q", long.RawInput)
	require.Equal(t, "Read output from background job "+long.RawInput, long.Title)
}
