package job

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
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
type Record struct {
	mu struct {
		sync.Mutex
		chunks    []Chunk
		size      int
		total     int64 // bytes ever appended (the next offset)
		earliest  int64 // offset of the oldest retained byte
		gap       bool  // the next retained chunk follows dropped bytes
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
func (r *Record) Append(text string, opts AppendOptions) {
	if text == "" {
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
	if p := r.mu.partial[opts.Channel]; p != "" {
		text = p + text
		delete(r.mu.partial, opts.Channel)
	}
	text, partial := SplitPartial(text)
	if partial != "" {
		if r.mu.partial == nil {
			r.mu.partial = map[string]string{}
		}
		r.mu.partial[opts.Channel] = partial
	}
	if text == "" {
		r.mu.gap = r.mu.gap || opts.GapBefore // the gap precedes the held bytes
		r.mu.Unlock()
		return
	}
	ls := r.appendLocked(ValidText(text), opts)
	r.mu.Unlock()
	for _, l := range ls {
		l()
	}
}

// appendLocked records valid text and returns the listeners to call once the lock
// is released. Callers hold the lock.
func (r *Record) appendLocked(text string, opts AppendOptions) []func() {
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
	r.mu.chunks = append(r.mu.chunks, Chunk{Offset: offset, Text: text, Channel: opts.Channel, GapBefore: gap})
	r.mu.size += len(text)
	r.trim(r.mu.retain)
	ls := make([]func(), 0, len(r.mu.listeners))
	for _, l := range r.mu.listeners {
		ls = append(ls, l)
	}
	return ls
}

// trim evicts whole chunks, oldest first, until size ≤ limit (keeping at least the
// newest chunk). Callers hold the lock.
func (r *Record) trim(limit int) {
	for r.mu.size > limit && len(r.mu.chunks) > 1 {
		r.mu.size -= len(r.mu.chunks[0].Text)
		r.mu.chunks[0] = Chunk{}
		r.mu.chunks = r.mu.chunks[1:]
		r.mu.chunks[0].GapBefore = true
	}
	if len(r.mu.chunks) > 0 {
		r.mu.earliest = r.mu.chunks[0].Offset
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
		end := c.Offset + int64(len(c.Text))
		if end <= from {
			continue
		}
		if c.Offset < from { // from falls inside this chunk
			skip := int(from - c.Offset)
			for skip < len(c.Text) && !utf8.RuneStart(c.Text[skip]) {
				skip++
			}
			c = Chunk{Offset: c.Offset + int64(skip), Text: c.Text[skip:], Channel: c.Channel}
		}
		chunks = append(chunks, c)
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
		r.appendLocked(ValidText(r.mu.partial[ch]), AppendOptions{Channel: ch})
	}
	r.mu.partial = nil
	r.mu.settled = true
	r.mu.retain = DefaultSettledRetainBytes
	r.trim(r.mu.retain)
}

const maxSafeInteger = 1<<53 - 1
