package session

import (
	"context"
	"slices"
	"sync"
)

// Memory is an in-memory Store for tests. Its lock guards only its own map.
type Memory struct {
	mu       sync.Mutex
	sessions map[string]*Snapshot
}

// NewMemory returns an empty store.
func NewMemory() *Memory { return &Memory{sessions: map[string]*Snapshot{}} }

func (m *Memory) Create(ctx context.Context, h Header, entries []Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.sessions[h.ID]; ok {
		return duplicate(h.ID)
	}
	h.Version = HeaderVersion
	s := &Snapshot{Header: h}
	for _, e := range entries {
		e.Seq = uint64(len(s.Log) + 1)
		s.Log = append(s.Log, e)
	}
	m.sessions[h.ID] = s
	return nil
}

func (m *Memory) get(id string) (*Snapshot, error) {
	s, ok := m.sessions[id]
	if !ok {
		return nil, ErrNotFound
	}
	return s, nil
}

func copySnap(s *Snapshot) Snapshot {
	return Snapshot{Header: s.Header, Log: slices.Clone(s.Log), Inbox: slices.Clone(s.Inbox)}
}

func (m *Memory) Activate(ctx context.Context, id string) (Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.get(id)
	if err != nil {
		return Snapshot{}, err
	}
	s.Header.Epoch++
	return copySnap(s), nil
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
	s.Header.Epoch++
	return s.Resumed(), nil
}

// ResumeAccept is Resume and Accept, and start's Append if msg is then the only
// open message, under one lock.
func (m *Memory) ResumeAccept(ctx context.Context, id string, msg InboxMessage, start []Entry) (Resumed, InboxMessage, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.get(id)
	if err != nil {
		return Resumed{}, InboxMessage{}, false, err
	}
	s.Header.Epoch++
	msg.Seq = uint64(len(s.Inbox) + 1)
	s.Inbox = append(s.Inbox, msg)
	r := s.Resumed()
	if len(start) == 0 || !onlyOpen(r, msg) {
		return r, msg, false, nil
	}
	for _, e := range start {
		e.Seq = uint64(len(s.Log) + 1)
		s.Log = append(s.Log, e)
	}
	return r, msg, true, nil
}

func (m *Memory) History(ctx context.Context, id string, upTo uint64) ([]Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.get(id)
	if err != nil {
		return nil, err
	}
	return s.MessagesUpTo(upTo), nil
}

func (m *Memory) Load(ctx context.Context, id string) (Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.get(id)
	if err != nil {
		return Snapshot{}, err
	}
	return copySnap(s), nil
}

func (m *Memory) Head(ctx context.Context, id string) (Head, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.get(id)
	if err != nil {
		return Head{}, err
	}
	return s.Head(), nil
}

func (m *Memory) Accept(ctx context.Context, id string, epoch uint64, msg InboxMessage) (InboxMessage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.get(id)
	if err != nil {
		return InboxMessage{}, err
	}
	if s.Header.Epoch != epoch {
		return InboxMessage{}, ErrStaleEpoch
	}
	msg.Seq = uint64(len(s.Inbox) + 1)
	s.Inbox = append(s.Inbox, msg)
	return msg, nil
}

func (m *Memory) Append(ctx context.Context, id string, epoch uint64, entries ...Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.get(id)
	if err != nil {
		return err
	}
	if s.Header.Epoch != epoch {
		return ErrStaleEpoch
	}
	for _, e := range entries {
		e.Seq = uint64(len(s.Log) + 1)
		s.Log = append(s.Log, e)
	}
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
