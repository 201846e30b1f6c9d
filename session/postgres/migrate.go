package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/troupe-rt/troupe/messages"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one versioned schema change: migrations/NNNN_name.sql.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in version order. Their versions
// must be 1, 2, 3, … without gaps (TestMigrationsAreNumberedWithoutGaps).
func migrations() ([]migration, error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, n := range names {
		base := path.Base(n)
		num, rest, ok := strings.Cut(strings.TrimSuffix(base, ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("session/postgres: migration %s: want NNNN_name.sql", base)
		}
		data, err := migrationFiles.ReadFile(n)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: rest, sql: string(data)})
	}
	slices.SortFunc(out, func(a, b migration) int { return a.version - b.version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("session/postgres: migration %d is missing (found %d next)", i+1, m.version)
		}
	}
	return out, nil
}

// migrate brings the schema of the connection's current schema (search_path) up
// to the newest embedded migration. Concurrent openers serialise on a
// session-level advisory lock keyed by the schema's name; each migration runs in
// its own transaction together with its schema_version row, so a crash between
// two leaves a schema at a known version. A schema already up to date is only
// read. A schema newer than this build is refused: this build does not know
// what the newer one changed.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	var schema *string
	if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return err
	}
	if schema == nil {
		return messages.Errorf(CodeUnavailable, "session/postgres: no schema: the search_path names no schema that exists")
	}
	key := "troupe/session/postgres:" + *schema
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended($1, 0))`, key); err != nil {
		return err
	}
	defer func() {
		// A failed unlock (the connection broke) ends with the session anyway;
		// destroy the connection so the lock cannot stay with a pooled one.
		if _, err := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtextextended($1, 0))`, key); err != nil {
			conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()

	current, err := schemaVersion(ctx, conn.Conn())
	if err != nil {
		return err
	}
	if current > len(ms) {
		return messages.Errorf(CodeSchemaTooNew,
			"session/postgres: schema %q is at version %d, newer than this build's %d", *schema, current, len(ms))
	}
	for _, m := range ms[current:] {
		if err := pgx.BeginFunc(ctx, conn.Conn(), func(tx pgx.Tx) error {
			if m.version == 1 {
				if _, err := tx.Exec(ctx, createVersionTable); err != nil {
					return err
				}
			}
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("session/postgres: migration %04d_%s: %w", m.version, m.name, err)
			}
			_, err := tx.Exec(ctx, `INSERT INTO troupe_schema_version (version, name) VALUES ($1, $2)`, m.version, m.name)
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

const createVersionTable = `CREATE TABLE troupe_schema_version (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`

// schemaVersion is the newest applied migration of the current schema, 0 if none.
func schemaVersion(ctx context.Context, conn *pgx.Conn) (int, error) {
	var exists bool
	if err := conn.QueryRow(ctx,
		`SELECT to_regclass(quote_ident(current_schema()) || '.troupe_schema_version') IS NOT NULL`).Scan(&exists); err != nil {
		return 0, err
	}
	if !exists {
		return 0, nil
	}
	var v int
	err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM troupe_schema_version`).Scan(&v)
	return v, err
}
