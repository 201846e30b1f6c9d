// Package output is the bounded output buffer of stream producers: the producer's
// readers write into it, the job's ReadOutput takes the unread delta, rendered as
// SPEC §3.12 renders a model delta (stdout, then one [stderr] section, then a
// dropped-output line when unread bytes had to be evicted).
package output

import (
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/troupe-rt/troupe/actors/job"
)

// DefaultRetainBytes bounds the unread output a Buffer keeps (SPEC §2.13's live retention).
const DefaultRetainBytes = 256 << 10

// DroppedLine is appended, on its own line, to a delta from which bytes were evicted.
const DroppedLine = "[some output was dropped from memory; full output: (unavailable)]"

// Channel names the stream a chunk came from.
type Channel uint8

const (
	Stdout Channel = iota
	Stderr
	Log // narration for humans: kept out of the model's delta
)

type chunk struct {
	ch   Channel
	data []byte
}

// Buffer holds unread output up to a byte budget; older unread bytes are evicted
// first (keeping a UTF-8-safe tail) and counted as dropped. It is a leaf helper:
// its lock guards only its own bytes, written by producer goroutines and read by
// whoever calls ReadDelta.
type Buffer struct {
	retain int
	mu     struct {
		sync.Mutex
		chunks  []chunk // unread, oldest first
		size    int
		dropped int64     // evicted since the last ReadDelta
		total   int64     // bytes ever written
		ended   [Log]bool // End was called for the channel
	}
}

// New returns a buffer keeping at most retain unread bytes (≤ 0: the default).
func New(retain int) *Buffer {
	if retain <= 0 {
		retain = DefaultRetainBytes
	}
	return &Buffer{retain: retain}
}

// Write appends p to channel ch. It never blocks on a reader.
func (b *Buffer) Write(ch Channel, p []byte) {
	if len(p) == 0 || ch == Log {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mu.total += int64(len(p))
	if len(p) > b.retain {
		cut := tailStart(p, len(p)-b.retain)
		b.mu.dropped += int64(cut)
		p = p[cut:]
	}
	b.mu.chunks = append(b.mu.chunks, chunk{ch: ch, data: append([]byte(nil), p...)})
	b.mu.size += len(p)
	for b.mu.size > b.retain {
		head := &b.mu.chunks[0]
		over := b.mu.size - b.retain
		if over >= len(head.data) {
			b.mu.size -= len(head.data)
			b.mu.dropped += int64(len(head.data))
			b.mu.chunks[0] = chunk{}
			b.mu.chunks = b.mu.chunks[1:]
			continue
		}
		b.trimHead(over)
	}
	// A head chunk that now starts inside a rune (the rune began in an evicted
	// chunk) loses those continuation bytes too: the delta stays valid UTF-8.
	if b.mu.dropped > 0 && len(b.mu.chunks) > 0 {
		b.trimHead(0)
	}
}

// trimHead drops at least n bytes from the head chunk, up to the next rune start.
func (b *Buffer) trimHead(n int) {
	head := &b.mu.chunks[0]
	cut := tailStart(head.data, n)
	head.data = head.data[cut:]
	b.mu.size -= cut
	b.mu.dropped += int64(cut)
	if len(head.data) == 0 {
		b.mu.chunks[0] = chunk{}
		b.mu.chunks = b.mu.chunks[1:]
	}
}

// tailStart returns the first index ≥ min at which a UTF-8 sequence starts (or len(p)).
func tailStart(p []byte, min int) int {
	i := min
	for i < len(p) && !utf8.RuneStart(p[i]) {
		i++
	}
	return i
}

// Writer returns an io.Writer that appends to channel ch.
func (b *Buffer) Writer(ch Channel) *ChannelWriter { return &ChannelWriter{b: b, ch: ch} }

// ChannelWriter writes into one channel of a Buffer.
type ChannelWriter struct {
	b  *Buffer
	ch Channel
}

func (w *ChannelWriter) Write(p []byte) (int, error) {
	w.b.Write(w.ch, p)
	return len(p), nil
}

// End marks channel ch finished (its writer reached EOF): a trailing incomplete
// UTF-8 sequence ReadDelta was holding back for it is now taken as it is.
func (b *Buffer) End(ch Channel) {
	if ch >= Log {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mu.ended[ch] = true
}

// ReadDelta takes the unread output and renders it: stdout chunks in order; then, if
// there is stderr output, one "[stderr]\n" section (after a "\n" when the stdout part
// does not end with one); then DroppedLine on its own line if bytes were evicted.
//
// The delta is valid UTF-8. A channel's trailing incomplete sequence (a rune whose
// rest a later write brings) stays unread until it is complete or End is called
// for the channel; invalid bytes become U+FFFD.
func (b *Buffer) ReadDelta() (string, error) {
	b.mu.Lock()
	chunks, dropped := b.mu.chunks, b.mu.dropped
	b.mu.chunks, b.mu.size, b.mu.dropped = nil, 0, 0
	var out, errs strings.Builder
	for _, c := range chunks {
		if c.ch == Stderr {
			errs.Write(c.data)
		} else {
			out.Write(c.data)
		}
	}
	outText := b.holdBack(Stdout, out.String())
	errText := b.holdBack(Stderr, errs.String())
	b.mu.Unlock()
	out.Reset()
	out.WriteString(strings.ToValidUTF8(outText, "\uFFFD"))
	errText = strings.ToValidUTF8(errText, "\uFFFD")
	if len(errText) > 0 {
		if out.Len() > 0 && !strings.HasSuffix(out.String(), "\n") {
			out.WriteByte('\n')
		}
		out.WriteString("[stderr]\n")
		out.WriteString(errText)
	}
	if dropped > 0 {
		if out.Len() > 0 && !strings.HasSuffix(out.String(), "\n") {
			out.WriteByte('\n')
		}
		out.WriteString(DroppedLine)
	}
	return out.String(), nil
}

// holdBack returns text without its trailing incomplete UTF-8 sequence, which goes
// back into the buffer as ch's unread head, unless ch has ended. Callers hold the lock.
func (b *Buffer) holdBack(ch Channel, text string) string {
	if b.mu.ended[ch] {
		return text
	}
	whole, partial := job.SplitPartial(text)
	if partial != "" {
		b.mu.chunks = append([]chunk{{ch: ch, data: []byte(partial)}}, b.mu.chunks...)
		b.mu.size += len(partial)
	}
	return whole
}

// Total returns how many bytes were ever written.
func (b *Buffer) Total() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mu.total
}

// Unread returns how many unread bytes are held.
func (b *Buffer) Unread() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mu.size
}
