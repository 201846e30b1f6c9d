package durability

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	bolt "go.etcd.io/bbolt"

	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/session/postgres"
	"github.com/troupe-rt/troupe/session/postgres/pgtest"
)

// backend is a store kind the kill -9 rounds run against.
type backend struct {
	// locate makes a new, empty store location for t (a file path, a DSN).
	locate func(t *testing.T) string
	open   func(location string) (session.Store, error)
	// check reports an inconsistency of the store after a kill.
	check func(s session.Store, location string) error
}

var backends = map[string]backend{
	"bolt": {
		locate: func(t *testing.T) string { return filepath.Join(t.TempDir(), "sessions.db") },
		open:   func(path string) (session.Store, error) { return session.OpenBolt(path) },
		check: func(s session.Store, _ string) error {
			return s.(*session.Bolt).DB().View(func(tx *bolt.Tx) error {
				var errs []string
				for err := range tx.Check() {
					errs = append(errs, err.Error())
				}
				if len(errs) > 0 {
					return fmt.Errorf("tx.Check: %s", strings.Join(errs, "; "))
				}
				return nil
			})
		},
	},
	"postgres": {
		locate: func(t *testing.T) string { return pgtest.Schema(t) },
		open: func(dsn string) (session.Store, error) {
			return postgres.Open(context.Background(), dsn)
		},
		check: checkPostgres,
	},
}

// checkPostgres is PostgreSQL's counterpart of tx.Check for the store's own
// invariants: every session's log and inbox seqs are 1…n without a gap or a
// duplicate, n being the row's log_seq / inbox_seq counter.
func checkPostgres(_ session.Store, dsn string) error {
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, `
        SELECT s.id, 'log', s.log_seq, count(l.seq), coalesce(max(l.seq), 0), count(DISTINCT l.seq)
        FROM troupe_sessions s LEFT JOIN troupe_log l ON l.session_id = s.id GROUP BY s.id
        UNION ALL
        SELECT s.id, 'inbox', s.inbox_seq, count(m.seq), coalesce(max(m.seq), 0), count(DISTINCT m.seq)
        FROM troupe_sessions s LEFT JOIN troupe_inbox m ON m.session_id = s.id GROUP BY s.id`)
	if err != nil {
		return err
	}
	var bad []string
	var id, what string
	var counter, n, top, distinct int64
	_, err = pgx.ForEachRow(rows, []any{&id, &what, &counter, &n, &top, &distinct}, func() error {
		if n != counter || top != counter || distinct != n {
			bad = append(bad, fmt.Sprintf("%s %s: counter %d, %d rows, max seq %d, %d distinct", id, what, counter, n, top, distinct))
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s", strings.Join(bad, "; "))
	}
	return nil
}
