package session_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/troupe-rt/troupe/session"
)

// A session written before the restore index existed (no "open" bucket, no
// "index" key) is indexed by its first Resume, from its log: that Resume, and
// every later one after more writes, agrees with the whole snapshot.
func TestBoltResumeIndexesASessionWrittenWithoutTheIndex(t *testing.T) {
	ctx := context.Background()
	b, err := session.OpenBolt(filepath.Join(t.TempDir(), "old.db"))
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Close()) }()
	msg := session.Entry{Kind: session.EntryMessage, Role: "user", Content: []session.Block{{Type: "text", Text: "hi"}}}
	require.NoError(t, b.Create(ctx, session.Header{ID: "c1"}, []session.Entry{{Kind: session.EntryDescriptor,
		Descriptor: json.RawMessage(`{"version":2,"mode":"continuable"}`)}}))
	snap, err := b.Activate(ctx, "c1")
	require.NoError(t, err)
	e := snap.Header.Epoch
	for _, id := range []string{"m1", "m2", "m3", "m4"} {
		_, err := b.Accept(ctx, "c1", e, session.InboxMessage{ID: id})
		require.NoError(t, err)
	}
	require.NoError(t, b.Append(ctx, "c1", e, session.Entry{Kind: session.EntryTurnStart, InboxID: "m1"}, msg,
		session.Entry{Kind: session.EntryTurnEnd, InboxID: "m1"}, session.Entry{Kind: session.EntryTurnStart, InboxID: "m2"},
		session.Entry{Kind: session.EntryProviderState, State: json.RawMessage(`{"s":1}`)}))
	require.NoError(t, b.DB().Update(func(tx *bolt.Tx) error { // as an older build left it
		sb := tx.Bucket([]byte("sessions")).Bucket([]byte("c1"))
		require.NotNil(t, sb.Bucket([]byte("open")), "Create made the index")
		require.NoError(t, sb.DeleteBucket([]byte("open")))
		return sb.Delete([]byte("index"))
	}))
	agrees := func() session.Resumed {
		t.Helper()
		r, err := b.Resume(ctx, "c1")
		require.NoError(t, err)
		snap, err := b.Load(ctx, "c1")
		require.NoError(t, err)
		want, got := snap.Resumed(), r
		require.JSONEq(t, string(want.State), string(got.State))
		require.JSONEq(t, string(want.Descriptor), string(got.Descriptor))
		got.State, want.State, got.Descriptor, want.Descriptor = nil, nil, nil, nil
		require.Equal(t, want, got)
		return r
	}
	r := agrees()
	require.Len(t, r.ToRun, 2)
	require.Len(t, r.CutOff, 1)
	require.Equal(t, 1, r.Messages)
	_, err = b.Accept(ctx, "c1", r.Header.Epoch, session.InboxMessage{ID: "m5"})
	require.NoError(t, err)
	require.NoError(t, b.Append(ctx, "c1", r.Header.Epoch, session.Entry{Kind: session.EntryTurnStart, InboxID: "m3"}, msg,
		session.Entry{Kind: session.EntryTurnEnd, InboxID: "m3"}))
	r = agrees()
	require.Equal(t, []string{"m4", "m5"}, []string{r.ToRun[0].ID, r.ToRun[1].ID})
	require.Equal(t, 2, r.Messages)
}
