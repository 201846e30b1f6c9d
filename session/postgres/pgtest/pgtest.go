// Package pgtest gives a test a PostgreSQL schema of its own.
//
// The server is $TROUPE_PG_DSN (.ci/postgres.sh starts a private one and prints
// the export line). Without it, a test that asks for a schema is skipped, with
// the command that would run it, unless $TROUPE_PG_REQUIRED=1 (set by .ci/run),
// where it fails: CI must not pass by skipping the PostgreSQL store.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Environment variables.
const (
	DSNEnv      = "TROUPE_PG_DSN"
	RequiredEnv = "TROUPE_PG_REQUIRED"
)

// ServerDSN returns $TROUPE_PG_DSN, or skips t (fails it under
// TROUPE_PG_REQUIRED=1) when it is not set.
func ServerDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(DSNEnv)
	if dsn == "" {
		if os.Getenv(RequiredEnv) == "1" {
			t.Fatalf("%s is not set and %s=1: start PostgreSQL with `eval \"$(.ci/postgres.sh)\"`", DSNEnv, RequiredEnv)
		}
		t.Skipf("PostgreSQL tests skipped: %s is not set (run `eval \"$(.ci/postgres.sh)\"` first)", DSNEnv)
	}
	return dsn
}

// Schema creates a schema of its own for t on the server of ServerDSN and
// returns a DSN whose search_path is that schema; the schema is dropped with
// everything in it when t ends.
func Schema(t testing.TB) string {
	t.Helper()
	server := ServerDSN(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])
	admin(t, server, `CREATE SCHEMA `+name)
	t.Cleanup(func() { admin(t, server, `DROP SCHEMA `+name+` CASCADE`) })
	return WithSearchPath(t, server, name)
}

// WithSearchPath returns dsn with its search_path set to schema.
func WithSearchPath(t testing.TB, dsn, schema string) string {
	t.Helper()
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatalf("%s: %v", DSNEnv, err)
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " search_path=" + schema
}

// admin runs one statement on the server (outside any schema of a test).
func admin(t testing.TB, dsn, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connecting to %s: %v", DSNEnv, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
