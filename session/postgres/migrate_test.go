package postgres

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/session/postgres/pgtest"
)

// The embedded migrations are numbered 1, 2, … without gaps, and each is SQL
// of its own file.
func TestMigrationsAreNumberedWithoutGaps(t *testing.T) {
	ms, err := migrations()
	require.NoError(t, err)
	require.NotEmpty(t, ms)
	for i, m := range ms {
		require.Equal(t, i+1, m.version)
		require.NotEmpty(t, m.name)
		require.NotEmpty(t, m.sql)
	}
}

type versionRow struct {
	version int
	name    string
	applied time.Time
	xmin    string
}

func versionRows(t *testing.T, dsn string) []versionRow {
	t.Helper()
	rows, err := conn(t, dsn).Query(ctx, `SELECT version, name, applied_at, xmin::text FROM troupe_schema_version ORDER BY version`)
	require.NoError(t, err)
	var out []versionRow
	for rows.Next() {
		var r versionRow
		require.NoError(t, rows.Scan(&r.version, &r.name, &r.applied, &r.xmin))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// Openers that race on a fresh schema all succeed (the advisory lock makes one
// migrate and the others find it done): every migration is applied exactly once,
// and the store works. Opening it again changes nothing.
func TestConcurrentOpenersMigrateOnce(t *testing.T) {
	const n = 8
	dsn := pgtest.Schema(t)
	ms, err := migrations()
	require.NoError(t, err)
	var wg sync.WaitGroup
	stores := make(chan *Store, n)
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			s, err := Open(ctx, dsn)
			errs <- err
			if err == nil {
				stores <- s
			}
		})
	}
	wg.Wait()
	close(errs)
	close(stores)
	for err := range errs {
		require.NoError(t, err)
	}
	for s := range stores {
		require.NoError(t, s.Create(ctx, session.Header{ID: "x"}, nil), "the first store creates it")
		require.NoError(t, s.Close())
		break
	}
	for s := range stores {
		ids, err := s.IDs(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"x"}, ids)
		require.NoError(t, s.Close())
	}
	rows := versionRows(t, dsn)
	require.Len(t, rows, len(ms))
	for i, r := range rows {
		require.Equal(t, ms[i].version, r.version)
		require.Equal(t, ms[i].name, r.name)
	}

	again, err := Open(ctx, dsn)
	require.NoError(t, err)
	require.NoError(t, again.Close())
	require.Equal(t, rows, versionRows(t, dsn), "a schema already up to date is only read")
}

// A schema migrated by a newer troupe is refused (this build does not know what
// it changed), and so is a search_path that names no schema.
func TestOpenRefusesANewerSchemaAndNoSchema(t *testing.T) {
	dsn := pgtest.Schema(t)
	s, err := Open(ctx, dsn)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	ms, err := migrations()
	require.NoError(t, err)
	_, err = conn(t, dsn).Exec(ctx, `INSERT INTO troupe_schema_version (version, name) VALUES ($1, 'from the future')`, len(ms)+1)
	require.NoError(t, err)
	_, err = Open(ctx, dsn)
	require.Equal(t, CodeSchemaTooNew, messages.CodeOf(err), "%v", err)

	_, err = Open(ctx, pgtest.WithSearchPath(t, pgtest.ServerDSN(t), "no_such_schema_here"))
	require.Equal(t, CodeUnavailable, messages.CodeOf(err), "%v", err)
}

// Sessions written before migration 0003 (no restore index) are indexed by it
// from their logs: Resume agrees with the whole snapshot, and keeps agreeing
// after more writes.
func TestMigrationIndexesExistingSessions(t *testing.T) {
	dsn := pgtest.Schema(t)
	ms, err := migrations()
	require.NoError(t, err)
	c := conn(t, dsn)
	_, err = c.Exec(ctx, createVersionTable)
	require.NoError(t, err)
	for _, m := range ms[:2] { // the schema as of 0002
		_, err := c.Exec(ctx, m.sql)
		require.NoError(t, err)
		_, err = c.Exec(ctx, `INSERT INTO troupe_schema_version (version, name) VALUES ($1, $2)`, m.version, m.name)
		require.NoError(t, err)
	}
	log := []session.Entry{
		{Kind: session.EntryMessage, Role: "user", Content: []session.Block{{Type: "text", Text: "seed"}}},
		{Kind: session.EntryDescriptor, Descriptor: json.RawMessage(`{"version":2,"mode":"continuable"}`)},
		{Kind: session.EntryTurnStart, InboxID: "m1"},
		{Kind: session.EntryMessage, Role: "user", Content: []session.Block{{Type: "text", Text: "one"}}},
		{Kind: session.EntryTurnEnd, InboxID: "m1"},
		{Kind: session.EntryProviderState, State: json.RawMessage(`{"s":1}`)},
		{Kind: session.EntryTurnStart, InboxID: "m2"},
		{Kind: session.EntryProviderState, State: json.RawMessage(`{"s":2}`)},
		{Kind: session.EntryDiscarded, InboxID: "m3"},
	}
	inbox := []string{"m1", "m2", "m3", "m4", "m4"}
	_, err = c.Exec(ctx, `INSERT INTO troupe_sessions (id, parent_session, origin, delegation_depth, seed_length, cwd,
        created_at, version, epoch, log_seq, inbox_seq) VALUES ('c1', 'p', 'subagent', 1, 1, '', 0, 1, 3, $1, $2)`,
		len(log), len(inbox))
	require.NoError(t, err)
	for i, e := range log {
		data, err := json.Marshal(e)
		require.NoError(t, err)
		_, err = c.Exec(ctx, `INSERT INTO troupe_log (session_id, seq, kind, entry) VALUES ('c1', $1, $2, $3)`, i+1, e.Kind, string(data))
		require.NoError(t, err)
	}
	for i, id := range inbox {
		data, err := json.Marshal(session.InboxMessage{ID: id})
		require.NoError(t, err)
		_, err = c.Exec(ctx, `INSERT INTO troupe_inbox (session_id, seq, message) VALUES ('c1', $1, $2)`, i+1, string(data))
		require.NoError(t, err)
	}

	s, err := Open(ctx, dsn)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	agrees := func() session.Resumed {
		t.Helper()
		r, err := s.Resume(ctx, "c1")
		require.NoError(t, err)
		snap, err := s.Load(ctx, "c1")
		require.NoError(t, err)
		want, got := snap.Resumed(), r
		require.JSONEq(t, string(want.State), string(got.State))
		require.JSONEq(t, string(want.Descriptor), string(got.Descriptor))
		got.State, want.State, got.Descriptor, want.Descriptor = nil, nil, nil, nil
		require.Equal(t, want, got)
		return r
	}
	r := agrees()
	require.Equal(t, uint64(4), r.Header.Epoch)
	require.Len(t, r.ToRun, 2)
	require.Len(t, r.CutOff, 1)
	require.Equal(t, 2, r.Messages)
	require.JSONEq(t, `{"s":2}`, string(r.State))
	require.NoError(t, s.Append(ctx, "c1", r.Header.Epoch, session.Entry{Kind: session.EntryTurnAborted, InboxID: "m2"},
		session.Entry{Kind: session.EntryTurnStart, InboxID: "m4"}))
	r = agrees()
	require.Empty(t, r.ToRun)
	require.Len(t, r.CutOff, 2)
}
