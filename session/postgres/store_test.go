package postgres

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/session/postgres/pgtest"
	"github.com/troupe-rt/troupe/session/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var ctx = context.Background()

// budget bounds every wait; nothing waits for it to pass.
const budget = 30 * time.Second

// open opens a store on a schema of t's own.
func open(t *testing.T, opts ...Option) (*Store, string) {
	t.Helper()
	dsn := pgtest.Schema(t)
	s, err := Open(ctx, dsn, opts...)
	require.NoError(t, err)
	// Cleanups run last first: the test's own connections (made later) close
	// before the store, so a failed test never leaves Close waiting on their locks.
	t.Cleanup(func() { _ = s.Close() })
	return s, dsn
}

// The store contract (session/storetest), the same suite Memory and Bolt run:
// with group commit (the default) and with one commit per write.
func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) session.Store { s, _ := open(t); return s })
}

func TestStoreWithoutGroupCommit(t *testing.T) {
	storetest.Run(t, func(t *testing.T) session.Store { s, _ := open(t, WithoutGroupCommit()); return s })
}

// conn is a connection of the test's own to the store's schema.
func conn(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// holdRow opens a transaction on c that locks session id's row (as an
// activation in progress would) and returns the transaction and its backend pid.
func holdRow(t *testing.T, c *pgx.Conn, id, set string) (pgx.Tx, int) {
	t.Helper()
	tx, err := c.Begin(ctx)
	require.NoError(t, err)
	tag, err := tx.Exec(ctx, `UPDATE troupe_sessions SET `+set+` WHERE id = $1`, id)
	require.NoError(t, err)
	require.Equal(t, int64(1), tag.RowsAffected())
	var pid int
	require.NoError(t, tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
	return tx, pid
}

// waitBlockedBy waits until n backends wait on a lock that the backend pid holds.
func waitBlockedBy(t *testing.T, dsn string, pid, n int) {
	t.Helper()
	c := conn(t, dsn)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(budget)
	for {
		var blocked int
		require.NoError(t, c.QueryRow(ctx,
			`SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY (pg_blocking_pids(pid))`, pid).Scan(&blocked))
		if blocked >= n {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%d backends blocked by %d, want %d", blocked, pid, n)
		}
	}
}

// waitInFlight waits until n writes are between their call and their outcome.
func waitInFlight(t *testing.T, s *Store, n int64) {
	t.Helper()
	deadline := time.Now().Add(budget)
	for s.inFlight.Load() != n {
		require.True(t, time.Now().Before(deadline), "%d writes in flight, want %d", s.inFlight.Load(), n)
		runtime.Gosched()
	}
}

// The fence is in the write's own statement, not a read before it: a write at
// epoch 1 that reaches the row while an activation to epoch 2 holds it (not yet
// committed) waits for the row, re-reads it and is refused. A store that read the
// epoch first and wrote after would have read 1 and written.
func TestStaleWriteWaitingOnAnActivationIsRefused(t *testing.T) {
	writes := map[string]func(s *Store, epoch uint64) error{
		"accept": func(s *Store, epoch uint64) error {
			_, err := s.Accept(ctx, "c1", epoch, session.InboxMessage{ID: "m"})
			return err
		},
		"append": func(s *Store, epoch uint64) error {
			return s.Append(ctx, "c1", epoch, session.Entry{Kind: session.EntryTurnStart, InboxID: "x"})
		},
	}
	for _, mode := range []struct {
		name string
		opts []Option
	}{{"group", nil}, {"single", []Option{WithoutGroupCommit()}}} {
		for name, write := range writes {
			t.Run(mode.name+"/"+name, func(t *testing.T) {
				s, dsn := open(t, mode.opts...)
				require.NoError(t, s.Create(ctx, session.Header{ID: "c1"}, nil))
				snap, err := s.Activate(ctx, "c1")
				require.NoError(t, err)
				require.Equal(t, uint64(1), snap.Header.Epoch)

				tx, pid := holdRow(t, conn(t, dsn), "c1", "epoch = epoch + 1") // the next activation, in flight
				done := make(chan error, 1)
				go func() { done <- write(s, 1) }()
				waitBlockedBy(t, dsn, pid, 1)
				require.NoError(t, tx.Commit(ctx))
				require.ErrorIs(t, <-done, session.ErrStaleEpoch)
				got, err := s.Load(ctx, "c1")
				require.NoError(t, err)
				require.Equal(t, uint64(2), got.Header.Epoch)
				require.Empty(t, got.Inbox)
				require.Empty(t, got.Log)

				// And the reverse: the activation rolls back, the waiting write goes through.
				tx, pid = holdRow(t, conn(t, dsn), "c1", "epoch = epoch + 1")
				go func() { done <- write(s, 2) }()
				waitBlockedBy(t, dsn, pid, 1)
				require.NoError(t, tx.Rollback(ctx))
				require.NoError(t, <-done)
				got, err = s.Load(ctx, "c1")
				require.NoError(t, err)
				require.Equal(t, 1, len(got.Inbox)+len(got.Log))
			})
		}
	}
}

// xacts is the number of distinct transactions that wrote the inbox rows of ids
// (rows one transaction wrote share their xmin): an oracle of the commits that
// asks PostgreSQL, not the store.
func xacts(t *testing.T, dsn string, ids []string) int {
	t.Helper()
	var n int
	require.NoError(t, conn(t, dsn).QueryRow(ctx,
		`SELECT count(DISTINCT xmin::text) FROM troupe_inbox WHERE session_id = ANY ($1)`, ids).Scan(&n))
	return n
}

// Concurrent writes share commits: with the one committer held on a locked row,
// n accepts queue up, and once the row is free they commit in far fewer than n
// transactions — each write still its own outcome, each session its own seqs.
func TestConcurrentWritesShareCommits(t *testing.T) {
	const n = 32
	s, dsn := open(t, WithCommitters(1))
	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprintf("c%02d", i))
	}
	for _, id := range append([]string{"hold"}, ids...) {
		require.NoError(t, s.Create(ctx, session.Header{ID: id}, nil))
	}
	tx, pid := holdRow(t, conn(t, dsn), "hold", "cwd = 'held'")
	held := make(chan error, 1)
	go func() { held <- s.Append(ctx, "hold", 0, session.Entry{Kind: session.EntryMessage}) }()
	waitBlockedBy(t, dsn, pid, 1) // the committer is in the held write's transaction

	var wg sync.WaitGroup
	errs := make(chan error, n)
	for _, id := range ids {
		wg.Go(func() {
			m, err := s.Accept(ctx, id, 0, session.InboxMessage{ID: "m-" + id})
			if err == nil && m.Seq != 1 {
				err = fmt.Errorf("%s: seq %d", id, m.Seq)
			}
			errs <- err
		})
	}
	waitInFlight(t, s, n+1)
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, <-held)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	commits := xacts(t, dsn, ids)
	t.Logf("%d accepts in %d transactions", n, commits)
	require.Less(t, commits, n/2, "concurrent writes must share commits")
	for _, id := range ids {
		snap, err := s.Load(ctx, id)
		require.NoError(t, err)
		require.Len(t, snap.Inbox, 1)
	}
	require.Zero(t, s.inFlight.Load())
}

// Without group commit every write is a transaction of its own (the oracle of
// TestConcurrentWritesShareCommits can tell them apart).
func TestWithoutGroupCommitEachWriteCommits(t *testing.T) {
	const n = 16
	s, dsn := open(t, WithoutGroupCommit())
	var ids []string
	for i := range n {
		id := fmt.Sprintf("c%02d", i)
		ids = append(ids, id)
		require.NoError(t, s.Create(ctx, session.Header{ID: id}, nil))
	}
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			_, err := s.Accept(ctx, id, 0, session.InboxMessage{ID: "m"})
			require.NoError(t, err)
		})
	}
	wg.Wait()
	require.Equal(t, n, xacts(t, dsn, ids))
}

// A statement that fails aborts its whole transaction; the writes that shared it
// run again on their own, so only the failing one fails, and the others commit
// exactly once.
func TestAFailingWriteDoesNotFailItsBatch(t *testing.T) {
	const n = 8
	s, dsn := open(t, WithCommitters(1))
	for _, id := range []string{"hold", "a"} {
		require.NoError(t, s.Create(ctx, session.Header{ID: id}, nil))
	}
	tx, pid := holdRow(t, conn(t, dsn), "hold", "cwd = 'held'")
	held := make(chan error, 1)
	go func() { held <- s.Append(ctx, "hold", 0, session.Entry{Kind: session.EntryMessage}) }()
	waitBlockedBy(t, dsn, pid, 1)

	bad := &write{id: "a", sql: `SELECT 1 / (SELECT count(*) - count(*) FROM troupe_sessions)`}
	bad.scan = func(row pgx.Row) (error, error) { var x int; return nil, row.Scan(&x) }
	failed := make(chan error, 1)
	go func() { failed <- s.do(ctx, bad) }()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			_, err := s.Accept(ctx, "a", 0, session.InboxMessage{ID: "m"})
			errs <- err
		})
	}
	waitInFlight(t, s, n+2)
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, <-held)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.ErrorContains(t, <-failed, "division by zero")
	snap, err := s.Load(ctx, "a")
	require.NoError(t, err)
	require.Len(t, snap.Inbox, n, "each accept committed exactly once")
	for i, m := range snap.Inbox {
		require.Equal(t, uint64(i+1), m.Seq)
	}
}

// A caller whose context ends while its write waits for a committer gets its
// context's error, and the write never happens; one already taken is waited for.
func TestCancelledWaitingWriteNeverHappens(t *testing.T) {
	s, dsn := open(t, WithCommitters(1))
	for _, id := range []string{"hold", "a"} {
		require.NoError(t, s.Create(ctx, session.Header{ID: id}, nil))
	}
	tx, pid := holdRow(t, conn(t, dsn), "hold", "cwd = 'held'")
	heldCtx, cancelHeld := context.WithCancel(ctx)
	held := make(chan error, 1)
	go func() { held <- s.Append(heldCtx, "hold", 0, session.Entry{Kind: session.EntryMessage}) }()
	waitBlockedBy(t, dsn, pid, 1)
	cancelHeld() // taken already: its outcome stands

	wctx, cancel := context.WithCancelCause(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := s.Accept(wctx, "a", 0, session.InboxMessage{ID: "never"})
		done <- err
	}()
	waitInFlight(t, s, 2)
	stop := fmt.Errorf("the caller gave up")
	cancel(stop)
	require.ErrorIs(t, <-done, stop)
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, <-held, "a taken write is not cancelled")
	_, err := s.Accept(ctx, "a", 0, session.InboxMessage{ID: "after"}) // behind the cancelled one, if it ran
	require.NoError(t, err)
	snap, err := s.Load(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, []string{"after"}, []string{snap.Inbox[0].ID})
	require.Len(t, snap.Inbox, 1)
	held2, err := s.Load(ctx, "hold")
	require.NoError(t, err)
	require.Len(t, held2.Log, 1)
	require.Zero(t, s.inFlight.Load())
}

// Close lets the writes already queued commit, then refuses new ones.
func TestCloseCommitsQueuedWritesThenRefuses(t *testing.T) {
	const n = 8
	s, dsn := open(t, WithCommitters(1))
	require.NoError(t, s.Create(ctx, session.Header{ID: "hold"}, nil))
	require.NoError(t, s.Create(ctx, session.Header{ID: "a"}, nil))
	tx, pid := holdRow(t, conn(t, dsn), "hold", "cwd = 'held'")
	held := make(chan error, 1)
	go func() { held <- s.Append(ctx, "hold", 0, session.Entry{Kind: session.EntryMessage}) }()
	waitBlockedBy(t, dsn, pid, 1)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() { _, err := s.Accept(ctx, "a", 0, session.InboxMessage{ID: "m"}); errs <- err })
	}
	waitInFlight(t, s, n+1)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, <-closed)
	require.NoError(t, <-held)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	_, err := s.Accept(ctx, "a", 0, session.InboxMessage{ID: "late"})
	require.Equal(t, CodeUnavailable, messages.CodeOf(err))
	require.NoError(t, s.Close(), "a second Close is a no-op")

	again, err := Open(ctx, dsn)
	require.NoError(t, err)
	defer again.Close()
	snap, err := again.Load(ctx, "a")
	require.NoError(t, err)
	require.Len(t, snap.Inbox, n)
}

// Strings PostgreSQL text cannot hold are refused with a code, before anything
// is written; JSON content carries them (as escapes).
func TestUnstorableStrings(t *testing.T) {
	s, _ := open(t)
	for _, bad := range []string{"nul\x00", "bad\xffutf8"} {
		err := s.Create(ctx, session.Header{ID: bad}, nil)
		require.Equal(t, CodeUnstorable, messages.CodeOf(err), "%q", bad)
		err = s.Create(ctx, session.Header{ID: "ok", Cwd: bad}, nil)
		require.Equal(t, CodeUnstorable, messages.CodeOf(err), "%q", bad)
		_, err = s.Accept(ctx, bad, 0, session.InboxMessage{})
		require.Equal(t, CodeUnstorable, messages.CodeOf(err), "%q", bad)
		require.Equal(t, CodeUnstorable, messages.CodeOf(s.Append(ctx, "ok", 0, session.Entry{Kind: bad})), "%q", bad)
	}
	ids, err := s.IDs(ctx)
	require.NoError(t, err)
	require.Empty(t, ids)
	err = s.Create(ctx, session.Header{ID: "e"}, nil)
	require.NoError(t, err)
	_, err = s.Accept(ctx, "e", 1<<63, session.InboxMessage{})
	require.ErrorIs(t, err, session.ErrStaleEpoch, "an epoch beyond a bigint was never taken")
	require.Equal(t, CodeUnstorable, messages.CodeOf(s.Create(ctx, session.Header{ID: "big", Epoch: 1 << 63}, nil)))
	_, err = s.Accept(ctx, "e", 0, session.InboxMessage{ID: "m", Content: []session.Block{{Type: "text", Text: "nul\x00 inside"}}})
	require.NoError(t, err)
	snap, err := s.Load(ctx, "e")
	require.NoError(t, err)
	require.Equal(t, "nul\x00 inside", snap.Inbox[0].Content[0].Text)
}
