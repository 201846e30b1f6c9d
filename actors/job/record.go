package job

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/troupe-rt/troupe/messages"
)

// Retention of an output record (SPEC §2.13).
const (
	DefaultRetainBytes        = 262144 // while live
	DefaultSettledRetainBytes = 16384  // after settlement
)

// Chunk is one appended piece of output at an absolute byte offset.
type Chunk struct {
	Offset    int64
	Text      string
	Channel   string // "stdout", "stderr" or ""
	GapBefore bool   // bytes before this chunk were dropped
}

// Record is a job's non-consuming output record (SPEC §1.3 rule 33, §2.13): what a
// human follows with job.follow, never what the model reads. A producer creates one,
// puts it in its Spec, and Appends to it from its own goroutines; appends made
// before the job is registered are published with the registration. It is a leaf
// helper: its lock guards only its own chunks.
//
// The retained bytes live in one ring (grown on demand up to the retention, shrunk
// to what is kept at Seal), so an append copies its bytes once and allocates
// nothing in steady state; Read makes the strings a follower gets.
type Record struct {
	mu struct {
		sync.Mutex
		ring      []byte   // retained bytes at ring position pos mod len(ring)
		chunks    []rchunk // retained, oldest first
		size      int      // retained bytes (≤ retain)
		stored    int64    // ring position of the next byte stored
		total     int64    // bytes ever appended (the next offset)
		earliest  int64    // offset of the oldest retained byte
		gap       bool     // the next retained chunk follows dropped bytes
		retain    int
		settled   bool
		id        string
		logger    *slog.Logger
		listeners map[uint64]func()
		nextL     uint64
		// partial holds, per channel, a trailing incomplete UTF-8 sequence held back
		// until the next append on that channel completes it (or Seal ends it).
		partial map[string]string
	}
}

// rchunk is one retained append: n bytes at ring position pos, record offset offset.
type rchunk struct {
	offset, pos int64
	n           int
	channel     string
	gap         bool
}

// NewRecord returns an empty record with the default retention.
func NewRecord() *Record {
	r := &Record{}
	r.mu.retain = DefaultRetainBytes
	r.mu.listeners = map[uint64]func(){}
	return r
}

// AppendOptions qualify an append.
type AppendOptions struct {
	Channel   string
	GapBefore bool
}

// Append records text. Empty text is dropped silently; after settlement the text is
// logged and dropped. The oldest chunks are evicted first; a single oversized chunk
// keeps its UTF-8-safe tail and is marked GapBefore.
//
// Recorded text is valid UTF-8 (what job.follow frames carry): invalid sequences
// become U+FFFD, and a rune split across two appends on one channel is recorded
// whole with the second (a trailing incomplete sequence waits for it; Seal records
// one still waiting as U+FFFD). Offsets count the recorded bytes.
func (r *Record) Append(text string, opts AppendOptions) { r.AppendBytes([]byte(text), opts) }

// AppendBytes is Append of p's bytes, which it copies: the caller keeps p (a
// producer's read buffer).
func (r *Record) AppendBytes(p []byte, opts AppendOptions) {
	if len(p) == 0 {
		return
	}
	r.mu.Lock()
	if r.mu.settled {
		id, logger := r.mu.id, r.mu.logger
		r.mu.Unlock()
		if logger != nil {
			logger.Warn(fmt.Sprintf("jobs: append to settled job %s dropped", id))
		}
		return
	}
	if held := r.mu.partial[opts.Channel]; held != "" {
		p = append([]byte(held), p...)
		delete(r.mu.partial, opts.Channel)
	}
	p, partial := splitPartialBytes(p)
	if len(partial) > 0 {
		if r.mu.partial == nil {
			r.mu.partial = map[string]string{}
		}
		r.mu.partial[opts.Channel] = string(partial)
	}
	if len(p) == 0 {
		r.mu.gap = r.mu.gap || opts.GapBefore // the gap precedes the held bytes
		r.mu.Unlock()
		return
	}
	if !utf8.Valid(p) {
		p = []byte(strings.ToValidUTF8(string(p), "\uFFFD"))
	}
	ls := r.appendLocked(p, opts)
	r.mu.Unlock()
	for _, l := range ls {
		l()
	}
}

// splitPartialBytes is SplitPartial on bytes.
func splitPartialBytes(p []byte) (whole, partial []byte) {
	for i := len(p) - 1; i >= 0 && i >= len(p)-(utf8.UTFMax-1); i-- {
		if utf8.RuneStart(p[i]) {
			if !utf8.FullRune(p[i:]) {
				return p[:i], p[i:]
			}
			break
		}
	}
	return p, nil
}

// appendLocked records valid text and returns the listeners to call once the lock
// is released. Callers hold the lock.
func (r *Record) appendLocked(text []byte, opts AppendOptions) []func() {
	offset := r.mu.total
	r.mu.total += int64(len(text))
	gap := opts.GapBefore || r.mu.gap
	r.mu.gap = false
	if len(text) > r.mu.retain {
		cut := len(text) - r.mu.retain
		for cut < len(text) && !utf8.RuneStart(text[cut]) {
			cut++
		}
		text, offset, gap = text[cut:], offset+int64(cut), true
	}
	// Evict the oldest chunks the new one would push past the budget (it is kept
	// even alone over budget: it was cut to it above).
	evicted := false
	for r.mu.size+len(text) > r.mu.retain && len(r.mu.chunks) > 0 {
		r.popHead()
		evicted = true
	}
	if evicted && len(r.mu.chunks) > 0 {
		r.mu.chunks[0].gap = true
	} else if evicted {
		gap = true
	}
	r.reserve(r.mu.size + len(text))
	put(r.mu.ring, r.mu.stored, text)
	r.mu.chunks = append(r.mu.chunks, rchunk{offset: offset, pos: r.mu.stored, n: len(text), channel: opts.Channel, gap: gap})
	r.mu.stored += int64(len(text))
	r.mu.size += len(text)
	r.mu.earliest = r.mu.chunks[0].offset
	ls := make([]func(), 0, len(r.mu.listeners))
	for _, l := range r.mu.listeners {
		ls = append(ls, l)
	}
	return ls
}

// popHead evicts the oldest chunk. Callers hold the lock.
func (r *Record) popHead() {
	r.mu.size -= r.mu.chunks[0].n
	r.mu.chunks[0] = rchunk{}
	r.mu.chunks = r.mu.chunks[1:]
}

// reserve makes the ring hold at least need bytes, keeping the retained ones at
// their positions: it doubles (from 256 B) up to the retention. Callers hold the lock.
func (r *Record) reserve(need int) {
	if need <= len(r.mu.ring) {
		return
	}
	n := max(need, min(max(2*len(r.mu.ring), 256), r.mu.retain))
	r.resize(n)
}

// resize moves the retained bytes into a ring of n bytes (n ≥ size; 0: none).
// Callers hold the lock.
func (r *Record) resize(n int) {
	var ring []byte
	if n > 0 {
		ring = make([]byte, n)
	}
	for _, c := range r.mu.chunks {
		i := int(c.pos % int64(len(r.mu.ring)))
		first := min(c.n, len(r.mu.ring)-i)
		put(ring, c.pos, r.mu.ring[i:i+first])
		put(ring, c.pos+int64(first), r.mu.ring[:c.n-first])
	}
	r.mu.ring = ring
}

// put writes b into ring at position pos (wrapping).
func put(ring []byte, pos int64, b []byte) {
	if len(b) == 0 {
		return
	}
	i := int(pos % int64(len(ring)))
	k := copy(ring[i:], b)
	copy(ring, b[k:])
}

// text returns chunk c's bytes as a string. Callers hold the lock.
func (r *Record) text(c rchunk) string {
	var b strings.Builder
	b.Grow(c.n)
	i := int(c.pos % int64(len(r.mu.ring)))
	first := min(c.n, len(r.mu.ring)-i)
	b.Write(r.mu.ring[i : i+first])
	b.Write(r.mu.ring[:c.n-first])
	return b.String()
}

// trim evicts whole chunks, oldest first, until size ≤ limit (keeping at least the
// newest chunk). Callers hold the lock.
func (r *Record) trim(limit int) {
	for r.mu.size > limit && len(r.mu.chunks) > 1 {
		r.popHead()
		r.mu.chunks[0].gap = true
	}
	if len(r.mu.chunks) > 0 {
		r.mu.earliest = r.mu.chunks[0].offset
	} else {
		r.mu.earliest = r.mu.total
	}
}

// Read returns the retained chunks at or after from (non-consuming), the next offset
// and whether bytes from `from` on were lost (from < earliest).
func (r *Record) Read(from int64) (chunks []Chunk, next int64, lossy bool, err error) {
	if from < 0 || from > maxSafeInteger {
		b, _ := json.Marshal(from)
		return nil, 0, false, messages.Errorf(messages.CodeInvalidSpec,
			"invalid record read offset: expected a non-negative safe integer, got %s", b)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.mu.chunks {
		end := c.offset + int64(c.n)
		if end <= from {
			continue
		}
		text := r.text(c)
		if c.offset < from { // from falls inside this chunk
			skip := int(from - c.offset)
			for skip < len(text) && !utf8.RuneStart(text[skip]) {
				skip++
			}
			chunks = append(chunks, Chunk{Offset: c.offset + int64(skip), Text: text[skip:], Channel: c.channel})
			continue
		}
		chunks = append(chunks, Chunk{Offset: c.offset, Text: text, Channel: c.channel, GapBefore: c.gap})
	}
	return chunks, r.mu.total, from < r.mu.earliest, nil
}

// Bounds returns the offset of the oldest retained byte and the total appended.
func (r *Record) Bounds() (earliest, total int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.earliest, r.mu.total
}

// Subscribe calls fn after each append until the returned cancel is called. fn runs
// on the appending goroutine: it must not block (send a message and return).
func (r *Record) Subscribe(fn func()) (cancel func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.nextL++
	k := r.mu.nextL
	r.mu.listeners[k] = fn
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.mu.listeners, k)
	}
}

// Bind names the record's job for its log lines (the registry calls it at registration).
func (r *Record) Bind(id string, logger *slog.Logger) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.id, r.mu.logger = id, logger
}

// Seal ends the record (the registry calls it at settlement): later appends are
// dropped, and retention shrinks to the settled budget.
func (r *Record) Seal() {
	r.mu.Lock()
	defer r.mu.Unlock()
	// A sequence still incomplete never will be: it is recorded as U+FFFD (in
	// channel order, for determinism). Followers read it with the terminal frame.
	for _, ch := range slices.Sorted(maps.Keys(r.mu.partial)) {
		r.appendLocked([]byte(ValidText(r.mu.partial[ch])), AppendOptions{Channel: ch})
	}
	r.mu.partial = nil
	r.mu.settled = true
	r.mu.retain = DefaultSettledRetainBytes
	r.trim(r.mu.retain)
	r.resize(r.mu.size) // a settled record keeps only what it retains
}

const maxSafeInteger = 1<<53 - 1
