// Package storetest is the session.Store contract as one test suite: Run runs
// every check against a fresh store from open, so each implementation (Memory,
// Bolt, session/postgres) is held to the same assertions.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
)

// Open returns a new, empty store for one check; the check closes it
// (t.Cleanup is the factory's for anything else it made).
type Open func(t *testing.T) session.Store

// Run runs the suite: each check is a subtest with a store of its own.
func Run(t *testing.T, open Open) {
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			s := open(t)
			defer func() { require.NoError(t, s.Close()) }()
			c.f(t, s)
		})
	}
}

var checks = []struct {
	name string
	f    func(t *testing.T, s session.Store)
}{
	{"CreateRefusesDuplicates", createRefusesDuplicates},
	{"ConcurrentDuplicateCreates", concurrentDuplicateCreates},
	{"StaleEpochCannotWrite", staleEpochCannotWrite},
	{"ConcurrentActivationsTakeDistinctEpochs", concurrentActivationsTakeDistinctEpochs},
	{"OrderAndRestorePlan", orderAndRestorePlan},
	{"FirstDescriptorOfTheOwnSuffixWins", firstDescriptorOfTheOwnSuffixWins},
	{"ConcurrentAcceptsKeepOneSequence", concurrentAcceptsKeepOneSequence},
	{"DiscardedMessagesAreNotRestored", discardedMessagesAreNotRestored},
	{"HeadAgreesWithLoad", headAgreesWithLoad},
	{"HeaderRoundTrips", headerRoundTrips},
	{"EntriesAndMessagesRoundTrip", entriesAndMessagesRoundTrip},
	{"UnknownSessionIsNotFound", unknownSessionIsNotFound},
	{"DeleteRemovesTheSession", deleteRemovesTheSession},
	{"ResumeAgreesWithLoad", resumeAgreesWithLoad},
	{"ResumeTakesAnEpoch", resumeTakesAnEpoch},
	{"HistoryStopsAtUpTo", historyStopsAtUpTo},
	{"ResumeAcceptTakesAnEpochAndAccepts", resumeAcceptTakesAnEpochAndAccepts},
	{"ConcurrentResumeAcceptsAreAtomic", concurrentResumeAcceptsAreAtomic},
	{"ResumeAcceptStartsOnlyALoneMessage", func(t *testing.T, s session.Store) { resumeAcceptStartsOnlyALoneMessage(t, s, false) }},
	{"ResumeAcceptCheckDecidesBeforeWriting", resumeAcceptCheckDecidesBeforeWriting},
}

var ctx = context.Background()

func createRefusesDuplicates(t *testing.T, s session.Store) {
	h := session.Header{ID: "c1", ParentSession: "p", Origin: "subagent", DelegationDepth: 1}
	require.NoError(t, s.Create(ctx, h, nil))
	err := s.Create(ctx, h, nil)
	require.Equal(t, messages.Code("DUPLICATE_CHILD"), messages.CodeOf(err))
	require.Equal(t, `subagent "c1" already exists`, err.Error())
	ids, err := s.IDs(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"c1"}, ids)
}

// Concurrent creates of one id (sharing commits where the store groups them):
// exactly one wins, the others get DUPLICATE_CHILD, and only the winner's entries
// are stored.
func concurrentDuplicateCreates(t *testing.T, s session.Store) {
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			errs <- s.Create(ctx, session.Header{ID: "same"}, []session.Entry{{Kind: session.EntryDescriptor}})
		})
	}
	wg.Wait()
	close(errs)
	won := 0
	for err := range errs {
		if err == nil {
			won++
			continue
		}
		require.Equal(t, messages.Code("DUPLICATE_CHILD"), messages.CodeOf(err), "%v", err)
	}
	require.Equal(t, 1, won)
	snap, err := s.Load(ctx, "same")
	require.NoError(t, err)
	require.Len(t, snap.Log, 1, "the winner's entries only")
}

func staleEpochCannotWrite(t *testing.T, s session.Store) {
	require.NoError(t, s.Create(ctx, session.Header{ID: "c1"}, nil))
	first, err := s.Activate(ctx, "c1")
	require.NoError(t, err)
	require.Equal(t, uint64(1), first.Header.Epoch)
	_, err = s.Accept(ctx, "c1", 1, session.InboxMessage{ID: "m1"})
	require.NoError(t, err)
	second, err := s.Activate(ctx, "c1")
	require.NoError(t, err)
	require.Equal(t, uint64(2), second.Header.Epoch)
	_, err = s.Accept(ctx, "c1", 1, session.InboxMessage{ID: "m2"})
	require.ErrorIs(t, err, session.ErrStaleEpoch)
	require.ErrorIs(t, s.Append(ctx, "c1", 1, session.Entry{Kind: session.EntryMessage}), session.ErrStaleEpoch)
	_, err = s.Accept(ctx, "c1", 2, session.InboxMessage{ID: "m3"})
	require.NoError(t, err)
	snap, err := s.Load(ctx, "c1")
	require.NoError(t, err)
	require.Len(t, snap.Inbox, 2)
	require.Equal(t, "m3", snap.Inbox[1].ID)
	_, err = s.Activate(ctx, "nope")
	require.ErrorIs(t, err, session.ErrNotFound)
}

// Activations race: each takes an epoch of its own (1…n, none twice), the stored
// epoch is the last, and only a write at that epoch gets through.
func concurrentActivationsTakeDistinctEpochs(t *testing.T, s session.Store) {
	const n = 16
	require.NoError(t, s.Create(ctx, session.Header{ID: "c1"}, nil))
	var wg sync.WaitGroup
	epochs := make(chan uint64, n)
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			snap, err := s.Activate(ctx, "c1")
			errs <- err
			epochs <- snap.Header.Epoch
		})
	}
	wg.Wait()
	close(errs)
	close(epochs)
	for err := range errs {
		require.NoError(t, err)
	}
	seen := map[uint64]bool{}
	for e := range epochs {
		require.False(t, seen[e], "epoch %d taken twice", e)
		seen[e] = true
		require.True(t, e >= 1 && e <= n, "epoch %d", e)
	}
	snap, err := s.Load(ctx, "c1")
	require.NoError(t, err)
	require.Equal(t, uint64(n), snap.Header.Epoch)
	for e := range uint64(n) {
		err := s.Append(ctx, "c1", e, session.Entry{Kind: session.EntryMessage})
		require.ErrorIs(t, err, session.ErrStaleEpoch, "epoch %d", e)
	}
	require.NoError(t, s.Append(ctx, "c1", n, session.Entry{Kind: session.EntryMessage}))
}

func orderAndRestorePlan(t *testing.T, s session.Store) {
	require.NoError(t, s.Create(ctx, session.Header{ID: "c1"}, nil))
	snap, err := s.Activate(ctx, "c1")
	require.NoError(t, err)
	e := snap.Header.Epoch
	for _, id := range []string{"m1", "m2", "m3", "m4"} {
		_, err := s.Accept(ctx, "c1", e, session.InboxMessage{ID: id})
		require.NoError(t, err)
	}
	require.NoError(t, s.Append(ctx, "c1", e,
		session.Entry{Kind: session.EntryTurnStart, InboxID: "m1"},
		session.Entry{Kind: session.EntryTurnEnd, InboxID: "m1", StopReason: "completed"},
		session.Entry{Kind: session.EntryTurnStart, InboxID: "m2"}))
	snap, err = s.Load(ctx, "c1")
	require.NoError(t, err)
	for i, m := range snap.Inbox {
		require.Equal(t, uint64(i+1), m.Seq)
	}
	toRun, cut := snap.Pending()
	require.Equal(t, []string{"m3", "m4"}, idsOf(toRun))
	require.Equal(t, []string{"m2"}, idsOf(cut))
}

func idsOf(ms []session.InboxMessage) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

func firstDescriptorOfTheOwnSuffixWins(t *testing.T, s session.Store) {
	seed := session.Entry{Kind: session.EntryDescriptor, Descriptor: json.RawMessage(`{"version":2,"mode":"one-shot"}`)}
	own := session.Entry{Kind: session.EntryDescriptor, Descriptor: json.RawMessage(`{"version":2,"mode":"continuable"}`)}
	later := session.Entry{Kind: session.EntryDescriptor, Descriptor: json.RawMessage(`{"version":2,"mode":"later"}`)}
	require.NoError(t, s.Create(ctx, session.Header{ID: "c1", SeedLength: 1}, []session.Entry{seed, own, later}))
	snap, err := s.Load(ctx, "c1")
	require.NoError(t, err)
	require.JSONEq(t, `{"version":2,"mode":"continuable"}`, string(snap.FirstDescriptor()))
}

func concurrentAcceptsKeepOneSequence(t *testing.T, s session.Store) {
	require.NoError(t, s.Create(ctx, session.Header{ID: "c1"}, nil))
	snap, err := s.Activate(ctx, "c1")
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Go(func() {
			_, err := s.Accept(ctx, "c1", snap.Header.Epoch, session.InboxMessage{ID: "m"})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	got, err := s.Load(ctx, "c1")
	require.NoError(t, err)
	require.Len(t, got.Inbox, 50)
	for i, m := range got.Inbox {
		require.Equal(t, uint64(i+1), m.Seq)
	}
	require.False(t, errors.Is(err, session.ErrStaleEpoch))
}

// A disposal that drops accepted messages records them discarded: a later
// restore does not run them; the quiet flag survives the journal.
func discardedMessagesAreNotRestored(t *testing.T, s session.Store) {
	require.NoError(t, s.Create(ctx, session.Header{ID: "c1"}, nil))
	snap, err := s.Activate(ctx, "c1")
	require.NoError(t, err)
	e := snap.Header.Epoch
	for _, m := range []session.InboxMessage{{ID: "m1"}, {ID: "m2", Quiet: true}, {ID: "m3"}} {
		_, err := s.Accept(ctx, "c1", e, m)
		require.NoError(t, err)
	}
	require.NoError(t, s.Append(ctx, "c1", e, session.Entry{Kind: session.EntryDiscarded, InboxID: "m1"}))
	snap, err = s.Load(ctx, "c1")
	require.NoError(t, err)
	toRun, cut := snap.Pending()
	require.Equal(t, []string{"m2", "m3"}, idsOf(toRun))
	require.True(t, toRun[0].Quiet)
	require.False(t, toRun[1].Quiet)
	require.Empty(t, cut)
}

// Head agrees with Load's header and first own descriptor, whatever comes before
// the descriptor (a fork seed with descriptors of its own, messages), after it, or
// when there is none; an unknown id is ErrNotFound.
func headAgreesWithLoad(t *testing.T, s session.Store) {
	desc := func(mode string) session.Entry {
		return session.Entry{Kind: session.EntryDescriptor, Descriptor: json.RawMessage(`{"version":2,"mode":"` + mode + `"}`)}
	}
	msg := session.Entry{Kind: session.EntryMessage, Role: "user", Content: []session.Block{{Type: "text", Text: "hi"}}}
	cases := map[string]struct {
		h       session.Header
		entries []session.Entry
	}{
		"plain":                 {session.Header{ID: "a"}, []session.Entry{desc("continuable"), msg}},
		"seeded":                {session.Header{ID: "b", SeedLength: 3}, []session.Entry{msg, desc("seed"), msg, desc("own"), desc("later")}},
		"descriptor after msgs": {session.Header{ID: "c", SeedLength: 1}, []session.Entry{msg, msg, msg, desc("late")}},
		"no descriptor":         {session.Header{ID: "d", SeedLength: 1}, []session.Entry{desc("seed-only"), msg}},
		"empty":                 {session.Header{ID: "e"}, nil},
	}
	for name, c := range cases {
		require.NoError(t, s.Create(ctx, c.h, c.entries), name)
		_, err := s.Activate(ctx, c.h.ID) // an epoch, and a longer log, change nothing
		require.NoError(t, err)
		require.NoError(t, s.Append(ctx, c.h.ID, 1, msg, desc("appended")))
		snap, err := s.Load(ctx, c.h.ID)
		require.NoError(t, err)
		head, err := s.Head(ctx, c.h.ID)
		require.NoError(t, err)
		require.Equal(t, snap.Header, head.Header, name)
		require.Equal(t, string(snap.FirstDescriptor()), string(head.Descriptor), name)
	}
	_, err := s.Head(ctx, "nosuch")
	require.ErrorIs(t, err, session.ErrNotFound)
}

// Every field of the header survives the store, whatever fields it gains: each
// is set to a value of its own (by reflection, so a new field is covered the day
// it is added), and Load, Head and Activate return them all (Version is the
// store's, HeaderVersion; Activate adds one to the epoch).
func headerRoundTrips(t *testing.T, s session.Store) {
	var h session.Header
	v := reflect.ValueOf(&h).Elem()
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		switch f.Kind() {
		case reflect.String:
			f.SetString("value of " + name + " ✓")
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(1000 + i))
		case reflect.Uint64:
			f.SetUint(uint64(2000 + i))
		default:
			t.Fatalf("Header.%s: a %s field: teach storetest to fill it", name, f.Kind())
		}
	}
	h.SeedLength = 0 // a seed longer than the log is not a session
	require.NoError(t, s.Create(ctx, h, nil))
	want := h
	want.Version = session.HeaderVersion
	snap, err := s.Load(ctx, h.ID)
	require.NoError(t, err)
	require.Equal(t, want, snap.Header)
	head, err := s.Head(ctx, h.ID)
	require.NoError(t, err)
	require.Equal(t, want, head.Header)
	act, err := s.Activate(ctx, h.ID)
	require.NoError(t, err)
	want.Epoch++
	require.Equal(t, want, act.Header)
}

// Entries and messages come back as written (every field, texts byte for byte,
// a descriptor as its compact JSON), with the seqs the store assigned.
func entriesAndMessagesRoundTrip(t *testing.T, s session.Store) {
	entries := []session.Entry{
		{Kind: session.EntryDescriptor, Descriptor: json.RawMessage(`{"version":2,"mode":"continuable","note":"é\u0000"}`)},
		{Kind: session.EntryMessage, Role: "user", Content: []session.Block{{Type: "text", Text: "line 1\nline 2 \"quoted\" ☃"}}},
	}
	require.NoError(t, s.Create(ctx, session.Header{ID: "c1", Cwd: "/tmp/x"}, entries))
	snap, err := s.Activate(ctx, "c1")
	require.NoError(t, err)
	e := snap.Header.Epoch
	more := []session.Entry{
		{Kind: session.EntryTurnStart, InboxID: "m1"},
		{Kind: session.EntryMessage, Role: "assistant", Content: []session.Block{{Type: "text", Text: "a"}, {Type: "text", Text: ""}}},
		{Kind: session.EntryTurnEnd, InboxID: "m1", StopReason: "completed"},
	}
	require.NoError(t, s.Append(ctx, "c1", e, more...))
	require.NoError(t, s.Append(ctx, "c1", e)) // nothing to append: still fenced, changes nothing
	msgs := []session.InboxMessage{
		{ID: "m1", Content: []session.Block{{Type: "text", Text: "do it"}}, AcceptedAt: 1700000000123,
			Source: session.Source{Kind: "coordinator", Form: "relay", SenderSessionID: "P"}},
		{ID: "m2", Content: []session.Block{{Type: "text", Text: "notice"}}, Quiet: true, Source: session.Source{Kind: "job"}},
	}
	for i, m := range msgs {
		got, err := s.Accept(ctx, "c1", e, m)
		require.NoError(t, err)
		m.Seq = uint64(i + 1)
		require.Equal(t, m, got)
		msgs[i] = m
	}
	var want []session.Entry
	for i, en := range append(entries, more...) {
		en.Seq = uint64(i + 1)
		want = append(want, en)
	}
	got, err := s.Load(ctx, "c1")
	require.NoError(t, err)
	require.Equal(t, want, got.Log)
	require.Equal(t, msgs, got.Inbox)
}

// Every operation on an id that was never created is ErrNotFound (Delete is a
// no-op), and creates nothing.
func unknownSessionIsNotFound(t *testing.T, s session.Store) {
	_, err := s.Load(ctx, "nosuch")
	require.ErrorIs(t, err, session.ErrNotFound)
	_, err = s.Activate(ctx, "nosuch")
	require.ErrorIs(t, err, session.ErrNotFound)
	_, err = s.Accept(ctx, "nosuch", 0, session.InboxMessage{ID: "m"})
	require.ErrorIs(t, err, session.ErrNotFound)
	require.ErrorIs(t, s.Append(ctx, "nosuch", 0, session.Entry{Kind: session.EntryMessage}), session.ErrNotFound)
	require.NoError(t, s.Delete(ctx, "nosuch"))
	ids, err := s.IDs(ctx)
	require.NoError(t, err)
	require.Empty(t, ids)
}

// Delete removes the session with its log and inbox; the id can be created
// afresh, with nothing of the old one in it; the other sessions are untouched.
// IDs lists in byte order.
func deleteRemovesTheSession(t *testing.T, s session.Store) {
	for _, id := range []string{"b", "a", "B", "a-1"} {
		require.NoError(t, s.Create(ctx, session.Header{ID: id}, []session.Entry{{Kind: session.EntryDescriptor}}))
		snap, err := s.Activate(ctx, id)
		require.NoError(t, err)
		_, err = s.Accept(ctx, id, snap.Header.Epoch, session.InboxMessage{ID: "m-" + id})
		require.NoError(t, err)
	}
	ids, err := s.IDs(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"B", "a", "a-1", "b"}, ids)
	require.NoError(t, s.Delete(ctx, "a"))
	_, err = s.Load(ctx, "a")
	require.ErrorIs(t, err, session.ErrNotFound)
	ids, err = s.IDs(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"B", "a-1", "b"}, ids)
	require.NoError(t, s.Create(ctx, session.Header{ID: "a"}, nil))
	snap, err := s.Load(ctx, "a")
	require.NoError(t, err)
	require.Empty(t, snap.Log)
	require.Empty(t, snap.Inbox)
	require.Equal(t, uint64(0), snap.Header.Epoch)
	other, err := s.Load(ctx, "a-1")
	require.NoError(t, err)
	require.Len(t, other.Log, 1)
	require.Equal(t, []string{"m-a-1"}, idsOf(other.Inbox))
}

// Resume agrees with the whole snapshot (Snapshot.Resumed) at its new epoch, and
// History with Snapshot.MessagesUpTo, whatever the log holds: a fork seed,
// turns that ended, one cut off, discarded and quiet messages, messages that
// share an id, provider states (the latest wins), and a session without any.
func resumeAgreesWithLoad(t *testing.T, s session.Store) {
	desc := session.Entry{Kind: session.EntryDescriptor, Descriptor: json.RawMessage(`{"version":2,"mode":"continuable"}`)}
	msg := func(role, text string) session.Entry {
		return session.Entry{Kind: session.EntryMessage, Role: role, Content: []session.Block{{Type: "text", Text: text}}}
	}
	state := func(v string) session.Entry {
		return session.Entry{Kind: session.EntryProviderState, State: json.RawMessage(`{"v":"` + v + `"}`)}
	}
	check := func(id string) {
		t.Helper()
		r, err := s.Resume(ctx, id)
		require.NoError(t, err)
		snap, err := s.Load(ctx, id)
		require.NoError(t, err)
		require.Equal(t, snap.Header.Epoch, r.Header.Epoch)
		want := snap.Resumed()
		if want.Descriptor != nil {
			require.JSONEq(t, string(want.Descriptor), string(r.Descriptor))
			r.Descriptor, want.Descriptor = nil, nil
		}
		if want.State != nil {
			require.JSONEq(t, string(want.State), string(r.State))
			r.State, want.State = nil, nil
		}
		require.Equal(t, want, r, "session %s", id)
		for _, upTo := range []uint64{0, 1, r.LogSeq / 2, r.LogSeq} {
			got, err := s.History(ctx, id, upTo)
			require.NoError(t, err)
			require.Equal(t, len(snap.MessagesUpTo(upTo)), len(got), "session %s, upTo %d", id, upTo)
			for i, e := range snap.MessagesUpTo(upTo) {
				require.Equal(t, e, got[i])
			}
		}
	}

	require.NoError(t, s.Create(ctx, session.Header{ID: "empty"}, nil))
	check("empty")

	require.NoError(t, s.Create(ctx, session.Header{ID: "c1", SeedLength: 2}, []session.Entry{msg("user", "seed q"), msg("assistant", "seed a"), desc}))
	check("c1")
	r, err := s.Resume(ctx, "c1")
	require.NoError(t, err)
	e := r.Header.Epoch
	for _, m := range []session.InboxMessage{{ID: "m1"}, {ID: "m2"}, {ID: "dup"}, {ID: "dup"}, {ID: "m3", Quiet: true},
		{ID: "m4"}, {ID: "m5"}} {
		_, err := s.Accept(ctx, "c1", e, m)
		require.NoError(t, err)
	}
	require.NoError(t, s.Append(ctx, "c1", e,
		session.Entry{Kind: session.EntryTurnStart, InboxID: "m1"}, msg("user", "one"), msg("assistant", "answer one"),
		session.Entry{Kind: session.EntryTurnEnd, InboxID: "m1", StopReason: "completed"}, state("a")))
	check("c1") // m2, both dups, m3, m4, m5 to run; state a
	r, err = s.Resume(ctx, "c1")
	require.NoError(t, err)
	e = r.Header.Epoch
	require.NoError(t, s.Append(ctx, "c1", e,
		session.Entry{Kind: session.EntryTurnStart, InboxID: "dup"}, msg("user", "dup"),
		session.Entry{Kind: session.EntryDiscarded, InboxID: "m4"}))
	require.NoError(t, s.Append(ctx, "c1", e, session.Entry{Kind: session.EntryTurnStart, InboxID: "m2"}, msg("user", "two"),
		session.Entry{Kind: session.EntryTurnAborted, InboxID: "m2", StopReason: "aborted"}, state("b")))
	require.NoError(t, s.Append(ctx, "c1", e, session.Entry{Kind: session.EntryTurnStart, InboxID: "m5"}, state("c"),
		session.Entry{Kind: session.EntryTurnStart, InboxID: "nobody"}))
	check("c1") // both dups and m5 cut off, m3 (quiet) to run; state c
	r, err = s.Resume(ctx, "c1")
	require.NoError(t, err)
	require.Equal(t, []string{"m3"}, idsOf(r.ToRun))
	require.True(t, r.ToRun[0].Quiet)
	require.Equal(t, []string{"dup", "dup", "m5"}, idsOf(r.CutOff))
	require.JSONEq(t, `{"v":"c"}`, string(r.State))
	require.Equal(t, 6, r.Messages)
}

// Resume takes the next epoch, as Activate does: a write at the previous one is
// refused; an unknown session is ErrNotFound.
func resumeTakesAnEpoch(t *testing.T, s session.Store) {
	require.NoError(t, s.Create(ctx, session.Header{ID: "c1"}, nil))
	first, err := s.Activate(ctx, "c1")
	require.NoError(t, err)
	second, err := s.Resume(ctx, "c1")
	require.NoError(t, err)
	require.Equal(t, first.Header.Epoch+1, second.Header.Epoch)
	err = s.Append(ctx, "c1", first.Header.Epoch, session.Entry{Kind: session.EntryMessage})
	require.ErrorIs(t, err, session.ErrStaleEpoch)
	_, err = s.Accept(ctx, "c1", first.Header.Epoch, session.InboxMessage{ID: "m"})
	require.ErrorIs(t, err, session.ErrStaleEpoch)
	require.NoError(t, s.Append(ctx, "c1", second.Header.Epoch, session.Entry{Kind: session.EntryMessage}))
	third, err := s.Activate(ctx, "c1")
	require.NoError(t, err)
	require.Equal(t, second.Header.Epoch+1, third.Header.Epoch)
	_, err = s.Resume(ctx, "nosuch")
	require.ErrorIs(t, err, session.ErrNotFound)
	_, err = s.History(ctx, "nosuch", 10)
	require.ErrorIs(t, err, session.ErrNotFound)
}

// History as of an activation (upTo: its Resumed.LogSeq) leaves out what was
// appended after it.
func historyStopsAtUpTo(t *testing.T, s session.Store) {
	msg := func(text string) session.Entry {
		return session.Entry{Kind: session.EntryMessage, Role: "user", Content: []session.Block{{Type: "text", Text: text}}}
	}
	require.NoError(t, s.Create(ctx, session.Header{ID: "c1"}, []session.Entry{msg("a"), {Kind: session.EntryDescriptor}}))
	r, err := s.Resume(ctx, "c1")
	require.NoError(t, err)
	require.Equal(t, uint64(2), r.LogSeq)
	require.Equal(t, 1, r.Messages)
	require.NoError(t, s.Append(ctx, "c1", r.Header.Epoch, msg("b"), session.Entry{Kind: session.EntryTurnEnd}, msg("c")))
	got, err := s.History(ctx, "c1", r.LogSeq)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, "a", got[0].Content[0].Text)
	require.Equal(t, uint64(1), got[0].Seq)
	got, err = s.History(ctx, "c1", 5)
	require.NoError(t, err)
	require.Len(t, got, 3)
	require.Equal(t, []uint64{1, 3, 5}, []uint64{got[0].Seq, got[1].Seq, got[2].Seq})
	r, err = s.Resume(ctx, "c1")
	require.NoError(t, err)
	require.Equal(t, uint64(5), r.LogSeq)
	require.Equal(t, 3, r.Messages)
}

// ResumeAccept takes the next epoch and accepts the message at it: the message is
// the last of the returned open inbox and is stored with the returned Seq, a write
// at the previous epoch is refused, and the next restore has it to run. An
// unknown session is ErrNotFound and nothing is stored.
func resumeAcceptTakesAnEpochAndAccepts(t *testing.T, s session.Store) {
	require.NoError(t, s.Create(ctx, session.Header{ID: "c1"}, nil))
	first, err := s.Resume(ctx, "c1")
	require.NoError(t, err)
	_, err = s.Accept(ctx, "c1", first.Header.Epoch, session.InboxMessage{ID: "m0"})
	require.NoError(t, err)
	r, msg, started, err := s.ResumeAccept(ctx, "c1", session.InboxMessage{ID: "m1", Content: []session.Block{{Type: "text", Text: "hi"}}}, nil, nil)
	require.False(t, started, "no start was given")
	require.NoError(t, err)
	require.Equal(t, first.Header.Epoch+1, r.Header.Epoch)
	require.Equal(t, "m1", msg.ID)
	require.Equal(t, []string{"m0", "m1"}, idsOf(r.ToRun))
	require.Equal(t, msg.Seq, r.ToRun[1].Seq)
	require.Greater(t, msg.Seq, r.ToRun[0].Seq)
	require.Equal(t, "hi", r.ToRun[1].Content[0].Text)

	_, err = s.Accept(ctx, "c1", first.Header.Epoch, session.InboxMessage{ID: "stale"})
	require.ErrorIs(t, err, session.ErrStaleEpoch, "the previous epoch is fenced by ResumeAccept")
	require.ErrorIs(t, s.Append(ctx, "c1", first.Header.Epoch, session.Entry{Kind: session.EntryTurnStart, InboxID: "m1"}),
		session.ErrStaleEpoch)
	snap, err := s.Load(ctx, "c1")
	require.NoError(t, err)
	require.Equal(t, r.Header.Epoch, snap.Header.Epoch)
	require.Equal(t, []string{"m0", "m1"}, idsOf(snap.Inbox))
	require.Equal(t, msg.Seq, snap.Inbox[1].Seq)
	require.Equal(t, snap.Resumed(), r, "ResumeAccept's answer is the snapshot's Resumed at its epoch")

	// A crash right after the commit: the next restore runs the message.
	next, err := s.Resume(ctx, "c1")
	require.NoError(t, err)
	require.Equal(t, []string{"m0", "m1"}, idsOf(next.ToRun))
	_, _, _, err = s.ResumeAccept(ctx, "c1", session.InboxMessage{ID: "fenced"}, nil, nil)
	require.NoError(t, err)
	_, err = s.Accept(ctx, "c1", next.Header.Epoch, session.InboxMessage{ID: "late"})
	require.ErrorIs(t, err, session.ErrStaleEpoch)

	_, _, _, err = s.ResumeAccept(ctx, "nosuch", session.InboxMessage{ID: "m"}, turnStartOf("m", "x"), nil)
	require.ErrorIs(t, err, session.ErrNotFound)
	ids, err := s.IDs(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"c1"}, ids)
}

// ResumeAccepts race: each takes an epoch of its own, and the open inbox each
// returns holds exactly the messages accepted with the epochs up to its own —
// its own last. A store that took the epoch and accepted in two transactions
// would let another call's epoch or message fall in between.
func concurrentResumeAcceptsAreAtomic(t *testing.T, s session.Store) {
	const n = 12
	require.NoError(t, s.Create(ctx, session.Header{ID: "c1"}, nil))
	type result struct {
		r   session.Resumed
		msg session.InboxMessage
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			id := "x" + string(rune('a'+i))
			results[i].r, results[i].msg, _, errs[i] = s.ResumeAccept(ctx, "c1", session.InboxMessage{ID: id}, nil, nil)
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	slices.SortFunc(results, func(a, b result) int { return int(a.r.Header.Epoch) - int(b.r.Header.Epoch) })
	var want []string
	for i, res := range results {
		require.Equal(t, uint64(i+1), res.r.Header.Epoch, "epochs are distinct")
		want = append(want, res.msg.ID)
		require.Equal(t, want, idsOf(res.r.ToRun), "epoch %d's open inbox", res.r.Header.Epoch)
		require.Equal(t, res.msg.Seq, res.r.ToRun[len(res.r.ToRun)-1].Seq)
	}
	snap, err := s.Load(ctx, "c1")
	require.NoError(t, err)
	require.Equal(t, want, idsOf(snap.Inbox), "the inbox is in epoch order")
}

// ResumeAccept's check decides on the session's head before anything is
// written: it is given the head as Head reads it (the header before the new
// epoch, the first descriptor of the own suffix); a check that refuses leaves the
// session as it was (no epoch taken, nothing accepted, no turn start) and its
// error is returned as is; a check that accepts lets the resume and acceptance
// happen. Concurrent calls, some refusing (a store that shares commits must not
// let a refusal write, nor undo the others'), each get their own outcome.
func resumeAcceptCheckDecidesBeforeWriting(t *testing.T, s session.Store) {
	desc := func(mode string) session.Entry {
		return session.Entry{Kind: session.EntryDescriptor, Descriptor: json.RawMessage(`{"version":2,"mode":"` + mode + `"}`)}
	}
	require.NoError(t, s.Create(ctx, session.Header{ID: "c1", ParentSession: "p", ParentKind: session.ParentSubagent,
		Origin: "subagent", DelegationDepth: 2, SeedLength: 1}, []session.Entry{desc("seed"), desc("own")}))
	first, err := s.Resume(ctx, "c1")
	require.NoError(t, err)
	_, err = s.Accept(ctx, "c1", first.Header.Epoch, session.InboxMessage{ID: "m0"})
	require.NoError(t, err)
	head, err := s.Head(ctx, "c1")
	require.NoError(t, err)
	before, err := s.Load(ctx, "c1")
	require.NoError(t, err)

	var mu sync.Mutex // a check may run on a goroutine of the store's
	var seen []session.Head
	refusal := errors.New("refused by the caller")
	refuse := func(h session.Head) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, h)
		return refusal
	}
	r, msg, started, err := s.ResumeAccept(ctx, "c1", session.InboxMessage{ID: "m1"}, turnStartOf("m1", "x"), refuse)
	require.True(t, err == refusal, "the check's error as is, got %v", err)
	require.False(t, started)
	require.Equal(t, session.Resumed{}, r)
	require.Equal(t, session.InboxMessage{}, msg)
	require.NotEmpty(t, seen, "the check was called")
	for _, h := range seen {
		require.Equal(t, head.Header, h.Header, "the head before the new epoch")
		require.Equal(t, `{"version":2,"mode":"own"}`, string(h.Descriptor), "the own suffix's first descriptor")
	}
	after, err := s.Load(ctx, "c1")
	require.NoError(t, err)
	require.Equal(t, before, after, "a refusal writes nothing")
	_, err = s.Accept(ctx, "c1", first.Header.Epoch, session.InboxMessage{ID: "still"})
	require.NoError(t, err, "no epoch was taken")

	var got []session.Head
	r, msg, _, err = s.ResumeAccept(ctx, "c1", session.InboxMessage{ID: "m2"}, nil, func(h session.Head) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, h)
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, got)
	require.Equal(t, head.Header, got[len(got)-1].Header)
	require.Equal(t, head.Header.Epoch+1, r.Header.Epoch)
	require.Equal(t, []string{"m0", "still", "m2"}, idsOf(r.ToRun))
	require.Equal(t, "m2", msg.ID)

	_, _, _, err = s.ResumeAccept(ctx, "nosuch", session.InboxMessage{ID: "m"}, nil, func(session.Head) error {
		t.Error("the check was called for an unknown session")
		return nil
	})
	require.ErrorIs(t, err, session.ErrNotFound)

	// Concurrent calls: the even ones refuse, each with an error of its own.
	const n = 8
	errs := make([]error, n)
	refusals := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		refusals[i] = fmt.Errorf("refusal %d", i)
		wg.Go(func() {
			_, _, _, errs[i] = s.ResumeAccept(ctx, "c1", session.InboxMessage{ID: fmt.Sprintf("x%d", i)}, nil,
				func(session.Head) error {
					if i%2 == 0 {
						return refusals[i]
					}
					return nil
				})
		})
	}
	wg.Wait()
	var want []string
	for i, err := range errs {
		if i%2 == 0 {
			require.True(t, err == refusals[i], "call %d: its own refusal as is, got %v", i, err)
			continue
		}
		require.NoError(t, err, "call %d", i)
		want = append(want, fmt.Sprintf("x%d", i))
	}
	snap, err := s.Load(ctx, "c1")
	require.NoError(t, err)
	require.Equal(t, r.Header.Epoch+n/2, snap.Header.Epoch, "only the accepted calls took an epoch")
	var accepted []string
	for _, m := range snap.Inbox[3:] {
		accepted = append(accepted, m.ID)
	}
	slices.Sort(accepted)
	require.Equal(t, want, accepted, "only the accepted calls' messages are stored")
}

// turnStartOf is the turn start of inbox message id with input text (what an
// Activation appends when the message's turn starts).
func turnStartOf(id, text string) []session.Entry {
	return []session.Entry{{Kind: session.EntryTurnStart, InboxID: id},
		{Kind: session.EntryMessage, Role: "user", Content: []session.Block{{Type: "text", Text: text}}}}
}

// kindsOf lists the kinds and inbox ids of a log.
func kindsOf(log []session.Entry) []string {
	out := []string{}
	for _, e := range log {
		out = append(out, e.Kind+":"+e.InboxID)
	}
	return out
}

// ResumeAccept with a turn start: a store may record it (started) or decline,
// and either way what it reports is what it stored. Recorded, the start is
// appended after the message's acceptance in the same write, the returned
// Resumed is as of before it (the message to run, the log as it was), and the
// next restore has the message cut off (started, never ended). It is never
// recorded when another message is open: one to run before it, or one cut off.
func resumeAcceptStartsOnlyALoneMessage(t *testing.T, s session.Store, mustStart bool) {
	require.NoError(t, s.Create(ctx, session.Header{ID: "c1"}, nil))
	r, msg, started, err := s.ResumeAccept(ctx, "c1", session.InboxMessage{ID: "m1",
		Content: []session.Block{{Type: "text", Text: "hi"}}}, turnStartOf("m1", "hi"), nil)
	require.NoError(t, err)
	if mustStart {
		require.True(t, started, "m1 is the only open message")
	}
	require.Equal(t, []string{"m1"}, idsOf(r.ToRun), "the answer is as of before the start")
	require.Empty(t, r.CutOff)
	require.Equal(t, uint64(0), r.LogSeq)
	require.Equal(t, 0, r.Messages)
	snap, err := s.Load(ctx, "c1")
	require.NoError(t, err)
	require.Equal(t, []string{"m1"}, idsOf(snap.Inbox))
	require.Equal(t, msg.Seq, snap.Inbox[0].Seq)
	next, err := s.Resume(ctx, "c1")
	require.NoError(t, err)
	if started {
		require.Equal(t, []string{session.EntryTurnStart + ":m1", session.EntryMessage + ":"}, kindsOf(snap.Log))
		require.Equal(t, "hi", snap.Log[1].Content[0].Text)
		require.Empty(t, next.ToRun)
		require.Equal(t, []string{"m1"}, idsOf(next.CutOff), "a crash after the commit: the turn started, never ended")
		require.Equal(t, uint64(2), next.LogSeq)
		require.Equal(t, 1, next.Messages)
	} else {
		require.Empty(t, snap.Log, "a declined start appends nothing")
		require.Equal(t, []string{"m1"}, idsOf(next.ToRun))
	}
	require.Equal(t, snap.Resumed().ToRun, next.ToRun)
	require.Equal(t, snap.Resumed().CutOff, next.CutOff)

	// m1 open (to run or cut off): m2's start is not recorded.
	logLen := len(snap.Log)
	r, _, started, err = s.ResumeAccept(ctx, "c1", session.InboxMessage{ID: "m2"}, turnStartOf("m2", "later"), nil)
	require.NoError(t, err)
	require.False(t, started, "another message is open")
	require.Equal(t, next.Header.Epoch+1, r.Header.Epoch)
	snap, err = s.Load(ctx, "c1")
	require.NoError(t, err)
	require.Len(t, snap.Log, logLen, "nothing appended")
	require.Equal(t, []string{"m1", "m2"}, idsOf(snap.Inbox))
	require.Equal(t, snap.Resumed(), r)

	// A message to run before it (accepted at a resumed epoch, never started).
	require.NoError(t, s.Create(ctx, session.Header{ID: "c2"}, nil))
	first, err := s.Resume(ctx, "c2")
	require.NoError(t, err)
	_, err = s.Accept(ctx, "c2", first.Header.Epoch, session.InboxMessage{ID: "m0"})
	require.NoError(t, err)
	r, _, started, err = s.ResumeAccept(ctx, "c2", session.InboxMessage{ID: "m1"}, turnStartOf("m1", "x"), nil)
	require.NoError(t, err)
	require.False(t, started, "m0 runs first")
	require.Equal(t, []string{"m0", "m1"}, idsOf(r.ToRun))
	snap, err = s.Load(ctx, "c2")
	require.NoError(t, err)
	require.Empty(t, snap.Log)
	require.ErrorIs(t, s.Append(ctx, "c2", first.Header.Epoch, session.Entry{Kind: session.EntryTurnStart, InboxID: "m0"}),
		session.ErrStaleEpoch, "the previous epoch is fenced")
}

// ResumeAcceptStarts is the suite's ResumeAcceptStartsOnlyALoneMessage for a
// store that records a lone message's turn start (Memory, Bolt): it must start it.
func ResumeAcceptStarts(t *testing.T, s session.Store) {
	defer func() { require.NoError(t, s.Close()) }()
	resumeAcceptStartsOnlyALoneMessage(t, s, true)
}
