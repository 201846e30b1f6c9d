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

// blockSize is the size of the blocks a Buffer stores its bytes in: a write fills
// the tail block of its channel before taking a new one, so a producer's reads
// (32 KiB, producers/process) cost no allocation once blocks circulate.
const blockSize = 32 << 10

type block [blockSize]byte

// blocks recycles the blocks of evicted and read bytes across every Buffer: an
// idle buffer holds none, and the pool's are the GC's to reclaim.
var blocks = sync.Pool{New: func() any { return new(block) }}

// smallSpan is the capacity of the first span of a buffer holding nothing: an
// owned slice rather than a pooled block, so a job that printed a line and idles
// holds bytes, not a 32 KiB block. Writes past it, or larger, take blocks.
const smallSpan = 1 << 10

// span is a run of one channel's unread bytes: mem()[lo:hi], in a pooled block
// (blk) or an owned slice (own).
type span struct {
	ch     Channel
	blk    *block
	own    []byte
	lo, hi int
}

func (c *span) mem() []byte {
	if c.blk != nil {
		return c.blk[:]
	}
	return c.own
}

func (c *span) data() []byte { return c.mem()[c.lo:c.hi] }

// release returns c's block, if it has one, to the pool.
func (c *span) release() {
	if c.blk != nil {
		blocks.Put(c.blk)
	}
}

// Buffer holds unread output up to a byte budget; older unread bytes are evicted
// first (keeping a UTF-8-safe tail) and counted as dropped. It is a leaf helper:
// its lock guards only its own bytes, written by producer goroutines and read by
// whoever calls ReadDelta.
type Buffer struct {
	retain int
	mu     struct {
		sync.Mutex
		chunks  []span // unread, oldest first
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

// Write appends p to channel ch (copying it: the caller keeps p). It never blocks
// on a reader.
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
	// Evict what p's bytes would push past the budget before storing them, so
	// the buffer never holds more than retain plus one partly filled block.
	b.evict(b.mu.size + len(p) - b.retain)
	for len(p) > 0 {
		n := len(b.mu.chunks)
		if n == 0 || b.mu.chunks[n-1].ch != ch || b.mu.chunks[n-1].hi == len(b.mu.chunks[n-1].mem()) {
			if n == 0 && len(p) <= smallSpan {
				b.mu.chunks = append(b.mu.chunks, span{ch: ch, own: make([]byte, smallSpan)})
			} else {
				b.mu.chunks = append(b.mu.chunks, span{ch: ch, blk: blocks.Get().(*block)})
			}
			n++
		}
		tail := &b.mu.chunks[n-1]
		k := copy(tail.mem()[tail.hi:], p)
		tail.hi += k
		b.mu.size += k
		p = p[k:]
	}
	// A head chunk that now starts inside a rune (the rune began in evicted
	// bytes) loses those continuation bytes too: the delta stays valid UTF-8.
	for b.mu.dropped > 0 && len(b.mu.chunks) > 0 && !utf8.RuneStart(b.mu.chunks[0].data()[0]) {
		b.trimHead(0)
	}
}

// evict drops at least over bytes (if positive) from the head, whole chunks
// first, then up to a rune start inside the last one. Callers hold the lock.
func (b *Buffer) evict(over int) {
	for over > 0 && len(b.mu.chunks) > 0 {
		head := &b.mu.chunks[0]
		if n := head.hi - head.lo; over >= n {
			b.mu.size -= n
			b.mu.dropped += int64(n)
			over -= n
			b.popHead()
			continue
		}
		before := b.mu.size
		b.trimHead(over)
		over -= before - b.mu.size
	}
}

// popHead removes the head chunk and recycles its block. Callers hold the lock.
func (b *Buffer) popHead() {
	b.mu.chunks[0].release()
	b.mu.chunks[0] = span{}
	b.mu.chunks = b.mu.chunks[1:]
}

// trimHead drops at least n bytes from the head chunk, up to the next rune start.
func (b *Buffer) trimHead(n int) {
	head := &b.mu.chunks[0]
	cut := tailStart(head.data(), n)
	head.lo += cut
	b.mu.size -= cut
	b.mu.dropped += int64(cut)
	if head.lo == head.hi {
		b.popHead()
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
	var nOut, nErr int
	for i := range chunks {
		if chunks[i].ch == Stderr {
			nErr += chunks[i].hi - chunks[i].lo
		} else {
			nOut += chunks[i].hi - chunks[i].lo
		}
	}
	var out, errs strings.Builder
	out.Grow(nOut)
	errs.Grow(nErr)
	for i := range chunks {
		if chunks[i].ch == Stderr {
			errs.Write(chunks[i].data())
		} else {
			out.Write(chunks[i].data())
		}
		chunks[i].release()
		chunks[i] = span{}
	}
	outText := b.holdBack(Stdout, out.String())
	errText := b.holdBack(Stderr, errs.String())
	b.mu.Unlock()
	outText = job.ValidText(outText)
	errText = job.ValidText(errText)
	if errText == "" && dropped == 0 {
		return outText, nil // the common case: no second copy
	}
	var d strings.Builder
	d.Grow(len(outText) + 1 + len("[stderr]\n") + len(errText) + 1 + len(DroppedLine))
	d.WriteString(outText)
	if len(errText) > 0 {
		if d.Len() > 0 && !strings.HasSuffix(outText, "\n") {
			d.WriteByte('\n')
		}
		d.WriteString("[stderr]\n")
		d.WriteString(errText)
	}
	if dropped > 0 {
		if d.Len() > 0 && !strings.HasSuffix(d.String(), "\n") {
			d.WriteByte('\n')
		}
		d.WriteString(DroppedLine)
	}
	return d.String(), nil
}

// holdBack returns text without its trailing incomplete UTF-8 sequence, which goes
// back into the buffer as ch's unread head, unless ch has ended. Callers hold the lock.
func (b *Buffer) holdBack(ch Channel, text string) string {
	if b.mu.ended[ch] {
		return text
	}
	whole, partial := job.SplitPartial(text)
	if partial != "" {
		c := span{ch: ch, own: []byte(partial)}
		c.hi = len(partial)
		b.mu.chunks = append([]span{c}, b.mu.chunks...)
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
