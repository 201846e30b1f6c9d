package activation_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/troupetest"
)

// countingStore counts the model history reads (Store.History), the head reads
// (Store.Head), the writes that take an epoch or accept a message (Resume,
// Activate, Accept, ResumeAccept: one commit each), the turn starts appended and
// those ResumeAccept recorded.
type countingStore struct {
	*session.Memory
	reads, heads, epochOrAccept, turnStarts, startsWithAccept atomic.Int64
	failEnd                                                   atomic.Bool // the next append of a turn's end fails
}

func (s *countingStore) Head(ctx context.Context, id string) (session.Head, error) {
	s.heads.Add(1)
	return s.Memory.Head(ctx, id)
}

func (s *countingStore) Resume(ctx context.Context, id string) (session.Resumed, error) {
	s.epochOrAccept.Add(1)
	return s.Memory.Resume(ctx, id)
}

func (s *countingStore) Activate(ctx context.Context, id string) (session.Snapshot, error) {
	s.epochOrAccept.Add(1)
	return s.Memory.Activate(ctx, id)
}

func (s *countingStore) ResumeAccept(ctx context.Context, id string, m session.InboxMessage, start []session.Entry,
	check func(session.Head) error) (session.Resumed, session.InboxMessage, bool, error) {
	s.epochOrAccept.Add(1)
	r, out, started, err := s.Memory.ResumeAccept(ctx, id, m, start, check)
	if started {
		s.startsWithAccept.Add(1)
	}
	return r, out, started, err
}

func (s *countingStore) Accept(ctx context.Context, id string, epoch uint64, m session.InboxMessage) (session.InboxMessage, error) {
	s.epochOrAccept.Add(1)
	return s.Memory.Accept(ctx, id, epoch, m)
}

func (s *countingStore) Append(ctx context.Context, id string, epoch uint64, entries ...session.Entry) error {
	for _, e := range entries {
		if e.Kind == session.EntryTurnStart {
			s.turnStarts.Add(1)
		}
		if e.Kind == session.EntryTurnEnd && s.failEnd.CompareAndSwap(true, false) {
			return errors.New("store unavailable")
		}
	}
	return s.Memory.Append(ctx, id, epoch, entries...)
}

func (s *countingStore) History(ctx context.Context, id string, upTo uint64) ([]session.Entry, error) {
	s.reads.Add(1)
	return s.Memory.History(ctx, id, upTo)
}

// historyRunner answers "answer to <input>"; with read set it reads each turn's
// whole history and reports it (its length before the read, and the texts), and
// so does a turn whose input is "read". A turn whose input is "wait" waits for
// gate.
type historyRunner struct {
	read  bool
	gate  chan struct{}
	turns chan []string
	lens  chan int
}

func (r *historyRunner) RunTurn(ctx context.Context, turn subagent.Turn) (subagent.TurnResult, error) {
	in := turn.Input.Text()
	if in == "wait" {
		<-r.gate
	}
	r.lens <- turn.History.Len()
	var texts []string
	if r.read || in == "read" {
		ms, err := turn.History.Messages(ctx)
		if err != nil {
			return subagent.TurnResult{}, err
		}
		for _, m := range ms {
			texts = append(texts, m.Role+": "+m.Text())
		}
	}
	r.turns <- texts
	return subagent.TurnResult{Messages: []subagent.Message{{Role: "assistant",
		Content: []subagent.Block{{Type: "text", Text: "answer to " + in}}}}}, nil
}

// historyRig starts the manager; its start starts child c1 with the prompt
// "task" (or the one given).
func historyRig(t *testing.T, runner *historyRunner) (*countingStore, func(text string), func(prompt ...string), *owner.Agent, chan owner.Message) {
	sys, _ := troupetest.Served(t)
	rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), nil)
	require.NoError(t, err)
	_, err = rt.RegisterProvider(t.Context(), sys.Scope(), subagent.NewSpawn(sys.Actors(), runner))
	require.NoError(t, err)
	store := &countingStore{Memory: session.NewMemory()}
	m, err := sys.StartContinuations(store, rt, runner, nil)
	require.NoError(t, err)
	in := &inbox{msgs: make(chan owner.Message, 8)}
	parent, err := sys.NewAgent(nil, "P", owner.Options{Surface: in})
	require.NoError(t, err)
	require.NoError(t, sys.Jobs().RegisterAgent(context.Background(), parent))
	start := func(prompt ...string) {
		p := "task"
		if len(prompt) > 0 {
			p = prompt[0]
		}
		_, _, err := m.Start(context.Background(), parent, "spawn", "h", "c1", subagent.Request{Prompt: p})
		require.NoError(t, err)
	}
	followup := func(text string) {
		_, err := m.Followup(context.Background(), parent, "c1", text, session.Source{Kind: "coordinator"})
		require.NoError(t, err)
	}
	return store, followup, start, parent, in.msgs
}

func recv[T any](t *testing.T, ch chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("nothing received")
	}
	panic("unreachable")
}

// A cold resume does not read the model history: the runner sees its length,
// reads it on demand (from the store: the log as of the resume), and the
// Activation keeps what was read, so the next turn of the same epoch gets the
// whole history — the earlier turns, this epoch's, in order — without another read.
func TestColdResumeReadsTheHistoryOnDemandOnce(t *testing.T) {
	runner := &historyRunner{read: true, gate: make(chan struct{}), turns: make(chan []string, 8), lens: make(chan int, 8)}
	store, followup, start, _, notices := historyRig(t, runner)
	start()
	require.Equal(t, 0, recv(t, runner.lens))
	require.Empty(t, recv(t, runner.turns))
	recv(t, notices) // settled: the Activation is gone
	require.Zero(t, store.reads.Load(), "an empty history is never read")

	followup("wait") // cold resume; its turn waits while a second followup queues
	followup("again")
	close(runner.gate)
	require.Equal(t, 2, recv(t, runner.lens))
	require.Equal(t, []string{"user: task", "assistant: answer to task"}, recv(t, runner.turns))
	require.Equal(t, 4, recv(t, runner.lens))
	require.Equal(t, []string{"user: task", "assistant: answer to task", "user: wait", "assistant: answer to wait"},
		recv(t, runner.turns))
	recv(t, notices)
	require.Equal(t, int64(1), store.reads.Load(), "read once, then kept")
}

// A resident Activation keeps no copy of a history its runner has not read: once
// a turn's messages are in the store (its input since its start, its output since
// its end), the Activation drops them, and the next turn's runner that asks reads
// them from there — the whole history, in order, the turn's own input left out —
// and the Activation keeps that read.
func TestAResidentActivationKeepsNoHistoryItsRunnerDidNotRead(t *testing.T) {
	runner := &historyRunner{gate: make(chan struct{}), turns: make(chan []string, 8), lens: make(chan int, 8)}
	store, followup, start, _, notices := historyRig(t, runner)
	start("wait")
	followup("read") // queued behind "wait": the Activation stays resident between the two
	followup("read")
	close(runner.gate)
	require.Equal(t, 0, recv(t, runner.lens))
	require.Empty(t, recv(t, runner.turns))
	require.Equal(t, 2, recv(t, runner.lens))
	require.Equal(t, []string{"user: wait", "assistant: answer to wait"}, recv(t, runner.turns))
	require.Equal(t, int64(1), store.reads.Load(), "the first turn's messages were read from the store")
	require.Equal(t, 4, recv(t, runner.lens))
	require.Equal(t, []string{"user: wait", "assistant: answer to wait", "user: read", "assistant: answer to read"},
		recv(t, runner.turns))
	recv(t, notices)
	require.Equal(t, int64(1), store.reads.Load(), "read once, then kept")
}

// A turn whose end the store missed keeps its output in memory: the next turn's
// history is what the store holds (the first turn's input) followed by it.
func TestATurnEndTheStoreMissedStaysInTheHistory(t *testing.T) {
	runner := &historyRunner{gate: make(chan struct{}), turns: make(chan []string, 8), lens: make(chan int, 8)}
	store, followup, start, _, notices := historyRig(t, runner)
	store.failEnd.Store(true)
	start("wait")
	followup("read")
	followup("read")
	close(runner.gate)
	recv(t, runner.lens)
	recv(t, runner.turns)
	require.Equal(t, 2, recv(t, runner.lens))
	require.Equal(t, []string{"user: wait", "assistant: answer to wait"}, recv(t, runner.turns))
	require.Equal(t, 4, recv(t, runner.lens))
	require.Equal(t, []string{"user: wait", "assistant: answer to wait", "user: read", "assistant: answer to read"},
		recv(t, runner.turns))
	recv(t, notices)
	require.Equal(t, int64(1), store.reads.Load(), "read once, then kept")
}

// A runner that never asks for the history never has it read: restoring a
// session costs nothing per earlier turn.
func TestColdResumeWithoutReadingTheHistory(t *testing.T) {
	runner := &historyRunner{gate: make(chan struct{}), turns: make(chan []string, 8), lens: make(chan int, 8)}
	store, followup, start, _, notices := historyRig(t, runner)
	start()
	recv(t, runner.lens)
	recv(t, runner.turns)
	recv(t, notices)
	for i, want := range []int{2, 4} {
		followup([]string{"one", "two"}[i])
		require.Equal(t, want, recv(t, runner.lens))
		recv(t, runner.turns)
		recv(t, notices)
	}
	require.Zero(t, store.reads.Load())
}

// A followup that restores a settled child cold takes the session's epoch,
// accepts its message and — the message being the only one open, so its turn is
// the one to start at once — records its turn start, in one commit
// (Store.ResumeAccept): not a Resume and an Accept, and no turn start appended
// apart; the head it authorises against is read in that commit's transaction
// (ResumeAccept's check), not by a Store.Head of its own. The turn start is in
// the log once, before the turn's end.
func TestColdFollowupTakesTheEpochAndAcceptsInOneCommit(t *testing.T) {
	runner := &historyRunner{gate: make(chan struct{}), turns: make(chan []string, 8), lens: make(chan int, 8)}
	store, followup, start, _, notices := historyRig(t, runner)
	start()
	recv(t, runner.lens)
	recv(t, runner.turns)
	recv(t, notices) // settled: the Activation is gone
	writes, starts, heads := store.epochOrAccept.Load(), store.turnStarts.Load(), store.heads.Load()
	followup("one")
	require.Equal(t, 2, recv(t, runner.lens))
	recv(t, runner.turns)
	recv(t, notices)
	require.Equal(t, int64(1), store.epochOrAccept.Load()-writes, "the cold restore's epoch and acceptance are one commit")
	require.Equal(t, int64(1), store.startsWithAccept.Load(), "the turn start is in the acceptance's commit")
	require.Equal(t, int64(0), store.turnStarts.Load()-starts, "no turn start is appended apart")
	require.Equal(t, int64(0), store.heads.Load()-heads, "the head is read in the commit's transaction")
	snap, err := store.Load(context.Background(), "c1")
	require.NoError(t, err)
	require.Equal(t, uint64(2), snap.Header.Epoch)
	last := snap.Inbox[len(snap.Inbox)-1]
	require.Equal(t, "one", last.Content[0].Text)
	var kinds []string
	for _, e := range snap.Log {
		if e.InboxID == last.ID || (e.Kind == session.EntryMessage && e.Role == "user" && e.Content[0].Text == "one") {
			kinds = append(kinds, e.Kind)
		}
	}
	require.Equal(t, []string{session.EntryTurnStart, session.EntryMessage, session.EntryTurnEnd}, kinds,
		"one turn start and one input, then the end")
}
