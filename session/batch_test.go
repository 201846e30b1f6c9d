package session

import (
	"context"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// budget bounds every wait; nothing waits for it to pass.
const budget = 10 * time.Second

var ctx = context.Background()

func openTestBolt(t *testing.T) (*Bolt, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sessions.db")
	b, err := OpenBolt(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b, path
}

// lastTxID is the id of the file's last committed write transaction.
func lastTxID(t *testing.T, db *bolt.DB) int {
	t.Helper()
	var id int
	require.NoError(t, db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil }))
	return id
}

// within fails t unless f returns within budget.
func within(t *testing.T, what string, f func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		require.NoError(t, err, what)
	case <-time.After(budget):
		t.Fatalf("%s waited for company: a lone write must commit at once", what)
	}
}

// A write with no other in flight commits on its own at once: with a batch
// window of an hour, every kind of write still returns.
func TestLoneWriteDoesNotWaitTheBatchWindow(t *testing.T) {
	b, _ := openTestBolt(t)
	b.db.MaxBatchDelay = time.Hour
	var epoch uint64
	within(t, "Create", func() error { return b.Create(ctx, Header{ID: "c1"}, []Entry{{Kind: EntryDescriptor}}) })
	within(t, "Activate", func() error {
		s, err := b.Activate(ctx, "c1")
		epoch = s.Header.Epoch
		return err
	})
	within(t, "Accept", func() error { _, err := b.Accept(ctx, "c1", epoch, InboxMessage{ID: "m1"}); return err })
	within(t, "Append", func() error { return b.Append(ctx, "c1", epoch, Entry{Kind: EntryTurnStart, InboxID: "m1"}) })
	within(t, "Delete", func() error { return b.Delete(ctx, "c1") })
	require.Zero(t, b.inFlight.Load())
}

// Concurrent writes share commits: n creates, held behind a write transaction
// until all are in flight, take far fewer than n commits, and every one is stored.
func TestConcurrentCreatesShareCommits(t *testing.T) {
	const n = 32
	b, _ := openTestBolt(t)
	b.db.MaxBatchDelay = 50 * time.Millisecond
	before := lastTxID(t, b.db)
	release, holding := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- b.db.Update(func(*bolt.Tx) error { close(holding); <-release; return nil })
	}()
	<-holding
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() { errs <- b.Create(ctx, Header{ID: "c" + string(rune('A'+i))}, nil) })
	}
	deadline := time.Now().Add(budget)
	for b.inFlight.Load() != n {
		require.True(t, time.Now().Before(deadline), "only %d creates in flight", b.inFlight.Load())
		runtime.Gosched()
	}
	close(release)
	require.NoError(t, <-held)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	ids, err := b.IDs(ctx)
	require.NoError(t, err)
	require.Len(t, ids, n)
	commits := lastTxID(t, b.db) - before - 1 // less the holding transaction
	t.Logf("%d creates in %d commits", n, commits)
	require.Less(t, commits, n/2, "concurrent creates must share commits")
	require.Zero(t, b.inFlight.Load())
}

// Opening a file that already holds the sessions bucket writes nothing (no synced
// commit per open).
func TestOpenExistingFileWritesNothing(t *testing.T) {
	b, path := openTestBolt(t)
	require.NoError(t, b.Create(ctx, Header{ID: "c1"}, nil))
	txid := lastTxID(t, b.db)
	require.NoError(t, b.Close())
	again, err := OpenBolt(path)
	require.NoError(t, err)
	defer func() { require.NoError(t, again.Close()) }()
	require.Equal(t, txid, lastTxID(t, again.db))
	ids, err := again.IDs(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"c1"}, ids)
}
