package owner

import (
	"strings"
	"testing"
	"unicode/utf16"

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

// TestBoundSummaryShortcutMatchesTheUnitCount checks BoundSummary's shortcut (a
// string of at most SummaryUnits bytes is returned as is) against the UTF-16 count
// it stands for, on strings around the bound in every encoded width and with
// invalid bytes: each one the count keeps whole is returned unchanged, and every
// result is within the bound.
func TestBoundSummaryShortcutMatchesTheUnitCount(t *testing.T) {
	units := func(s string) int { return len(utf16.Encode([]rune(s))) }
	for _, unit := range []string{"x", "é", "界", "😀", "\xff", "\xe7\x95"} {
		for n := 0; n <= SummaryUnits+8; n++ {
			s := strings.Repeat(unit, n/len(unit)+1)[:n]
			got := BoundSummary(s)
			require.LessOrEqual(t, units(got), SummaryUnits, "%q", s)
			if units(s) <= SummaryUnits {
				require.Equal(t, s, got, "a summary within the bound is unchanged: %q", s)
			} else {
				require.True(t, strings.HasSuffix(got, "…"), "%q", s)
			}
		}
	}
}
