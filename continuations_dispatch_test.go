package troupe_test

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/troupetest"
)

// poolStore records, for each write the continuation layer makes, whether it ran
// on a worker of the System's PoolDispatcher (its goroutine's stack has the
// worker's loop).
type poolStore struct {
	*session.Memory
	mu    sync.Mutex
	calls map[string]bool // call -> every one ran on a pool worker
	// appended is signalled after each Append has been noted.
	appended chan struct{}
}

func (s *poolStore) note(call string) {
	buf := make([]byte, 64<<10)
	onPool := strings.Contains(string(buf[:runtime.Stack(buf, false)]), "troupe.(*PoolDispatcher).work")
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.calls[call]; ok {
		onPool = onPool && prev
	}
	s.calls[call] = onPool
}

func (s *poolStore) ResumeAccept(ctx context.Context, id string, m session.InboxMessage, start []session.Entry,
	check func(session.Head) error) (session.Resumed, session.InboxMessage, bool, error) {
	s.note("ResumeAccept")
	return s.Memory.ResumeAccept(ctx, id, m, start, check)
}

func (s *poolStore) Append(ctx context.Context, id string, epoch uint64, entries ...session.Entry) error {
	s.note("Append")
	select {
	case s.appended <- struct{}{}:
	default: // one signal is enough: the test waits for the first
	}
	return s.Memory.Append(ctx, id, epoch, entries...)
}

type startedRunner chan struct{}

func (r startedRunner) RunTurn(ctx context.Context, turn subagent.Turn) (subagent.TurnResult, error) {
	r <- struct{}{}
	return subagent.TurnResult{}, nil
}

// A cold followup's store calls run on the System's pool, in the directory
// (ResumeAccept, which also records a lone followup's turn start) and in the
// Activation (the turn end's Append, after its RunTurn returned): neither actor
// runs on a fresh goroutine per mailbox run, whose stack grows for every store call.
func TestContinuationsRunOnTheSystemPool(t *testing.T) {
	store := &poolStore{Memory: session.NewMemory(), calls: map[string]bool{}, appended: make(chan struct{}, 1)}
	runner := make(startedRunner, 4)
	_, m, parent := troupetest.Continuations(t, store, runner)

	desc, err := json.Marshal(activation.Descriptor{Version: activation.DescriptorVersion, Mode: "continuable",
		Provider: "spawn", Label: "pool"})
	require.NoError(t, err)
	require.NoError(t, store.Create(t.Context(), session.Header{ID: "c", ParentSession: "P", Origin: "subagent",
		DelegationDepth: 1}, []session.Entry{{Kind: session.EntryDescriptor, Descriptor: desc}}))
	_, err = m.Followup(t.Context(), parent, "c", "x",
		session.Source{Kind: "coordinator", Form: "relay", SenderSessionID: "P"})
	require.NoError(t, err)
	<-runner         // the turn started (its start was in ResumeAccept's commit)
	<-store.appended // and its end was appended

	store.mu.Lock()
	defer store.mu.Unlock()
	require.Equal(t, map[string]bool{"ResumeAccept": true, "Append": true}, store.calls)
}
