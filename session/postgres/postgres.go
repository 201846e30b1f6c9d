package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
)

// Error codes of this store (besides session's ErrStaleEpoch, ErrNotFound and
// DUPLICATE_CHILD).
const (
	// CodeSchemaTooNew: the database's schema is at a version this build does not
	// know (a newer troupe migrated it); Open refuses it rather than guess.
	CodeSchemaTooNew messages.Code = "session/schema-too-new"
	// CodeUnavailable: the store cannot be used (no schema on the search_path,
	// or the store is closed).
	CodeUnavailable messages.Code = "session/unavailable"
	// CodeUnstorable: a string that goes into a text column (a session id, a
	// header field, an entry kind) holds a NUL byte or invalid UTF-8, which
	// PostgreSQL text cannot hold. Nothing is written.
	CodeUnstorable messages.Code = "session/unstorable"
)

// Defaults of Open's options.
const (
	defaultCommitters = 2
	defaultMaxBatch   = 256
	queueLength       = 4096
)

// Store is the PostgreSQL session.Store (see the package doc).
type Store struct {
	pool       *pgxpool.Pool
	group      bool
	committers int
	maxBatch   int

	// mu orders enqueuing against Close: writers hold it shared while they
	// enqueue, Close exclusively while it closes the queue. It guards closed and
	// the queue's closing, nothing else.
	mu     sync.RWMutex
	closed bool
	queue  chan *write
	wg     sync.WaitGroup

	inFlight atomic.Int64 // writes between their call and their outcome (group commit)
	commits  atomic.Int64 // committed write transactions
	writes   atomic.Int64 // writes committed
}

// Option configures Open.
type Option func(*Store)

// WithoutGroupCommit makes every write its own transaction and commit, in the
// caller's goroutine (the baseline of BenchmarkAppends).
func WithoutGroupCommit() Option { return func(s *Store) { s.group = false } }

// WithCommitters sets how many transactions the group commit runs at once
// (default 2); writes that arrive while all of them are busy share the next.
func WithCommitters(n int) Option { return func(s *Store) { s.committers = max(1, n) } }

// WithMaxBatch bounds the writes one group commit takes (default 256).
func WithMaxBatch(n int) Option { return func(s *Store) { s.maxBatch = max(1, n) } }

// Open connects to the database at dsn (a pgx connection string; its
// search_path chooses the schema the tables live in), applies the missing
// migrations (see the package doc) and starts the group commit. Close releases
// everything it started.
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	s := &Store{group: true, committers: defaultCommitters, maxBatch: defaultMaxBatch}
	for _, o := range opts {
		o(s)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = int32(s.committers + 4) // the committers, and reads and activations beside them
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	s.pool = pool
	if s.group {
		s.queue = make(chan *write, queueLength)
		for range s.committers {
			s.wg.Go(s.committer)
		}
	}
	return s, nil
}

// Close waits for the writes already accepted by the group commit, then closes
// the connections. Writes after Close fail with CodeUnavailable.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	if s.queue != nil {
		close(s.queue)
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.pool.Close()
	return nil
}

var errClosed = messages.Errorf(CodeUnavailable, "session/postgres: the store is closed")

// The columns of a session's header, in scanHeader's order.
const headerCols = `id, parent_session, parent_kind, origin, delegation_depth, seed_length, cwd, created_at, version, epoch`

func scanHeader(row pgx.Row, extra ...any) (session.Header, error) {
	var h session.Header
	err := row.Scan(append([]any{&h.ID, &h.ParentSession, &h.ParentKind, &h.Origin, &h.DelegationDepth, &h.SeedLength,
		&h.Cwd, &h.CreatedAt, &h.Version, &h.Epoch}, extra...)...)
	return h, err
}

// storable refuses strings PostgreSQL text cannot hold.
func storable(what string, ss ...string) error {
	for _, s := range ss {
		if strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s) {
			return messages.Errorf(CodeUnstorable, "session/postgres: %s %q holds a NUL byte or invalid UTF-8", what, s)
		}
	}
	return nil
}

// entryRows is entries as the columns of troupe_log: kinds and JSON (with seq 0;
// the seq is the row's), and what they change in the restore index (rows.ix).
func entryRows(entries []session.Entry) (kinds, docs []string, ix indexDelta, err error) {
	kinds, docs = make([]string, len(entries)), make([]string, len(entries))
	status := map[string]int{}
	for i, e := range entries {
		if err := storable("entry kind", e.Kind); err != nil {
			return nil, nil, indexDelta{}, err
		}
		switch e.Kind {
		case session.EntryMessage:
			ix.messages++
		case session.EntryProviderState:
			ix.stateOrd = i + 1
		}
		if st, ok := session.InboxStatus(e.Kind); ok && utf8.ValidString(e.InboxID) && strings.IndexByte(e.InboxID, 0) < 0 {
			// (an id text cannot hold was never accepted: no row to raise)
			if _, seen := status[e.InboxID]; !seen {
				ix.ids = append(ix.ids, e.InboxID)
			}
			status[e.InboxID] = max(status[e.InboxID], st)
		}
		e.Seq = 0
		data, err := json.Marshal(e)
		if err != nil {
			return nil, nil, indexDelta{}, err
		}
		kinds[i], docs[i] = e.Kind, string(data)
	}
	ix.statuses = make([]int16, len(ix.ids))
	for i, id := range ix.ids {
		ix.statuses[i] = int16(status[id])
	}
	return kinds, docs, ix, nil
}

// indexDelta is what a batch of entries changes in the restore index.
type indexDelta struct {
	messages int      // EntryMessage entries
	stateOrd int      // the 1-based position of the last EntryProviderState; 0: none
	ids      []string // the inbox ids the entries name, each once
	statuses []int16  // the status each id is raised to (session.InboxStatus)
}

// Create inserts the session row and its entries in one statement; an existing
// id inserts nothing and is DUPLICATE_CHILD.
func (s *Store) Create(ctx context.Context, h session.Header, entries []session.Entry) error {
	if err := storable("header field", h.ID, h.ParentSession, h.ParentKind, h.Origin, h.Cwd); err != nil {
		return err
	}
	if h.Epoch > math.MaxInt64 {
		return messages.Errorf(CodeUnstorable, "session/postgres: epoch %d is beyond a bigint", h.Epoch)
	}
	kinds, docs, ix, err := entryRows(entries)
	if err != nil {
		return err
	}
	w := &write{id: h.ID, sql: sqlCreate, args: []any{h.ID, h.ParentSession, h.Origin, h.DelegationDepth,
		h.SeedLength, h.Cwd, h.CreatedAt, session.HeaderVersion, h.Epoch, kinds, docs, h.ParentKind,
		ix.messages, ix.stateOrd}}
	w.scan = func(row pgx.Row) (error, error) {
		var created bool
		if err := row.Scan(&created); err != nil {
			return nil, err
		}
		if !created {
			return session.DuplicateError(h.ID), nil
		}
		return nil, nil
	}
	return s.do(ctx, w)
}

const sqlCreate = `WITH s AS (
    INSERT INTO troupe_sessions (id, parent_session, origin, delegation_depth, seed_length, cwd,
        created_at, version, epoch, log_seq, inbox_seq, parent_kind, messages, state_seq)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, cardinality($10::text[]), 0, $12, $13, $14)
    ON CONFLICT (id) DO NOTHING
    RETURNING id
), e AS (
    INSERT INTO troupe_log (session_id, seq, kind, entry)
    SELECT s.id, x.ord, x.kind, x.entry
    FROM s, unnest($10::text[], $11::json[]) WITH ORDINALITY AS x (kind, entry, ord)
)
SELECT EXISTS (SELECT 1 FROM s)`

// Accept appends m to the inbox journal: one statement that advances the
// session's inbox_seq only where the epoch is the caller's (the fence) and
// inserts the message at that seq.
func (s *Store) Accept(ctx context.Context, id string, epoch uint64, m session.InboxMessage) (session.InboxMessage, error) {
	if err := storable("session id", id); err != nil {
		return session.InboxMessage{}, err
	}
	m.Seq = 0
	data, err := json.Marshal(m)
	if err != nil {
		return session.InboxMessage{}, err
	}
	// An id text cannot hold is kept out of the index column (it is still in the
	// message's JSON): no entry can name it, so it stays open, as Pending has it.
	msgID := m.ID
	if storable("inbox id", msgID) != nil {
		msgID = ""
	}
	w := &write{id: id, sql: sqlAccept, args: []any{id, fence(epoch), string(data), msgID}}
	w.scan = func(row pgx.Row) (error, error) {
		var seq *int64
		var exists bool
		if err := row.Scan(&seq, &exists); err != nil {
			return nil, err
		}
		if seq == nil {
			return refusal(exists), nil
		}
		m.Seq = uint64(*seq)
		return nil, nil
	}
	if err := s.do(ctx, w); err != nil {
		return session.InboxMessage{}, err
	}
	return m, nil
}

// fence is epoch as the bigint a write compares with the row's: an epoch beyond
// a bigint was never taken, so it becomes -1, which no row holds.
func fence(epoch uint64) int64 {
	if epoch > math.MaxInt64 {
		return -1
	}
	return int64(epoch)
}

// refusal is the outcome of a fenced write that matched no row.
func refusal(exists bool) error {
	if exists {
		return session.ErrStaleEpoch
	}
	return session.ErrNotFound
}

const sqlAccept = `WITH s AS (
    UPDATE troupe_sessions SET inbox_seq = inbox_seq + 1
    WHERE id = $1 AND epoch = $2
    RETURNING inbox_seq
), m AS (
    INSERT INTO troupe_inbox (session_id, seq, message, msg_id)
    SELECT $1, s.inbox_seq, $3::json, $4 FROM s
)
SELECT (SELECT inbox_seq FROM s), EXISTS (SELECT 1 FROM troupe_sessions WHERE id = $1)`

// Append appends entries to the log, fenced like Accept.
func (s *Store) Append(ctx context.Context, id string, epoch uint64, entries ...session.Entry) error {
	if err := storable("session id", id); err != nil {
		return err
	}
	kinds, docs, ix, err := entryRows(entries)
	if err != nil {
		return err
	}
	w := &write{id: id, sql: sqlAppend, args: []any{id, fence(epoch), kinds, docs, ix.messages, ix.stateOrd, ix.ids, ix.statuses}}
	w.scan = func(row pgx.Row) (error, error) {
		var seq *int64
		var exists bool
		if err := row.Scan(&seq, &exists); err != nil {
			return nil, err
		}
		if seq == nil {
			return refusal(exists), nil
		}
		return nil, nil
	}
	return s.do(ctx, w)
}

// sqlAppend also keeps the restore index: the history's length, the latest
// provider state's seq ($6: its position in the batch) and the status of every
// inbox message an entry names (raised, never lowered).
const sqlAppend = `WITH s AS (
    UPDATE troupe_sessions SET log_seq = log_seq + cardinality($3::text[]),
        messages = messages + $5,
        state_seq = CASE WHEN $6::bigint > 0 THEN log_seq + $6::bigint ELSE state_seq END
    WHERE id = $1 AND epoch = $2
    RETURNING log_seq
), e AS (
    INSERT INTO troupe_log (session_id, seq, kind, entry)
    SELECT $1, s.log_seq - cardinality($3::text[]) + x.ord, x.kind, x.entry
    FROM s, unnest($3::text[], $4::json[]) WITH ORDINALITY AS x (kind, entry, ord)
), i AS (
    UPDATE troupe_inbox t SET status = greatest(t.status, x.status)
    FROM s, unnest($7::text[], $8::smallint[]) AS x (msg_id, status)
    WHERE t.session_id = $1 AND t.msg_id = x.msg_id AND t.status < x.status
)
SELECT (SELECT log_seq FROM s), EXISTS (SELECT 1 FROM troupe_sessions WHERE id = $1)`

// Delete removes the session row; its log and inbox go with it (ON DELETE
// CASCADE). An unknown id is no error.
func (s *Store) Delete(ctx context.Context, id string) error {
	if err := storable("session id", id); err != nil {
		return err
	}
	w := &write{id: id, sql: `WITH d AS (DELETE FROM troupe_sessions WHERE id = $1 RETURNING 1) SELECT count(*) FROM d`,
		args: []any{id}}
	w.scan = func(row pgx.Row) (error, error) {
		var n int
		return nil, row.Scan(&n)
	}
	return s.do(ctx, w)
}

// Activate takes the next epoch (UPDATE … SET epoch = epoch + 1, one statement,
// so concurrent activations get distinct epochs) and reads the session in the
// same transaction: a write fenced at the old epoch that waits on the row lock
// is refused once this commits, and every write committed before it is read.
func (s *Store) Activate(ctx context.Context, id string) (session.Snapshot, error) {
	if err := storable("session id", id); err != nil {
		return session.Snapshot{}, err
	}
	b := &pgx.Batch{}
	b.Queue(`UPDATE troupe_sessions SET epoch = epoch + 1 WHERE id = $1 RETURNING `+headerCols, id)
	queueReads(b, id)
	br := s.pool.SendBatch(ctx, b)
	snap, err := readSnapshot(br)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return session.Snapshot{}, err
	}
	return snap, nil
}

// Resume takes the next epoch and reads, in the same implicit transaction, the
// descriptor, the latest provider state (one row each, by index) and the open
// inbox messages (troupe_inbox_open): a cost independent of the log's length.
func (s *Store) Resume(ctx context.Context, id string) (session.Resumed, error) {
	if err := storable("session id", id); err != nil {
		return session.Resumed{}, err
	}
	b := &pgx.Batch{}
	b.Queue(sqlResume, id)
	b.Queue(sqlOpenInbox, id)
	br := s.pool.SendBatch(ctx, b)
	r, err := scanResumed(br.QueryRow())
	if err == nil {
		err = readOpen(br, &r)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return session.Resumed{}, err
	}
	return r, nil
}

// sqlResume takes the next epoch and returns the header, the restore index's
// counters, the descriptor's entry and the latest provider state's (scanResumed).
const sqlResume = `UPDATE troupe_sessions SET epoch = epoch + 1 WHERE id = $1 RETURNING ` + headerCols + `, log_seq, messages, (
            SELECT l.entry FROM troupe_log l
            WHERE l.session_id = $1 AND l.kind = 'subagent/descriptor' AND l.seq > seed_length
            ORDER BY l.seq LIMIT 1), (
            SELECT l.entry FROM troupe_log l WHERE l.session_id = $1 AND l.seq = state_seq AND state_seq > 0)`

const sqlOpenInbox = `SELECT seq, message, status FROM troupe_inbox WHERE session_id = $1 AND status < 2 ORDER BY seq`

// ResumeAccept is Resume with m accepted at the new epoch, in one explicit
// transaction of two round trips, as a Head and a Resume would take: the first
// opens it and takes the epoch (sqlResume, whose row is the head check decides
// on), the second accepts m, reads the open inbox and commits. A refusal, or any
// failure, rolls it back. It declines start (started is always false): the
// Activation records the turn start itself, in a commit of its own.
func (s *Store) ResumeAccept(ctx context.Context, id string, m session.InboxMessage, _ []session.Entry,
	check func(session.Head) error) (session.Resumed, session.InboxMessage, bool, error) {
	if err := storable("session id", id); err != nil {
		return session.Resumed{}, session.InboxMessage{}, false, err
	}
	m.Seq = 0
	data, err := json.Marshal(m)
	if err != nil {
		return session.Resumed{}, session.InboxMessage{}, false, err
	}
	msgID := m.ID // as Accept: an id text cannot hold stays out of the index column
	if storable("inbox id", msgID) != nil {
		msgID = ""
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return session.Resumed{}, session.InboxMessage{}, false, err
	}
	// Release closes a connection still in a transaction (rollback failed) rather than reuse it.
	defer conn.Release()
	r, err := resumeAccept(ctx, conn.Conn(), id, &m, string(data), msgID, check)
	if err != nil {
		_, _ = conn.Exec(context.Background(), "ROLLBACK") // nothing written
		return session.Resumed{}, session.InboxMessage{}, false, err
	}
	return r, m, false, nil
}

// resumeAccept runs ResumeAccept's two round trips on conn, setting m.Seq. It
// leaves the transaction open if it fails.
func resumeAccept(ctx context.Context, conn *pgx.Conn, id string, m *session.InboxMessage, data, msgID string,
	check func(session.Head) error) (session.Resumed, error) {
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(sqlResume, id)
	br := conn.SendBatch(ctx, b)
	_, err := br.Exec()
	var r session.Resumed
	if err == nil {
		r, err = scanResumed(br.QueryRow())
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return session.Resumed{}, err
	}
	if check != nil {
		h := session.Head{Header: r.Header, Descriptor: r.Descriptor}
		h.Header.Epoch-- // the head as it was before this transaction's epoch
		if err := check(h); err != nil {
			return session.Resumed{}, err
		}
	}
	b = &pgx.Batch{}
	b.Queue(sqlResumeAccept, id, data, msgID)
	b.Queue(sqlOpenInbox, id)
	b.Queue(`COMMIT`)
	br = conn.SendBatch(ctx, b)
	var seq int64
	err = br.QueryRow().Scan(&seq)
	if err == nil {
		err = readOpen(br, &r)
	}
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return session.Resumed{}, err
	}
	m.Seq = uint64(seq)
	return r, nil
}

const sqlResumeAccept = `WITH s AS (
    UPDATE troupe_sessions SET inbox_seq = inbox_seq + 1
    WHERE id = $1
    RETURNING inbox_seq
), m AS (
    INSERT INTO troupe_inbox (session_id, seq, message, msg_id)
    SELECT $1, s.inbox_seq, $2::json, $3 FROM s
)
SELECT inbox_seq FROM s`

// scanResumed reads sqlResume's row: the header, the counters, the descriptor
// and the provider state; an unknown session is ErrNotFound.
func scanResumed(row pgx.Row) (session.Resumed, error) {
	var logSeq, msgs int64
	var desc, state []byte
	h, err := scanHeader(row, &logSeq, &msgs, &desc, &state)
	if errors.Is(err, pgx.ErrNoRows) {
		err = session.ErrNotFound
	}
	if err != nil {
		return session.Resumed{}, err
	}
	r := session.Resumed{Header: h, LogSeq: uint64(logSeq), Messages: int(msgs)}
	for _, f := range []struct {
		data []byte
		set  func(session.Entry)
	}{
		{desc, func(e session.Entry) { r.Descriptor = e.Descriptor }},
		{state, func(e session.Entry) { r.State = e.State }},
	} {
		if f.data == nil {
			continue
		}
		var e session.Entry
		if err := json.Unmarshal(f.data, &e); err != nil {
			return session.Resumed{}, err
		}
		f.set(e)
	}
	return r, nil
}

// readOpen reads sqlOpenInbox's rows into r's ToRun and CutOff.
func readOpen(br pgx.BatchResults, r *session.Resumed) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	var seq int64
	var data []byte
	var status int16
	for rows.Next() {
		if err := rows.Scan(&seq, &data, &status); err != nil {
			return err
		}
		var m session.InboxMessage
		if err := json.Unmarshal(data, &m); err != nil {
			return err
		}
		m.Seq = uint64(seq)
		if status == 1 {
			r.CutOff = append(r.CutOff, m)
		} else {
			r.ToRun = append(r.ToRun, m)
		}
	}
	return rows.Err()
}

// History reads the model history up to upTo (the primary key's range, kind
// filtered); an unknown session is ErrNotFound.
func (s *Store) History(ctx context.Context, id string, upTo uint64) ([]session.Entry, error) {
	if err := storable("session id", id); err != nil {
		return nil, err
	}
	if upTo > math.MaxInt64 {
		upTo = math.MaxInt64
	}
	b := &pgx.Batch{}
	b.Queue(`SELECT EXISTS (SELECT 1 FROM troupe_sessions WHERE id = $1)`, id)
	b.Queue(`SELECT seq, entry FROM troupe_log WHERE session_id = $1 AND seq <= $2 AND kind = 'message' ORDER BY seq`, id, int64(upTo))
	var out []session.Entry
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			br := tx.SendBatch(ctx, b)
			defer br.Close()
			var exists bool
			if err := br.QueryRow().Scan(&exists); err != nil {
				return err
			}
			if !exists {
				return session.ErrNotFound
			}
			if err := readRows(br, func(seq uint64, data []byte) error {
				var e session.Entry
				if err := json.Unmarshal(data, &e); err != nil {
					return err
				}
				e.Seq = seq
				out = append(out, e)
				return nil
			}); err != nil {
				return err
			}
			return br.Close()
		})
	return out, err
}

func queueReads(b *pgx.Batch, id string) {
	b.Queue(`SELECT seq, entry FROM troupe_log WHERE session_id = $1 ORDER BY seq`, id)
	b.Queue(`SELECT seq, message FROM troupe_inbox WHERE session_id = $1 ORDER BY seq`, id)
}

// readSnapshot reads the results of a header query and queueReads.
func readSnapshot(br pgx.BatchResults) (session.Snapshot, error) {
	h, err := scanHeader(br.QueryRow())
	if errors.Is(err, pgx.ErrNoRows) {
		err = session.ErrNotFound
	}
	if err != nil {
		return session.Snapshot{}, err
	}
	snap := session.Snapshot{Header: h}
	if err := readRows(br, func(seq uint64, data []byte) error {
		var e session.Entry
		if err := json.Unmarshal(data, &e); err != nil {
			return err
		}
		e.Seq = seq
		snap.Log = append(snap.Log, e)
		return nil
	}); err != nil {
		return session.Snapshot{}, err
	}
	if err := readRows(br, func(seq uint64, data []byte) error {
		var m session.InboxMessage
		if err := json.Unmarshal(data, &m); err != nil {
			return err
		}
		m.Seq = seq
		snap.Inbox = append(snap.Inbox, m)
		return nil
	}); err != nil {
		return session.Snapshot{}, err
	}
	return snap, nil
}

func readRows(br pgx.BatchResults, f func(seq uint64, data []byte) error) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	var seq int64
	var data []byte
	for rows.Next() {
		if err := rows.Scan(&seq, &data); err != nil {
			return err
		}
		if err := f(uint64(seq), data); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Load reads a session in one read-only REPEATABLE READ transaction (header, log
// and inbox from one snapshot).
func (s *Store) Load(ctx context.Context, id string) (session.Snapshot, error) {
	if err := storable("session id", id); err != nil {
		return session.Snapshot{}, err
	}
	var snap session.Snapshot
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			b := &pgx.Batch{}
			b.Queue(`SELECT `+headerCols+` FROM troupe_sessions WHERE id = $1`, id)
			queueReads(b, id)
			br := tx.SendBatch(ctx, b)
			var err error
			snap, err = readSnapshot(br)
			if cerr := br.Close(); err == nil {
				err = cerr
			}
			return err
		})
	if err != nil {
		return session.Snapshot{}, err
	}
	return snap, nil
}

// Head reads the header and the first descriptor after the fork seed in one
// statement (an index probe on troupe_log_descriptors), whatever the log's length.
func (s *Store) Head(ctx context.Context, id string) (session.Head, error) {
	if err := storable("session id", id); err != nil {
		return session.Head{}, err
	}
	var desc []byte
	h, err := scanHeader(s.pool.QueryRow(ctx, `SELECT `+headerCols+`, (
            SELECT l.entry FROM troupe_log l
            WHERE l.session_id = s.id AND l.kind = 'subagent/descriptor' AND l.seq > s.seed_length
            ORDER BY l.seq LIMIT 1)
        FROM troupe_sessions s WHERE s.id = $1`, id), &desc)
	if errors.Is(err, pgx.ErrNoRows) {
		return session.Head{}, session.ErrNotFound
	}
	if err != nil {
		return session.Head{}, err
	}
	out := session.Head{Header: h}
	if desc != nil {
		var e session.Entry
		if err := json.Unmarshal(desc, &e); err != nil {
			return session.Head{}, err
		}
		out.Descriptor = e.Descriptor
	}
	return out, nil
}

// IDs lists the session ids in byte order.
func (s *Store) IDs(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT id FROM troupe_sessions ORDER BY id`)
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if len(ids) == 0 {
		ids = nil
	}
	return ids, err
}

// write is one fenced write: one statement returning one row, which scan turns
// into the write's outcome (nil, or a refusal: ErrStaleEpoch, ErrNotFound,
// DUPLICATE_CHILD) or a database error. Statements never fail for a refusal, so
// one write's refusal does not abort the others sharing its transaction.
type write struct {
	id   string // the session, the order batches lock rows in
	sql  string
	args []any
	scan func(pgx.Row) (outcome, dbErr error)

	state   atomic.Int32 // writePending → writeTaken (a committer has it) or writeCancelled
	done    chan error   // the outcome, once committed (or the commit's error)
	outcome error        // set by scan; read only after the commit
}

const (
	writePending int32 = iota
	writeTaken
	writeCancelled
)

// do runs w: in the caller's goroutine without group commit, else through the
// committers. The caller's ctx governs only the wait before a committer takes
// w: once taken, w's outcome is returned whatever ctx does, so an
// acknowledgement is never reported as a failure, nor the reverse.
func (s *Store) do(ctx context.Context, w *write) error {
	if !s.group {
		if s.isClosed() {
			return errClosed
		}
		if err := s.exec(ctx, []*write{w}); err != nil {
			return err
		}
		return w.outcome
	}
	w.done = make(chan error, 1)
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return errClosed
	}
	s.inFlight.Add(1)
	select {
	case s.queue <- w:
	case <-ctx.Done():
		s.mu.RUnlock()
		s.inFlight.Add(-1)
		return fmt.Errorf("session/postgres: write not started: %w", context.Cause(ctx))
	}
	s.mu.RUnlock()
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		if w.state.CompareAndSwap(writePending, writeCancelled) {
			s.inFlight.Add(-1)
			return fmt.Errorf("session/postgres: write not started: %w", context.Cause(ctx))
		}
		return <-w.done
	}
}

func (s *Store) isClosed() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.closed
}

// committer takes the next write, and with it every write already waiting (up
// to maxBatch), and commits them in one transaction. A lone write waits for
// nobody; writes that arrive while every committer is busy share the next
// commit. It returns when the queue is closed and drained.
func (s *Store) committer() {
	batch := make([]*write, 0, s.maxBatch)
	for w := range s.queue {
		batch = s.take(batch[:0], w)
	more:
		for len(batch) < s.maxBatch {
			select {
			case w, ok := <-s.queue:
				if !ok {
					break more
				}
				batch = s.take(batch, w)
			default:
				break more
			}
		}
		if len(batch) > 0 {
			s.commit(batch)
		}
	}
}

// take adds w to batch unless its caller gave up first.
func (s *Store) take(batch []*write, w *write) []*write {
	if w.state.CompareAndSwap(writePending, writeTaken) {
		return append(batch, w)
	}
	return batch
}

// commit runs batch in one transaction and hands each write its outcome. If a
// statement failed, the transaction rolled back whole and each write runs again
// on its own, so one write's error is not the others'. Any other error (the
// connection broke: the commit may or may not have happened) is every write's.
func (s *Store) commit(batch []*write) {
	// Rows are locked in session-id order in every batch, so two concurrent
	// batches never wait on each other in a cycle; one session's writes keep
	// their order (a stable sort).
	slices.SortStableFunc(batch, func(a, b *write) int { return cmp.Compare(a.id, b.id) })
	ctx := context.Background() // the callers' contexts no longer govern a taken write
	err := s.exec(ctx, batch)
	var pgErr *pgconn.PgError
	if err != nil && len(batch) > 1 && errors.As(err, &pgErr) {
		for _, w := range batch {
			if err := s.exec(ctx, []*write{w}); err != nil {
				s.finish(w, err)
			} else {
				s.finish(w, w.outcome)
			}
		}
		return
	}
	for _, w := range batch {
		if err != nil {
			s.finish(w, err)
		} else {
			s.finish(w, w.outcome)
		}
	}
}

func (s *Store) finish(w *write, err error) {
	s.inFlight.Add(-1)
	w.done <- err
}

// exec sends ws as one pipeline ending in one Sync: PostgreSQL runs them as one
// implicit transaction and commits it (one WAL flush) at the Sync. Outcomes are
// final only when exec returns nil.
func (s *Store) exec(ctx context.Context, ws []*write) error {
	b := &pgx.Batch{}
	for _, w := range ws {
		b.Queue(w.sql, w.args...)
	}
	br := s.pool.SendBatch(ctx, b)
	var first error
	for _, w := range ws {
		outcome, err := w.scan(br.QueryRow())
		w.outcome = outcome
		if err != nil && first == nil {
			first = err
		}
	}
	if err := br.Close(); first == nil {
		first = err
	}
	if first != nil {
		return first
	}
	s.commits.Add(1)
	s.writes.Add(int64(len(ws)))
	return nil
}
