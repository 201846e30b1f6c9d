// Package postgres is the PostgreSQL session.Store, for troupe processes that
// share their sessions (DESIGN "Persistence", "Scale-out"). It keeps the
// contract of session.Store exactly as Bolt does; session/storetest runs the
// same suite against both.
//
//	s, err := postgres.Open(ctx, "postgres://troupe@127.0.0.1:55432/app?search_path=troupe")
//
// # Schema
//
// Tables live in the schema the DSN's search_path selects (it must exist):
//
//	troupe_sessions  one row per session: the header's fields as columns
//	                 (id COLLATE "C" primary key, parent_session, parent_kind,
//	                 origin, delegation_depth, seed_length, cwd, created_at,
//	                 version), epoch (the fencing token), log_seq /
//	                 inbox_seq (the seq of the session's last log entry and
//	                 last inbox message), lease_holder / lease_expires (Claim),
//	                 messages / state_seq (the restore index: the model
//	                 history's length, the latest provider state's seq).
//	troupe_log       (session_id, seq) primary key, kind, entry json: the log.
//	                 A partial index on the descriptors makes Head one probe.
//	troupe_inbox     (session_id, seq) primary key, message json: the journal;
//	                 msg_id (the message's id) and status (0 accepted, 1 its
//	                 turn started, 2 resolved), raised by each Append that names
//	                 it: Resume reads the open ones (status < 2) by a partial
//	                 index, never the log.
//	troupe_schema_version  the applied migrations (version, name, applied_at).
//
// Log and inbox rows reference their session ON DELETE CASCADE. Entries and
// messages are stored as json (not jsonb), so their text is kept byte for byte;
// their seq is the row's. Strings that go into text columns (ids, header fields,
// entry kinds) must be valid UTF-8 without NUL (CodeUnstorable otherwise);
// inside the JSON anything goes.
//
// # Fencing
//
// Every write that needs an activation's epoch is one statement whose UPDATE of
// the session row carries the epoch in its WHERE clause:
//
//	UPDATE troupe_sessions SET inbox_seq = inbox_seq + 1
//	WHERE id = $1 AND epoch = $2 RETURNING inbox_seq
//
// and inserts the row at the seq it returns, in the same statement. There is no
// read of the epoch before the write: the row lock orders the write against an
// activation, and a write that waited for the lock re-checks the WHERE clause
// against the row the activation committed, so it is refused
// (session.ErrStaleEpoch) the moment a newer epoch exists
// (TestStaleWriteWaitingOnAnActivationIsRefused). Activate is
// UPDATE … SET epoch = epoch + 1 RETURNING …, so concurrent activations, on one
// node or on several, get distinct epochs, and the read of the log and inbox
// that follows in the same transaction sees every write committed at the old
// epoch. The seqs come from the row's counters, advanced by the same fenced
// UPDATE, so each session's seqs run 1…n without gaps whatever the concurrency.
// A cluster builds its exclusion on this: whichever Activation took the newest
// epoch is the only one whose writes land, and one whose write is refused
// stops itself. ResumeAccept (a cold followup's restore) is one explicit
// transaction of two round trips: the first opens it and takes the epoch, the
// UPDATE returning the head the caller's check decides on while the row is
// locked (no other write to the session can come between the check and the
// acceptance); the second accepts the message, reads the open inbox and
// commits. A refusal rolls it back: nothing is written.
//
// # Leases
//
// For several nodes, Claim is the activation: one compare-and-set statement
// takes the next epoch and a lease (lease_holder, lease_expires by the
// database's clock) only if no other holder's lease is live; Renew extends it
// and Release gives it up, both fenced by epoch and holder, so a holder that
// lost the session learns it (ErrStaleEpoch) and stops. The lease is liveness,
// not safety: two nodes that disagree about it still cannot both write, the
// epoch sees to that. (A heartbeat table for membership would be a further
// migration on the same database.)
//
// # Group commit
//
// Writes (Create, Accept, Append, Delete) go through a few committers
// (WithCommitters, default 2). A committer takes the next write and every write
// already waiting (up to WithMaxBatch) and sends them as one pipeline ending in
// a single Sync: PostgreSQL runs them as one implicit transaction, one commit,
// one WAL flush, one round trip. A lone write waits for nobody. No statement
// fails for a refusal (a stale epoch, a missing session, a duplicate id are
// results of the statement), so writes sharing a transaction do not fail each
// other; if a statement does fail, the transaction rolled back whole and each of
// its writes runs again alone. A write is acknowledged only after its commit
// returned. The caller's context governs only the wait for a committer: a write
// a committer has taken is waited for, so an acknowledgement is never reported
// as a failure. WithoutGroupCommit makes every write its own transaction in the
// caller's goroutine (the benchmark's baseline).
//
// # Migrations
//
// The schema is versioned in this repository: migrations/NNNN_name.sql,
// embedded in the binary, numbered 1, 2, … without gaps. Open applies the
// missing ones, each in its own transaction with its troupe_schema_version row,
// under a session-level advisory lock keyed by the schema's name, so concurrent
// openers (several nodes starting at once) migrate once and the others wait and
// find the work done; an up-to-date schema is only read. The policy: a
// migration, once merged, is never edited — a change is a new file; migrations
// only add (tables, nullable or defaulted columns, indexes), so a node of the
// previous version keeps working beside one of the next during a rolling
// upgrade; a schema at a version newer than the binary knows is refused
// (CodeSchemaTooNew) rather than used blind.
package postgres
