package session

import (
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkLoneAccept is one writer appending to a session's inbox, one synced
// Accept at a time: path=store is Bolt.Accept (a write alone commits at once),
// path=batch the same transaction through bolt.Batch, as Accept was before (it
// waits the batch window for company that never comes, then commits).
func BenchmarkLoneAccept(b *testing.B) {
	for _, path := range []string{"store", "batch"} {
		b.Run("path="+path, func(b *testing.B) {
			s, err := OpenBolt(filepath.Join(b.TempDir(), "sessions.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if err := s.Create(ctx, Header{ID: "c1"}, nil); err != nil {
				b.Fatal(err)
			}
			snap, err := s.Activate(ctx, "c1")
			if err != nil {
				b.Fatal(err)
			}
			epoch := snap.Header.Epoch
			msg := InboxMessage{ID: "m", Content: []Block{{Type: "text", Text: "hello"}}}
			for b.Loop() {
				if path == "store" {
					_, err = s.Accept(ctx, "c1", epoch, msg)
				} else {
					err = s.db.Batch(func(tx *bolt.Tx) error {
						ib := tx.Bucket(bucketSessions).Bucket([]byte("c1")).Bucket(bucketInbox)
						seq, err := ib.NextSequence()
						if err != nil {
							return err
						}
						return putJSON(ib, seqKey(seq), msg)
					})
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
