package postgres

import (
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/session/postgres/pgtest"
)

// benchStores are the stores the benchmarks compare, in one run: PostgreSQL with
// group commit (the default), PostgreSQL with one commit per write, and bbolt
// (every commit synced, concurrent writes sharing commits through bolt.Batch).
func benchStores(b *testing.B) []struct {
	name string
	open func(b *testing.B) session.Store
} {
	pg := func(opts ...Option) func(b *testing.B) session.Store {
		return func(b *testing.B) session.Store {
			s, err := Open(ctx, pgtest.Schema(b), opts...)
			if err != nil {
				b.Fatal(err)
			}
			return s
		}
	}
	return []struct {
		name string
		open func(b *testing.B) session.Store
	}{
		{"store=postgres/commit=group", pg()},
		{"store=postgres/commit=each", pg(WithoutGroupCommit())},
		{"store=bolt", func(b *testing.B) session.Store {
			s, err := session.OpenBolt(filepath.Join(b.TempDir(), "sessions.db"))
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
	}
}

// BenchmarkAppends: 16 concurrent writers (SetParallelism(8) on 2 cores), each
// appending one log entry at a time to a session of its own; ns/op is per
// append, so appends/s = 1e9 / ns/op. writes/commit is what the group commit
// shared (PostgreSQL only).
func BenchmarkAppends(b *testing.B) {
	for _, st := range benchStores(b) {
		b.Run(st.name, func(b *testing.B) {
			s := st.open(b)
			defer s.Close()
			var next atomic.Int64
			entry := session.Entry{Kind: session.EntryMessage, Role: "assistant",
				Content: []session.Block{{Type: "text", Text: "a reply of a typical length, some sixty bytes long"}}}
			var c0, w0 int64
			if pg, ok := s.(*Store); ok {
				c0, w0 = pg.commits.Load(), pg.writes.Load()
			}
			b.ReportAllocs()
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(p *testing.PB) {
				id := fmt.Sprintf("w%03d", next.Add(1))
				if err := s.Create(ctx, session.Header{ID: id}, nil); err != nil {
					b.Error(err)
					return
				}
				for p.Next() {
					if err := s.Append(ctx, id, 0, entry); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			if pg, ok := s.(*Store); ok {
				if c := pg.commits.Load() - c0; c > 0 {
					b.ReportMetric(float64(pg.writes.Load()-w0)/float64(c), "writes/commit")
				}
			}
		})
	}
}

// BenchmarkColdRestore: Activate of a session of 10 and of 10,000 completed turns
// (each turn an inbox message and four log entries: start, user message,
// assistant message, end), the read a cold restore makes.
func BenchmarkColdRestore(b *testing.B) {
	for _, turns := range []int{10, 10_000} {
		for _, st := range benchStores(b) {
			if st.name == "store=postgres/commit=each" {
				continue // reads do not go through the group commit
			}
			b.Run(fmt.Sprintf("turns=%d/%s", turns, st.name), func(b *testing.B) {
				s := st.open(b)
				defer s.Close()
				fill(b, s, "c1", turns)
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					snap, err := s.Activate(ctx, "c1")
					if err != nil {
						b.Fatal(err)
					}
					if len(snap.Inbox) != turns || len(snap.Log) != 1+4*turns {
						b.Fatalf("restored %d messages, %d entries", len(snap.Inbox), len(snap.Log))
					}
				}
			})
		}
	}
}

// fill writes a session of turns completed turns, a thousand turns a write.
func fill(b *testing.B, s session.Store, id string, turns int) {
	b.Helper()
	desc := session.Entry{Kind: session.EntryDescriptor, Descriptor: []byte(`{"version":2,"mode":"continuable"}`)}
	if err := s.Create(ctx, session.Header{ID: id, ParentSession: "P", Origin: "subagent", DelegationDepth: 1}, []session.Entry{desc}); err != nil {
		b.Fatal(err)
	}
	text := func(s string) []session.Block { return []session.Block{{Type: "text", Text: s}} }
	var entries []session.Entry
	for i := range turns {
		mid := fmt.Sprintf("msg-%08d", i)
		m, err := s.Accept(ctx, id, 0, session.InboxMessage{ID: mid, Content: text("followup " + mid),
			Source: session.Source{Kind: "coordinator", Form: "relay", SenderSessionID: "P"}})
		if err != nil {
			b.Fatal(err)
		}
		entries = append(entries,
			session.Entry{Kind: session.EntryTurnStart, InboxID: m.ID},
			session.Entry{Kind: session.EntryMessage, Role: "user", Content: text("followup " + mid)},
			session.Entry{Kind: session.EntryMessage, Role: "assistant", Content: text("a reply of a typical length, some sixty bytes long")},
			session.Entry{Kind: session.EntryTurnEnd, InboxID: m.ID, StopReason: "completed"})
		if len(entries) >= 4000 || i == turns-1 {
			if err := s.Append(ctx, id, 0, entries...); err != nil {
				b.Fatal(err)
			}
			entries = entries[:0]
		}
	}
}
