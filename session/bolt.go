package session

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// openTimeout bounds the wait for the file lock of a bbolt file held by another process.
const openTimeout = 5 * time.Second

// batchDelay is how long a write that has company waits for more writers to share
// its synced commit (a write alone does not wait: see Bolt.write).
const batchDelay = time.Millisecond

var (
	bucketSessions = []byte("sessions")
	keyHeader      = []byte("header")
	bucketLog      = []byte("log")
	bucketInbox    = []byte("inbox")
)

// Bolt is the embedded Store: one bbolt file, every write a synced commit;
// concurrent writes share commits (bbolt's Batch).
type Bolt struct {
	db       *bolt.DB
	inFlight atomic.Int64 // writes between their call and their synced commit
}

// OpenBolt opens (creating if needed) the store file at path. Opening a file that
// already holds the sessions bucket writes nothing.
func OpenBolt(path string) (*Bolt, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: openTimeout})
	if err != nil {
		return nil, err
	}
	if err := ensureRoot(db); err != nil {
		db.Close()
		return nil, err
	}
	db.MaxBatchDelay = batchDelay
	return &Bolt{db: db}, nil
}

// ensureRoot creates the sessions bucket, in a (synced) write transaction only if
// it is missing.
func ensureRoot(db *bolt.DB) error {
	exists := false
	if err := db.View(func(tx *bolt.Tx) error {
		exists = tx.Bucket(bucketSessions) != nil
		return nil
	}); err != nil {
		return err
	}
	if exists {
		return nil
	}
	return db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucketSessions)
		return err
	})
}

// write runs fn in a write transaction and returns once it is committed (synced,
// unless the db's NoSync is set). A write with no other in flight commits at once
// on its own (bolt.Update): nobody could share its commit, so it does not wait the
// batch window. A write that has company goes through bolt.Batch, which gathers
// the concurrent writes into one commit. fn may run more than once (Batch retries
// the others of a batch when one fails, and runs a failing fn alone), so it must
// derive everything it sets from the transaction it is given.
func (b *Bolt) write(fn func(*bolt.Tx) error) error {
	defer b.inFlight.Add(-1)
	if b.inFlight.Add(1) == 1 {
		return b.db.Update(fn)
	}
	return b.db.Batch(fn)
}

// DB exposes the bbolt handle (for tx.Check in tests and tools).
func (b *Bolt) DB() *bolt.DB { return b.db }

func (b *Bolt) Close() error { return b.db.Close() }

func seqKey(n uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], n)
	return k[:]
}

func session(tx *bolt.Tx, id string) (*bolt.Bucket, Header, error) {
	sb := tx.Bucket(bucketSessions).Bucket([]byte(id))
	if sb == nil {
		return nil, Header{}, ErrNotFound
	}
	var h Header
	if err := json.Unmarshal(sb.Get(keyHeader), &h); err != nil {
		return nil, Header{}, err
	}
	return sb, h, nil
}

func putJSON(b *bolt.Bucket, key []byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(key, data)
}

func appendEntries(sb *bolt.Bucket, entries []Entry) error {
	lb := sb.Bucket(bucketLog)
	for _, e := range entries {
		seq, err := lb.NextSequence()
		if err != nil {
			return err
		}
		e.Seq = seq
		if err := putJSON(lb, seqKey(seq), e); err != nil {
			return err
		}
	}
	return nil
}

func (b *Bolt) Create(ctx context.Context, h Header, entries []Entry) error {
	return b.write(func(tx *bolt.Tx) error {
		root := tx.Bucket(bucketSessions)
		if root.Bucket([]byte(h.ID)) != nil {
			return duplicate(h.ID)
		}
		sb, err := root.CreateBucket([]byte(h.ID))
		if err != nil {
			return err
		}
		if _, err := sb.CreateBucket(bucketLog); err != nil {
			return err
		}
		if _, err := sb.CreateBucket(bucketInbox); err != nil {
			return err
		}
		h.Version = HeaderVersion
		if err := putJSON(sb, keyHeader, h); err != nil {
			return err
		}
		return appendEntries(sb, entries)
	})
}

func read(sb *bolt.Bucket, h Header) (Snapshot, error) {
	s := Snapshot{Header: h}
	if err := sb.Bucket(bucketLog).ForEach(func(_, v []byte) error {
		var e Entry
		if err := json.Unmarshal(v, &e); err != nil {
			return err
		}
		s.Log = append(s.Log, e)
		return nil
	}); err != nil {
		return Snapshot{}, err
	}
	err := sb.Bucket(bucketInbox).ForEach(func(_, v []byte) error {
		var m InboxMessage
		if err := json.Unmarshal(v, &m); err != nil {
			return err
		}
		s.Inbox = append(s.Inbox, m)
		return nil
	})
	return s, err
}

func (b *Bolt) Activate(ctx context.Context, id string) (Snapshot, error) {
	var s Snapshot
	err := b.write(func(tx *bolt.Tx) error {
		sb, h, err := session(tx, id)
		if err != nil {
			return err
		}
		h.Epoch++
		if err := putJSON(sb, keyHeader, h); err != nil {
			return err
		}
		s, err = read(sb, h)
		return err
	})
	return s, err
}

func (b *Bolt) Load(ctx context.Context, id string) (Snapshot, error) {
	var s Snapshot
	err := b.db.View(func(tx *bolt.Tx) error {
		sb, h, err := session(tx, id)
		if err != nil {
			return err
		}
		s, err = read(sb, h)
		return err
	})
	return s, err
}

// Head reads the header and then the log from the first entry after the seed up to
// the first descriptor (normally that very entry): one or two reads, whatever the
// session's length.
func (b *Bolt) Head(ctx context.Context, id string) (Head, error) {
	var out Head
	err := b.db.View(func(tx *bolt.Tx) error {
		sb, h, err := session(tx, id)
		if err != nil {
			return err
		}
		out.Header = h
		c := sb.Bucket(bucketLog).Cursor()
		for k, v := c.Seek(seqKey(uint64(h.SeedLength) + 1)); k != nil; k, v = c.Next() {
			var e Entry
			if err := json.Unmarshal(v, &e); err != nil {
				return err
			}
			if e.Kind == EntryDescriptor {
				out.Descriptor = e.Descriptor
				return nil
			}
		}
		return nil
	})
	return out, err
}

func (b *Bolt) Accept(ctx context.Context, id string, epoch uint64, m InboxMessage) (InboxMessage, error) {
	var out InboxMessage
	err := b.write(func(tx *bolt.Tx) error {
		sb, h, err := session(tx, id)
		if err != nil {
			return err
		}
		if h.Epoch != epoch {
			return ErrStaleEpoch
		}
		ib := sb.Bucket(bucketInbox)
		seq, err := ib.NextSequence()
		if err != nil {
			return err
		}
		m.Seq = seq
		out = m
		return putJSON(ib, seqKey(seq), m)
	})
	return out, err
}

func (b *Bolt) Append(ctx context.Context, id string, epoch uint64, entries ...Entry) error {
	return b.write(func(tx *bolt.Tx) error {
		sb, h, err := session(tx, id)
		if err != nil {
			return err
		}
		if h.Epoch != epoch {
			return ErrStaleEpoch
		}
		return appendEntries(sb, entries)
	})
}

func (b *Bolt) IDs(ctx context.Context) ([]string, error) {
	var ids []string
	err := b.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSessions).ForEachBucket(func(k []byte) error {
			ids = append(ids, string(k))
			return nil
		})
	})
	return ids, err
}

func (b *Bolt) Delete(ctx context.Context, id string) error {
	return b.write(func(tx *bolt.Tx) error {
		err := tx.Bucket(bucketSessions).DeleteBucket([]byte(id))
		if errors.Is(err, berrors.ErrBucketNotFound) {
			return nil
		}
		return err
	})
}
