package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
)

// CodeLeased: another holder's lease on the session is live (Claim).
const CodeLeased messages.Code = "session/leased"

// Claim is Activate for a node of a cluster: it takes the next epoch and a lease
// for holder lasting ttl (by the database's clock), in one compare-and-set
// statement that succeeds only if no other holder's lease is live — free, held
// by holder itself, or expired. Otherwise nothing changes and the error is
// CodeLeased, naming the holder. Safety does not rest on the lease: a holder
// whose lease expired and was claimed away finds its writes refused
// (ErrStaleEpoch) by the epoch, and stops itself. Activate ignores leases.
func (s *Store) Claim(ctx context.Context, id, holder string, ttl time.Duration) (session.Snapshot, error) {
	if err := storable("lease holder", id, holder); err != nil {
		return session.Snapshot{}, err
	}
	b := &pgx.Batch{}
	b.Queue(`UPDATE troupe_sessions
        SET epoch = epoch + 1, lease_holder = $2, lease_expires = now() + $3::bigint * interval '1 microsecond'
        WHERE id = $1 AND (lease_holder IS NULL OR lease_holder = $2 OR lease_expires <= now())
        RETURNING `+headerCols, id, holder, ttl.Microseconds())
	queueReads(b, id)
	br := s.pool.SendBatch(ctx, b)
	snap, err := readSnapshot(br)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, session.ErrNotFound) {
		// The compare-and-set matched no row: say why (a read after a refused
		// write, not before a write).
		var other *string
		var until *time.Time
		rerr := s.pool.QueryRow(ctx, `SELECT lease_holder, lease_expires FROM troupe_sessions WHERE id = $1`, id).Scan(&other, &until)
		if rerr == nil && (other == nil || until == nil) {
			return session.Snapshot{}, messages.Errorf(CodeLeased,
				"session/postgres: %q was leased; the lease has been released since: claim again", id)
		}
		if rerr == nil {
			return session.Snapshot{}, messages.Errorf(CodeLeased,
				"session/postgres: %q is leased to %q until %s", id, *other, until.UTC().Format(time.RFC3339Nano))
		}
		if !errors.Is(rerr, pgx.ErrNoRows) {
			return session.Snapshot{}, rerr
		}
	}
	if err != nil {
		return session.Snapshot{}, err
	}
	return snap, nil
}

// Renew extends the lease of holder's activation at epoch by ttl from now. It
// is refused with ErrStaleEpoch if the session has a newer epoch or another
// holder: that activation has lost the session and must stop.
func (s *Store) Renew(ctx context.Context, id string, epoch uint64, holder string, ttl time.Duration) error {
	if err := storable("lease holder", id, holder); err != nil {
		return err
	}
	return s.leaseWrite(ctx, id, `UPDATE troupe_sessions
        SET lease_expires = now() + $4::bigint * interval '1 microsecond'
        WHERE id = $1 AND epoch = $2 AND lease_holder = $3 RETURNING 1`,
		id, fence(epoch), holder, ttl.Microseconds())
}

// Release gives up holder's lease of its activation at epoch (a clean
// shutdown: the next Claim, anywhere, need not wait for it to expire); refused
// like Renew.
func (s *Store) Release(ctx context.Context, id string, epoch uint64, holder string) error {
	if err := storable("lease holder", id, holder); err != nil {
		return err
	}
	return s.leaseWrite(ctx, id, `UPDATE troupe_sessions SET lease_holder = NULL, lease_expires = NULL
        WHERE id = $1 AND epoch = $2 AND lease_holder = $3 RETURNING 1`, id, fence(epoch), holder)
}

// leaseWrite runs a fenced lease update (sql RETURNING 1) through the commits.
func (s *Store) leaseWrite(ctx context.Context, id, sql string, args ...any) error {
	w := &write{id: id, args: args,
		sql: `WITH u AS (` + sql + `) SELECT EXISTS (SELECT 1 FROM u), EXISTS (SELECT 1 FROM troupe_sessions WHERE id = $1)`}
	w.scan = func(row pgx.Row) (error, error) {
		var done, exists bool
		if err := row.Scan(&done, &exists); err != nil {
			return nil, err
		}
		if !done {
			return refusal(exists), nil
		}
		return nil, nil
	}
	return s.do(ctx, w)
}
