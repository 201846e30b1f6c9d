package session

import (
	"context"
	"slices"
	"sync"
)

// Memory is an in-memory Store for tests. Its lock guards only its own map.
//
// A session's log and inbox are kept in chunks (chunked) that are never copied
// once full, so a write costs its own entries, not the copies a growing slice
// would make; the whole session is laid out flat only for the reads that return
// or scan all of it (Activate, Load, Resume, ResumeAccept).
type Memory struct {
	mu       sync.Mutex
	sessions map[string]*memSession
}

// memSession is one session of a Memory.
type memSession struct {
	header Header
	log    chunked[Entry]
	inbox  chunked[InboxMessage]
}

// snapshot lays the session out flat, in slices of its own.
func (s *memSession) snapshot() Snapshot {
	return Snapshot{Header: s.header, Log: s.log.flat(), Inbox: s.inbox.flat()}
}

// appendLog appends entries to the log, each with its seq (its position from 1).
func (s *memSession) appendLog(entries []Entry) {
	for _, e := range entries {
		e.Seq = uint64(s.log.n + 1)
		s.log.add(e)
	}
}

// accept appends msg to the inbox with its seq (its position from 1).
func (s *memSession) accept(msg InboxMessage) InboxMessage {
	msg.Seq = uint64(s.inbox.n + 1)
	s.inbox.add(msg)
	return msg
}

// chunked is an append-only list in chunks of 8, 16, … up to maxChunk elements.
// A full chunk is never copied again: appending n elements one by one allocates
// about n of them. (append alone grows a slice past 256 elements by about a
// quarter: built one element at a time, it is allocated about four times over
// and copied about as often.)
type chunked[T any] struct {
	chunks [][]T
	n      int // elements in all chunks
}

// maxChunk is the largest chunk's length.
const maxChunk = 256

func (c *chunked[T]) add(v T) {
	k := len(c.chunks)
	if k == 0 || len(c.chunks[k-1]) == cap(c.chunks[k-1]) {
		size := maxChunk
		if k < 5 {
			size = 8 << k
		}
		c.chunks = append(c.chunks, make([]T, 0, size))
		k++
	}
	c.chunks[k-1] = append(c.chunks[k-1], v)
	c.n++
}

// flat returns the elements in order, in a slice of their own (nil if none).
func (c *chunked[T]) flat() []T {
	if c.n == 0 {
		return nil
	}
	return slices.Concat(c.chunks...)
}

// NewMemory returns an empty store.
func NewMemory() *Memory { return &Memory{sessions: map[string]*memSession{}} }

func (m *Memory) Create(ctx context.Context, h Header, entries []Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.sessions[h.ID]; ok {
		return duplicate(h.ID)
	}
	h.Version = HeaderVersion
	s := &memSession{header: h}
	s.appendLog(entries)
	m.sessions[h.ID] = s
	return nil
}

func (m *Memory) get(id string) (*memSession, error) {
	s, ok := m.sessions[id]
	if !ok {
		return nil, ErrNotFound
	}
	return s, nil
}

func (m *Memory) Activate(ctx context.Context, id string) (Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.get(id)
	if err != nil {
		return Snapshot{}, err
	}
	s.header.Epoch++
	return s.snapshot(), nil
}

// Resume derives its answer from the whole session (Snapshot.Resumed): Memory is
// for tests and keeps no restore index, so its cost grows with the log.
func (m *Memory) Resume(ctx context.Context, id string) (Resumed, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.get(id)
	if err != nil {
		return Resumed{}, err
	}
	s.header.Epoch++
	return s.snapshot().Resumed(), nil
}

// ResumeAccept is check of the head, then Resume and Accept, and start's Append
// if msg is then the only open message, under one lock.
func (m *Memory) ResumeAccept(ctx context.Context, id string, msg InboxMessage, start []Entry, check func(Head) error) (Resumed, InboxMessage, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.get(id)
	if err != nil {
		return Resumed{}, InboxMessage{}, false, err
	}
	if check != nil {
		if err := check(s.head()); err != nil {
			return Resumed{}, InboxMessage{}, false, err
		}
	}
	s.header.Epoch++
	msg = s.accept(msg)
	r := s.snapshot().Resumed()
	if len(start) == 0 || !onlyOpen(r, msg) {
		return r, msg, false, nil
	}
	s.appendLog(start)
	return r, msg, true, nil
}

// History reads the log's messages up to upTo (Snapshot.MessagesUpTo).
func (m *Memory) History(ctx context.Context, id string, upTo uint64) ([]Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.get(id)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, chunk := range s.log.chunks {
		for _, e := range chunk {
			if e.Seq > upTo {
				return out, nil
			}
			if e.Kind == EntryMessage {
				out = append(out, e)
			}
		}
	}
	return out, nil
}

func (m *Memory) Load(ctx context.Context, id string) (Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.get(id)
	if err != nil {
		return Snapshot{}, err
	}
	return s.snapshot(), nil
}

// Head reads the log up to its first descriptor after the fork seed
// (Snapshot.FirstDescriptor), normally its first entries only.
func (m *Memory) Head(ctx context.Context, id string) (Head, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.get(id)
	if err != nil {
		return Head{}, err
	}
	return s.head(), nil
}

// head is the session's header and its first descriptor after the fork seed.
func (s *memSession) head() Head {
	h := Head{Header: s.header}
	i := 0
	for _, chunk := range s.log.chunks {
		for _, e := range chunk {
			if i >= s.header.SeedLength && e.Kind == EntryDescriptor {
				h.Descriptor = e.Descriptor
				return h
			}
			i++
		}
	}
	return h
}

func (m *Memory) Accept(ctx context.Context, id string, epoch uint64, msg InboxMessage) (InboxMessage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.get(id)
	if err != nil {
		return InboxMessage{}, err
	}
	if s.header.Epoch != epoch {
		return InboxMessage{}, ErrStaleEpoch
	}
	return s.accept(msg), nil
}

func (m *Memory) Append(ctx context.Context, id string, epoch uint64, entries ...Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.get(id)
	if err != nil {
		return err
	}
	if s.header.Epoch != epoch {
		return ErrStaleEpoch
	}
	s.appendLog(entries)
	return nil
}

func (m *Memory) IDs(ctx context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]string, 0, len(m.sessions))
	for id := range m.sessions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}

func (m *Memory) Delete(ctx context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.sessions, id)
	return nil
}

func (m *Memory) Close() error { return nil }
