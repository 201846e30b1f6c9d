package job

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestValidKind(t *testing.T) {
	for _, k := range []string{"bash", "pty-send", "subagent", "workflow", "a", "a-", "x9", "a-b-c",
		strings.Repeat("z", MaxKindBytes)} {
		require.True(t, ValidKind(k), "%q", k)
	}
	for _, k := range []string{"", "../../etc x\n", "a/b", "bash x", "bash\n", "Bash", "1bash", "-x",
		"bash_x", "bash.x", "bash\x00", "bash\xff", "界", strings.Repeat("z", MaxKindBytes+1)} {
		require.False(t, ValidKind(k), "%q", k)
	}
}

func TestCleanLabel(t *testing.T) {
	long := strings.Repeat("界", MaxLabelBytes) // 3 bytes a rune
	cases := []struct{ in, want string }{
		{"pnpm test", "pnpm test"},
		{"tab\tkept", "tab\tkept"},
		{"a\nb\r\nc\rd\ve\ff\u0085g\u2028h\u2029i", "a↵b↵c↵d↵e↵f↵g↵h↵i"},
		{"esc\x1b[0m del\x7f c1\u009b", "esc\uFFFD[0m del\uFFFD c1\uFFFD"},
		{"bad \xff\xfe\xfd run", "bad \uFFFD run"},
		{"half \xe7\x95", "half \uFFFD"},
		{"literal \uFFFD stays", "literal \uFFFD stays"},
		{strings.Repeat("x", MaxLabelBytes), strings.Repeat("x", MaxLabelBytes)},
		{strings.Repeat("x", MaxLabelBytes+1), strings.Repeat("x", MaxLabelBytes-len(CutMarker)) + CutMarker},
		// The cut never splits a rune: 1021 bytes would, so 1020 (340 runes) are kept.
		{long, strings.Repeat("界", (MaxLabelBytes-len(CutMarker))/3) + CutMarker},
		// Cleaning can grow a label past the cap (1 byte → "↵", 3 bytes): cut too.
		{strings.Repeat("\n", MaxLabelBytes), strings.Repeat("↵", (MaxLabelBytes-len(CutMarker))/3) + CutMarker},
	}
	for _, c := range cases {
		got := CleanLabel(c.in)
		require.Equal(t, c.want, got, "%q", c.in)
		require.LessOrEqual(t, len(got), MaxLabelBytes)
		require.Equal(t, got, CleanLabel(got), "cleaning is idempotent")
	}
}

func TestCleanReasonAndDetailKeepLinesAndCut(t *testing.T) {
	require.Equal(t, "line one\nline two", CleanReason("line one\nline two"))
	require.Equal(t, "stop \uFFFD now", CleanReason("stop \xff now"))
	r := CleanReason(strings.Repeat("r", 1<<20))
	require.Equal(t, strings.Repeat("r", MaxReasonBytes-len(CutMarker))+CutMarker, r)
	d := CleanDetail("\xff" + strings.Repeat("d", 10<<20))
	require.Len(t, d, MaxDetailBytes)
	require.True(t, strings.HasPrefix(d, "\uFFFDddd") && strings.HasSuffix(d, CutMarker))
	require.Equal(t, "exit code: 0", CleanDetail("exit code: 0"))
	require.Equal(t, "", CleanDetail(""))
	require.Equal(t, "boom \uFFFD", ErrorText(errors.New("boom \xc3")))
}

func TestCleanIDAndQuoteBounded(t *testing.T) {
	require.Equal(t, "bash-1 ", CleanID("bash-1 "))
	require.Equal(t, "bash-\uFFFD", CleanID("bash-\xff"))
	require.Len(t, CleanID(strings.Repeat("i", 1<<20)), MaxIDBytes)
	require.Equal(t, `"../../etc x\n"`, QuoteBounded("../../etc x\n", 64))
	require.Equal(t, `"<a&b>\u0000`+"\uFFFD"+`"`, QuoteBounded("<a&b>\x00\xff", 64))
	q := QuoteBounded(strings.Repeat("k", 10<<20), 64)
	require.Equal(t, `"`+strings.Repeat("k", 64-len(CutMarker))+CutMarker+`"`, q)
}

func TestSplitPartial(t *testing.T) {
	cases := []struct{ in, whole, partial string }{
		{"", "", ""},
		{"abc", "abc", ""},
		{"界", "界", ""},
		{"a\xe7", "a", "\xe7"},
		{"a\xe7\x95", "a", "\xe7\x95"},
		{"\xf0\x9f\x98", "", "\xf0\x9f\x98"},
		{"a\xff", "a\xff", ""},            // invalid, not incomplete: taken as it is
		{"a\x95", "a\x95", ""},            // a lone continuation byte
		{"a\xe7\x95\x8c", "a界", ""},       // complete
		{"\xe7\x95\x8c\x8c", "界\x8c", ""}, // a stray continuation after a rune
	}
	for _, c := range cases {
		w, p := SplitPartial(c.in)
		require.Equal(t, c.whole, w, "%q", c.in)
		require.Equal(t, c.partial, p, "%q", c.in)
	}
}

func TestSettleCleansDetailOutputAndReason(t *testing.T) {
	c := NewCore()
	c.KillLanded(true, "why \xff"+strings.Repeat("r", 1<<20))
	d, ok := c.Settle(Outcome{Status: Killed, Detail: "sig \xc3" + strings.Repeat("d", 1<<20), Output: "out \xfe"})
	require.True(t, ok)
	require.True(t, utf8.ValidString(d.Detail) && utf8.ValidString(d.Output))
	require.LessOrEqual(t, len(d.Detail), MaxDetailBytes+2+MaxReasonBytes)
	require.True(t, strings.HasPrefix(d.Detail, "sig \uFFFDddd"))
	require.Contains(t, d.Detail, CutMarker+"; why \uFFFDrrr")
	require.Equal(t, "out \uFFFD", d.Output)
}

func TestRecordHoldsASplitRuneUntilItIsWhole(t *testing.T) {
	r := NewRecord()
	r.Append("a\xffb \xe7\x95", AppendOptions{Channel: "stdout"})
	r.Append("\xf0\x9f", AppendOptions{Channel: "stderr"})
	r.Append("\x8c!", AppendOptions{Channel: "stdout"})
	r.Append("\x98\x80", AppendOptions{Channel: "stderr"})
	r.Append("\xe7", AppendOptions{Channel: "stdout"}) // never completed
	chunks, next, _, err := r.Read(0)
	require.NoError(t, err)
	texts := []string{}
	var size int64
	for _, c := range chunks {
		require.True(t, utf8.ValidString(c.Text))
		require.Equal(t, size, c.Offset, "offsets count recorded bytes")
		size += int64(len(c.Text))
		texts = append(texts, c.Channel+":"+c.Text)
	}
	require.Equal(t, []string{"stdout:a\uFFFDb ", "stdout:界!", "stderr:😀"}, texts)
	require.Equal(t, size, next)
	r.Seal()
	chunks, _, _, _ = r.Read(next)
	require.Len(t, chunks, 1)
	require.Equal(t, Chunk{Offset: next, Text: "\uFFFD", Channel: "stdout"}, chunks[0], "Seal records what never completed")
}
