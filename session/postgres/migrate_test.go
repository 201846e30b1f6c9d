package postgres

import (
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
