package output

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// chunk is one write of a test case.
type chunk struct {
	ch   Channel
	data []byte
}

func TestReadDeltaRendersStdoutThenStderrSection(t *testing.T) {
	cases := []struct {
		name   string
		writes []chunk
		want   string
	}{
		{"empty", nil, ""},
		{"stdout only", []chunk{{Stdout, []byte("a\n")}, {Stdout, []byte("b")}}, "a\nb"},
		{"stderr after newline", []chunk{{Stdout, []byte("out\n")}, {Stderr, []byte("warn\n")}}, "out\n[stderr]\nwarn\n"},
		{"stderr needs separator", []chunk{{Stdout, []byte("out")}, {Stderr, []byte("warn")}}, "out\n[stderr]\nwarn"},
		{"interleaved", []chunk{{Stderr, []byte("e1\n")}, {Stdout, []byte("o1\n")}, {Stderr, []byte("e2\n")}}, "o1\n[stderr]\ne1\ne2\n"},
		{"stderr only", []chunk{{Stderr, []byte("boom\n")}}, "[stderr]\nboom\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := New(0)
			for _, w := range c.writes {
				b.Write(w.ch, w.data)
			}
			got, err := b.ReadDelta()
			require.NoError(t, err)
			require.Equal(t, c.want, got)
			again, _ := b.ReadDelta()
			require.Equal(t, "", again, "a read consumes")
		})
	}
}

func TestEvictionKeepsBoundedTailWithMarker(t *testing.T) {
	b := New(16)
	b.Write(Stdout, []byte(strings.Repeat("x", 40)))
	require.Equal(t, 16, b.Unread())
	got, _ := b.ReadDelta()
	require.Equal(t, strings.Repeat("x", 16)+"\n"+DroppedLine, got)
	require.NotContains(t, got, strings.Repeat("x", 17))
	got, _ = b.ReadDelta()
	require.Equal(t, "", got, "the marker is reported once")

	for range 1000 {
		b.Write(Stdout, []byte("0123456789\n"))
	}
	require.LessOrEqual(t, b.Unread(), 16)
	require.Equal(t, int64(40+11000), b.Total())
}

func TestEvictionNeverSplitsARune(t *testing.T) {
	b := New(10)
	b.Write(Stdout, []byte(strings.Repeat("é", 20))) // 2 bytes each
	got, _ := b.ReadDelta()
	body := strings.TrimSuffix(got, "\n"+DroppedLine)
	require.True(t, utf8.ValidString(body))
	require.LessOrEqual(t, len(body), 10)
	b.Write(Stdout, []byte("ab"))
	b.Write(Stdout, []byte(strings.Repeat("日", 4))) // 12 bytes: evicts into the middle
	got, _ = b.ReadDelta()
	require.True(t, utf8.ValidString(got))
	require.Contains(t, got, DroppedLine)
}

func FuzzBufferStaysBoundedAndValid(f *testing.F) {
	f.Add([]byte("hello\nwörld\n"), uint8(7), true)
	f.Add([]byte(strings.Repeat("日本", 30)), uint8(5), false)
	f.Fuzz(func(t *testing.T, data []byte, retain uint8, stderr bool) {
		if !utf8.Valid(data) {
			return
		}
		limit := int(retain%64) + 4
		b := New(limit)
		ch := Stdout
		if stderr {
			ch = Stderr
		}
		for i := 0; i < len(data); i += 3 {
			b.Write(ch, data[i:min(i+3, len(data))])
			require.LessOrEqual(t, b.Unread(), limit)
		}
		got, _ := b.ReadDelta()
		require.True(t, utf8.ValidString(got), "delta %q", got)
	})
}

func TestReadDeltaHoldsASplitRuneUntilItIsWholeOrTheChannelEnds(t *testing.T) {
	b := New(0)
	b.Write(Stdout, []byte("a\xffb \xe7\x95")) // an invalid byte, then a rune cut in two
	b.Write(Stderr, []byte("e\xf0\x9f"))
	got, err := b.ReadDelta()
	require.NoError(t, err)
	require.Equal(t, "a\uFFFDb \n[stderr]\ne", got, "the incomplete tails wait")
	require.Equal(t, 4, b.Unread(), "the held bytes stay unread")

	b.Write(Stdout, []byte("\x8c!"))
	b.Write(Stderr, []byte("\x98\x80"))
	got, _ = b.ReadDelta()
	require.Equal(t, "界!\n[stderr]\n😀", got, "completed runes come whole")

	b.Write(Stdout, []byte("end \xe7"))
	got, _ = b.ReadDelta()
	require.Equal(t, "end ", got)
	b.End(Stdout)
	got, _ = b.ReadDelta()
	require.Equal(t, "\uFFFD", got, "after End the tail is taken as it is")
	b.End(Log) // a no-op, never a panic
}

func TestReadDeltaIsValidUTF8WhateverIsWritten(t *testing.T) {
	b := New(16)
	in := []byte("\xff\xfe界界界界界界界界\xe7\x95\x8c\xf0\x9f\x98\x80\x80\x80abc\xe7")
	for i := range in {
		b.Write(Channel(i%2), in[i:i+1]) // one byte at a time, alternating channels
		d, err := b.ReadDelta()
		require.NoError(t, err)
		require.True(t, utf8.ValidString(d), "%q", d)
	}
	b.End(Stdout)
	b.End(Stderr)
	d, _ := b.ReadDelta()
	require.True(t, utf8.ValidString(d), "%q", d)
}

// TestWritesAcrossBlocksReadBackWhole: output written in odd-sized pieces, runes
// split across pieces and across the buffer's storage blocks, reads back exactly
// (within the budget) or as its newest whole-rune tail plus the marker (past it).
func TestWritesAcrossBlocksReadBackWhole(t *testing.T) {
	var text strings.Builder
	for i := 0; text.Len() < 3*blockSize+1000; i++ {
		text.WriteString("line " + strings.Repeat("é日x", i%7) + "\n")
	}
	data := []byte(text.String())
	for _, retain := range []int{len(data), len(data) - 1, blockSize + 5, 1000} {
		b := New(retain)
		for i, step := 0, 1; i < len(data); i, step = i+step, step%4093+517 {
			b.Write(Stdout, data[i:min(i+step, len(data))])
			require.LessOrEqual(t, b.Unread(), retain)
		}
		b.End(Stdout)
		got, _ := b.ReadDelta()
		if retain >= len(data) {
			require.Equal(t, string(data), got, "retain %d", retain)
			continue
		}
		body, ok := strings.CutSuffix(got, DroppedLine) // the output ends with "\n": none is added
		require.True(t, ok, "retain %d: marker", retain)
		require.True(t, strings.HasSuffix(string(data), body), "retain %d: a tail of the output", retain)
		require.True(t, utf8.ValidString(body))
		require.LessOrEqual(t, len(body), retain)
		require.GreaterOrEqual(t, len(body), retain-utf8.UTFMax, "retain %d: the budget is used", retain)
	}
}

// TestSmallOutputHoldsNoBlock: a line nobody reads is held in a small owned
// slice, not a pooled 32 KiB block; a stream of reads takes blocks and, once they
// circulate, writes allocate nothing.
func TestSmallOutputHoldsNoBlock(t *testing.T) {
	b := New(0)
	b.Write(Stdout, []byte("hi\n"))
	require.Len(t, b.mu.chunks, 1)
	require.Nil(t, b.mu.chunks[0].blk)
	require.Equal(t, smallSpan, cap(b.mu.chunks[0].own))

	p := []byte(strings.Repeat("x", blockSize))
	for range 16 { // past the budget: evicted blocks go back to the pool
		b.Write(Stdout, p)
	}
	allocs := testing.AllocsPerRun(100, func() { b.Write(Stdout, p) })
	require.Less(t, allocs, 0.5, "a steady stream of writes reuses blocks")
	got, _ := b.ReadDelta()
	require.LessOrEqual(t, len(got), DefaultRetainBytes+1+len(DroppedLine))
}
