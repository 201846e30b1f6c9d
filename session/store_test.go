package session

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/troupe-rt/troupe/messages"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// stores runs a contract test against both implementations.
func stores(t *testing.T, f func(t *testing.T, s Store)) {
	t.Run("memory", func(t *testing.T) { f(t, NewMemory()) })
	t.Run("bolt", func(t *testing.T) {
		b, err := OpenBolt(filepath.Join(t.TempDir(), "sessions.db"))
		require.NoError(t, err)
		defer func() { require.NoError(t, b.Close()) }()
		f(t, b)
	})
}

var ctx = context.Background()

func TestCreateRefusesDuplicates(t *testing.T) {
	stores(t, func(t *testing.T, s Store) {
		h := Header{ID: "c1", ParentSession: "p", Origin: "subagent", DelegationDepth: 1}
		require.NoError(t, s.Create(ctx, h, nil))
		err := s.Create(ctx, h, nil)
		require.Equal(t, messages.Code("DUPLICATE_CHILD"), messages.CodeOf(err))
		require.Equal(t, `subagent "c1" already exists`, err.Error())
		ids, err := s.IDs(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"c1"}, ids)
	})
}

func TestStaleEpochCannotWrite(t *testing.T) {
	stores(t, func(t *testing.T, s Store) {
		require.NoError(t, s.Create(ctx, Header{ID: "c1"}, nil))
		first, err := s.Activate(ctx, "c1")
		require.NoError(t, err)
		require.Equal(t, uint64(1), first.Header.Epoch)
		_, err = s.Accept(ctx, "c1", 1, InboxMessage{ID: "m1"})
		require.NoError(t, err)
		second, err := s.Activate(ctx, "c1")
		require.NoError(t, err)
		require.Equal(t, uint64(2), second.Header.Epoch)
		_, err = s.Accept(ctx, "c1", 1, InboxMessage{ID: "m2"})
		require.ErrorIs(t, err, ErrStaleEpoch)
		require.ErrorIs(t, s.Append(ctx, "c1", 1, Entry{Kind: EntryMessage}), ErrStaleEpoch)
		_, err = s.Accept(ctx, "c1", 2, InboxMessage{ID: "m3"})
		require.NoError(t, err)
		snap, err := s.Load(ctx, "c1")
		require.NoError(t, err)
		require.Len(t, snap.Inbox, 2)
		require.Equal(t, "m3", snap.Inbox[1].ID)
		_, err = s.Activate(ctx, "nope")
		require.ErrorIs(t, err, ErrNotFound)
	})
}

func TestOrderAndRestorePlan(t *testing.T) {
	stores(t, func(t *testing.T, s Store) {
		require.NoError(t, s.Create(ctx, Header{ID: "c1"}, nil))
		snap, err := s.Activate(ctx, "c1")
		require.NoError(t, err)
		e := snap.Header.Epoch
		for _, id := range []string{"m1", "m2", "m3", "m4"} {
			_, err := s.Accept(ctx, "c1", e, InboxMessage{ID: id})
			require.NoError(t, err)
		}
		require.NoError(t, s.Append(ctx, "c1", e,
			Entry{Kind: EntryTurnStart, InboxID: "m1"}, Entry{Kind: EntryTurnEnd, InboxID: "m1", StopReason: "completed"},
			Entry{Kind: EntryTurnStart, InboxID: "m2"}))
		snap, err = s.Load(ctx, "c1")
		require.NoError(t, err)
		for i, m := range snap.Inbox {
			require.Equal(t, uint64(i+1), m.Seq)
		}
		toRun, cut := snap.Pending()
		require.Equal(t, []string{"m3", "m4"}, idsOf(toRun))
		require.Equal(t, []string{"m2"}, idsOf(cut))
	})
}

func idsOf(ms []InboxMessage) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

func TestFirstDescriptorOfTheOwnSuffixWins(t *testing.T) {
	stores(t, func(t *testing.T, s Store) {
		seed := Entry{Kind: EntryDescriptor, Descriptor: json.RawMessage(`{"version":2,"mode":"one-shot"}`)}
		own := Entry{Kind: EntryDescriptor, Descriptor: json.RawMessage(`{"version":2,"mode":"continuable"}`)}
		later := Entry{Kind: EntryDescriptor, Descriptor: json.RawMessage(`{"version":2,"mode":"later"}`)}
		require.NoError(t, s.Create(ctx, Header{ID: "c1", SeedLength: 1}, []Entry{seed, own, later}))
		snap, err := s.Load(ctx, "c1")
		require.NoError(t, err)
		require.JSONEq(t, `{"version":2,"mode":"continuable"}`, string(snap.FirstDescriptor()))
	})
}

func TestConcurrentAcceptsKeepOneSequence(t *testing.T) {
	stores(t, func(t *testing.T, s Store) {
		require.NoError(t, s.Create(ctx, Header{ID: "c1"}, nil))
		snap, err := s.Activate(ctx, "c1")
		require.NoError(t, err)
		var wg sync.WaitGroup
		errs := make(chan error, 50)
		for range 50 {
			wg.Go(func() {
				_, err := s.Accept(ctx, "c1", snap.Header.Epoch, InboxMessage{ID: "m"})
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
		require.False(t, errors.Is(err, ErrStaleEpoch))
	})
}

// A disposal that drops accepted messages records them discarded: a later
// restore does not run them; the quiet flag survives the journal.
func TestDiscardedMessagesAreNotRestored(t *testing.T) {
	stores(t, func(t *testing.T, s Store) {
		require.NoError(t, s.Create(ctx, Header{ID: "c1"}, nil))
		snap, err := s.Activate(ctx, "c1")
		require.NoError(t, err)
		e := snap.Header.Epoch
		for _, m := range []InboxMessage{{ID: "m1"}, {ID: "m2", Quiet: true}, {ID: "m3"}} {
			_, err := s.Accept(ctx, "c1", e, m)
			require.NoError(t, err)
		}
		require.NoError(t, s.Append(ctx, "c1", e, Entry{Kind: EntryDiscarded, InboxID: "m1"}))
		snap, err = s.Load(ctx, "c1")
		require.NoError(t, err)
		toRun, cut := snap.Pending()
		require.Equal(t, []string{"m2", "m3"}, idsOf(toRun))
		require.True(t, toRun[0].Quiet)
		require.False(t, toRun[1].Quiet)
		require.Empty(t, cut)
	})
}

// Head agrees with Load's header and first own descriptor, whatever comes before
// the descriptor (a fork seed with descriptors of its own, messages), after it, or
// when there is none; an unknown id is ErrNotFound.
func TestHeadAgreesWithLoad(t *testing.T) {
	stores(t, func(t *testing.T, s Store) {
		desc := func(mode string) Entry {
			return Entry{Kind: EntryDescriptor, Descriptor: json.RawMessage(`{"version":2,"mode":"` + mode + `"}`)}
		}
		msg := Entry{Kind: EntryMessage, Role: "user", Content: []Block{{Type: "text", Text: "hi"}}}
		cases := map[string]struct {
			h       Header
			entries []Entry
		}{
			"plain":                 {Header{ID: "a"}, []Entry{desc("continuable"), msg}},
			"seeded":                {Header{ID: "b", SeedLength: 3}, []Entry{msg, desc("seed"), msg, desc("own"), desc("later")}},
			"descriptor after msgs": {Header{ID: "c", SeedLength: 1}, []Entry{msg, msg, msg, desc("late")}},
			"no descriptor":         {Header{ID: "d", SeedLength: 1}, []Entry{desc("seed-only"), msg}},
			"empty":                 {Header{ID: "e"}, nil},
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
		require.ErrorIs(t, err, ErrNotFound)
	})
}
