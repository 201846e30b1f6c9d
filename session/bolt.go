package session

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"slices"
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
	// The restore index (Resume), kept in each write's transaction: bucketOpen
	// holds one key per accepted message not yet resolved (openKey: its id and its
	// seq) with its status byte; keyIndex holds the model history's length and the
	// seq of the latest provider/state entry (two big-endian uint64s). A session
	// written before the index existed has neither; Resume builds them from its
	// log, once.
	bucketOpen = []byte("open")
	keyIndex   = []byte("index")
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

// appendEntries appends entries to the log and, if the session has a restore
// index, keeps it.
func appendEntries(sb *bolt.Bucket, entries []Entry) error {
	lb := sb.Bucket(bucketLog)
	ob := sb.Bucket(bucketOpen)
	var ix index
	if ob != nil {
		ix = readIndex(sb)
	}
	for _, e := range entries {
		seq, err := lb.NextSequence()
		if err != nil {
			return err
		}
		e.Seq = seq
		if err := putJSON(lb, seqKey(seq), e); err != nil {
			return err
		}
		if ob == nil {
			continue
		}
		switch e.Kind {
		case EntryMessage:
			ix.messages++
		case EntryProviderState:
			ix.stateSeq = seq
		}
		if st, ok := inboxStatus(e.Kind); ok {
			if err := raise(ob, e.InboxID, st); err != nil {
				return err
			}
		}
	}
	if ob == nil {
		return nil
	}
	return sb.Put(keyIndex, ix.bytes())
}

// index is keyIndex's value.
type index struct {
	messages uint64 // EntryMessage entries
	stateSeq uint64 // the latest EntryProviderState's seq; 0: none
}

func readIndex(sb *bolt.Bucket) index {
	v := sb.Get(keyIndex)
	if len(v) != 16 {
		return index{}
	}
	return index{messages: binary.BigEndian.Uint64(v[:8]), stateSeq: binary.BigEndian.Uint64(v[8:])}
}

func (ix index) bytes() []byte {
	var v [16]byte
	binary.BigEndian.PutUint64(v[:8], ix.messages)
	binary.BigEndian.PutUint64(v[8:], ix.stateSeq)
	return v[:]
}

// maxOpenID is the longest inbox id an open key holds as is; a longer one (no
// Activation mints one) is replaced by its SHA-256, to stay within bbolt's key size.
const maxOpenID = 1024

// openPrefix is the key prefix of every open message with inbox id id: its
// length (two bytes) and its bytes, so no id's prefix is another's.
func openPrefix(id string) []byte {
	if len(id) > maxOpenID {
		sum := sha256.Sum256([]byte(id))
		id = string(sum[:])
	}
	k := make([]byte, 2, 2+len(id)+8)
	binary.BigEndian.PutUint16(k, uint16(len(id)))
	return append(k, id...)
}

func openKey(id string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(openPrefix(id), seq)
}

// raise raises the status of every open message with inbox id id to st (at
// least): a resolved one leaves the bucket.
func raise(ob *bolt.Bucket, id string, st byte) error {
	prefix := openPrefix(id)
	c := ob.Cursor()
	var keys [][]byte
	for k, v := c.Seek(prefix); k != nil && len(k) == len(prefix)+8 && string(k[:len(prefix)]) == string(prefix); k, v = c.Next() {
		if len(v) == 1 && v[0] < st {
			keys = append(keys, append([]byte(nil), k...))
		}
	}
	for _, k := range keys {
		var err error
		if st == inboxResolved {
			err = ob.Delete(k)
		} else {
			err = ob.Put(k, []byte{st})
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// buildIndex creates the restore index of a session written without one, from
// its whole log and inbox.
func buildIndex(sb *bolt.Bucket, h Header) error {
	snap, err := read(sb, h)
	if err != nil {
		return err
	}
	ob, err := sb.CreateBucket(bucketOpen)
	if err != nil {
		return err
	}
	r := snap.Resumed()
	ix := index{messages: uint64(r.Messages)}
	for _, e := range snap.Log {
		if e.Kind == EntryProviderState {
			ix.stateSeq = e.Seq
		}
	}
	for _, m := range r.ToRun {
		if err := ob.Put(openKey(m.ID, m.Seq), []byte{inboxOpen}); err != nil {
			return err
		}
	}
	for _, m := range r.CutOff {
		if err := ob.Put(openKey(m.ID, m.Seq), []byte{inboxStarted}); err != nil {
			return err
		}
	}
	return sb.Put(keyIndex, ix.bytes())
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
		if _, err := sb.CreateBucket(bucketOpen); err != nil {
			return err
		}
		if err := sb.Put(keyIndex, index{}.bytes()); err != nil {
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

// Resume takes the next epoch and reads the restore index, the header, the
// descriptor, the latest provider state and the open messages: a handful of
// reads plus one per open message, whatever the log's length.
func (b *Bolt) Resume(ctx context.Context, id string) (Resumed, error) {
	r, _, _, err := b.resume(id, nil, nil, nil)
	return r, err
}

// ResumeAccept is Resume with m accepted at the new epoch, and start appended if
// m is then the only open message, in the same transaction (one synced commit),
// once check has accepted the head that transaction reads.
func (b *Bolt) ResumeAccept(ctx context.Context, id string, m InboxMessage, start []Entry, check func(Head) error) (Resumed, InboxMessage, bool, error) {
	return b.resume(id, &m, start, check)
}

// resume reads the header and the descriptor and, if check (when not nil)
// accepts them, takes the next epoch, accepts m at it if m is not nil, reads the
// restore index and, if start is not empty and m is the only open message,
// appends start, in one transaction.
func (b *Bolt) resume(id string, m *InboxMessage, start []Entry, check func(Head) error) (Resumed, InboxMessage, bool, error) {
	var r Resumed
	var out InboxMessage
	var started bool
	err := b.write(func(tx *bolt.Tx) error {
		started = false // fn may run more than once (see write)
		sb, h, err := session(tx, id)
		if err != nil {
			return err
		}
		desc, err := descriptor(sb, h)
		if err != nil {
			return err
		}
		if check != nil {
			if err := check(Head{Header: h, Descriptor: desc}); err != nil {
				return err // nothing written: bbolt rolls the transaction back
			}
		}
		h.Epoch++
		if err := putJSON(sb, keyHeader, h); err != nil {
			return err
		}
		if sb.Bucket(bucketOpen) == nil {
			if err := buildIndex(sb, h); err != nil {
				return err
			}
		}
		if m != nil {
			if out, err = accept(sb, *m); err != nil {
				return err
			}
		}
		if r, err = resumed(sb, h, desc); err != nil {
			return err
		}
		if m != nil && len(start) > 0 && onlyOpen(r, out) {
			if err := appendEntries(sb, start); err != nil {
				return err
			}
			started = true
		}
		return nil
	})
	if err != nil {
		return Resumed{}, InboxMessage{}, false, err
	}
	return r, out, started, nil
}

// onlyOpen reports whether m is r's only open message: nothing else to run and
// nothing cut off, so m's turn is the one to start at once.
func onlyOpen(r Resumed, m InboxMessage) bool {
	return len(r.CutOff) == 0 && len(r.ToRun) == 1 && r.ToRun[0].ID == m.ID && r.ToRun[0].Seq == m.Seq
}

// resumed reads the restore index of session sb (header h, descriptor desc).
func resumed(sb *bolt.Bucket, h Header, desc json.RawMessage) (Resumed, error) {
	r := Resumed{Header: h, Descriptor: desc}
	lb, ib := sb.Bucket(bucketLog), sb.Bucket(bucketInbox)
	r.LogSeq = lb.Sequence()
	ix := readIndex(sb)
	r.Messages = int(ix.messages)
	if ix.stateSeq != 0 {
		var e Entry
		if err := json.Unmarshal(lb.Get(seqKey(ix.stateSeq)), &e); err != nil {
			return Resumed{}, err
		}
		r.State = e.State
	}
	type open struct {
		seq uint64
		st  byte
	}
	var opens []open
	if err := sb.Bucket(bucketOpen).ForEach(func(k, v []byte) error {
		if len(k) < 10 || len(v) != 1 {
			return errors.New("session: corrupt restore index")
		}
		opens = append(opens, open{seq: binary.BigEndian.Uint64(k[len(k)-8:]), st: v[0]})
		return nil
	}); err != nil {
		return Resumed{}, err
	}
	slices.SortFunc(opens, func(a, b open) int { return cmp.Compare(a.seq, b.seq) })
	for _, o := range opens {
		var m InboxMessage
		if err := json.Unmarshal(ib.Get(seqKey(o.seq)), &m); err != nil {
			return Resumed{}, err
		}
		if o.st == inboxStarted {
			r.CutOff = append(r.CutOff, m)
		} else {
			r.ToRun = append(r.ToRun, m)
		}
	}
	return r, nil
}

// History reads the log up to upTo and keeps its messages.
func (b *Bolt) History(ctx context.Context, id string, upTo uint64) ([]Entry, error) {
	var out []Entry
	err := b.db.View(func(tx *bolt.Tx) error {
		sb, _, err := session(tx, id)
		if err != nil {
			return err
		}
		c := sb.Bucket(bucketLog).Cursor()
		for k, v := c.First(); k != nil && binary.BigEndian.Uint64(k) <= upTo; k, v = c.Next() {
			var e Entry
			if err := json.Unmarshal(v, &e); err != nil {
				return err
			}
			if e.Kind == EntryMessage {
				out = append(out, e)
			}
		}
		return nil
	})
	return out, err
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
		out.Descriptor, err = descriptor(sb, h)
		return err
	})
	return out, err
}

// descriptor reads the log from the first entry after the seed up to the first
// descriptor (normally that very entry).
func descriptor(sb *bolt.Bucket, h Header) (json.RawMessage, error) {
	c := sb.Bucket(bucketLog).Cursor()
	for k, v := c.Seek(seqKey(uint64(h.SeedLength) + 1)); k != nil; k, v = c.Next() {
		var e Entry
		if err := json.Unmarshal(v, &e); err != nil {
			return nil, err
		}
		if e.Kind == EntryDescriptor {
			return e.Descriptor, nil
		}
	}
	return nil, nil
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
		out, err = accept(sb, m)
		return err
	})
	return out, err
}

// accept appends m to sb's inbox journal and marks it open in the restore index.
func accept(sb *bolt.Bucket, m InboxMessage) (InboxMessage, error) {
	ib := sb.Bucket(bucketInbox)
	seq, err := ib.NextSequence()
	if err != nil {
		return InboxMessage{}, err
	}
	m.Seq = seq
	if ob := sb.Bucket(bucketOpen); ob != nil {
		if err := ob.Put(openKey(m.ID, seq), []byte{inboxOpen}); err != nil {
			return InboxMessage{}, err
		}
	}
	return m, putJSON(ib, seqKey(seq), m)
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
