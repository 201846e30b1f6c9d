package owner

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestValidMessageReplacesInvalidUTF8(t *testing.T) {
	more := []string{"fine", "closing \xff message", "\xe7\x95"}
	m := validMessage(Message{ID: "m1", Role: "user", Text: "Background subagent c1 \xfe finished",
		More: more, Source: Source{Kind: "subagent-settled", Summary: "sum \xc3"}})
	require.Equal(t, "Background subagent c1 \uFFFD finished", m.Text)
	require.Equal(t, []string{"fine", "closing \uFFFD message", "\uFFFD"}, m.More)
	require.Equal(t, "sum \uFFFD", m.Source.Summary)
	require.Equal(t, "closing \xff message", more[1], "the sender's slice is not written")

	ok := Message{Text: "界", More: []string{"a"}}
	require.Equal(t, ok, validMessage(ok), "valid text is unchanged")
}
