package job

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// modelRecord is the record as it was before its bytes moved into a ring (one
// string per chunk, evicted after the append): the ring must read back the same.
type modelRecord struct {
	chunks          []Chunk
	size            int
	total, earliest int64
	gap             bool
	retain          int
	partial         map[string]string
}

func (m *modelRecord) append(text string, opts AppendOptions) {
	if text == "" {
		return
	}
	if p := m.partial[opts.Channel]; p != "" {
		text = p + text
		delete(m.partial, opts.Channel)
	}
	text, partial := SplitPartial(text)
	if partial != "" {
		m.partial[opts.Channel] = partial
	}
	if text == "" {
		m.gap = m.gap || opts.GapBefore
		return
	}
	text = ValidText(text)
	offset := m.total
	m.total += int64(len(text))
	gap := opts.GapBefore || m.gap
	m.gap = false
	if len(text) > m.retain {
		cut := len(text) - m.retain
		for cut < len(text) && !utf8.RuneStart(text[cut]) {
			cut++
		}
		text, offset, gap = text[cut:], offset+int64(cut), true
	}
	m.chunks = append(m.chunks, Chunk{Offset: offset, Text: text, Channel: opts.Channel, GapBefore: gap})
	m.size += len(text)
	for m.size > m.retain && len(m.chunks) > 1 {
		m.size -= len(m.chunks[0].Text)
		m.chunks = m.chunks[1:]
		m.chunks[0].GapBefore = true
	}
	m.earliest = m.chunks[0].Offset
}

func (m *modelRecord) read(from int64) ([]Chunk, int64, bool) {
	var out []Chunk
	for _, c := range m.chunks {
		if c.Offset+int64(len(c.Text)) <= from {
			continue
		}
		if c.Offset < from {
			skip := int(from - c.Offset)
			for skip < len(c.Text) && !utf8.RuneStart(c.Text[skip]) {
				skip++
			}
			c = Chunk{Offset: c.Offset + int64(skip), Text: c.Text[skip:], Channel: c.Channel}
		}
		out = append(out, c)
	}
	return out, m.total, from < m.earliest
}

// TestRecordRingReadsBackAsChunkStrings appends random pieces (runes split across
// appends, invalid bytes, pieces over the budget, two channels) to a record with a
// small budget and checks every read, from every kind of offset, against the model.
func TestRecordRingReadsBackAsChunkStrings(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 15))
	alphabet := []string{"a", "\n", "é", "日本", "🎉", "\xff", "x"}
	for round := range 20 {
		retain := 16 + rng.IntN(4096)
		r := NewRecord()
		r.mu.retain = retain
		m := &modelRecord{retain: retain, partial: map[string]string{}}
		for range 300 {
			var piece strings.Builder
			for n := rng.IntN(retain * 3 / 2); piece.Len() < n; {
				piece.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
			raw := piece.String()
			raw = raw[:rng.IntN(len(raw)+1)] // may split a rune
			opts := AppendOptions{Channel: []string{"stdout", "stderr"}[rng.IntN(2)], GapBefore: rng.IntN(10) == 0}
			r.Append(raw, opts)
			m.append(raw, opts)
			_, total := r.Bounds()
			for _, from := range []int64{0, m.earliest, m.earliest + 1, total - 1, total, rng.Int64N(total + 1)} {
				if from < 0 {
					continue
				}
				got, next, lossy, err := r.Read(from)
				require.NoError(t, err)
				want, wnext, wlossy := m.read(from)
				require.Equal(t, want, got, "round %d from %d", round, from)
				require.Equal(t, wnext, next)
				require.Equal(t, wlossy, lossy)
			}
			require.LessOrEqual(t, len(r.mu.ring), retain, "the ring stays within the budget")
		}
		r.Seal()
		require.LessOrEqual(t, len(r.mu.ring), r.mu.size, "a sealed record keeps only what it retains")
	}
}

// TestRecordAppendBytesAllocatesNothingInSteadyState: a producer's reads, recorded
// through AppendBytes, cost no allocation once the ring has grown.
func TestRecordAppendBytesAllocatesNothingInSteadyState(t *testing.T) {
	r := NewRecord()
	p := []byte(strings.Repeat("0123456789abcdef", 2<<10)) // 32 KiB
	for range 16 {
		r.AppendBytes(p, AppendOptions{Channel: "stdout"})
	}
	allocs := testing.AllocsPerRun(100, func() { r.AppendBytes(p, AppendOptions{Channel: "stdout"}) })
	require.Less(t, allocs, 0.1)
}
