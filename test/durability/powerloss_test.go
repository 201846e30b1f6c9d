package durability

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"

	"github.com/troupe-rt/troupe/harness"
	"github.com/troupe-rt/troupe/session"
)

// Power-loss figures: writers, and acknowledged writes before the power goes.
const (
	powerWriters = 4
	powerAcks    = 160
)

// TestDurabilityPowerLoss is the durability check a kill -9 cannot make: a killed
// process loses nothing the kernel's page cache holds, so a store that never
// syncs passes TestDurabilityKill9. A power loss loses every page of the file the
// kernel has not written back yet, and this test simulates one.
//
// Writers share one session.Bolt store (Create, Activate, Accept, Append, in
// seeded mixes, their commits batched by bbolt). The moment a write returns — its
// acknowledgement — the test looks at the store file's pages in the page cache with
// cachestat(2): a page that is neither dirty nor under writeback holds what the disk
// holds, and the test copies it into its image of the disk; a page still dirty keeps
// the image's older content (what the disk still has). Observations wait for the
// store calls in flight, so each sees the file between commits. After powerAcks
// acknowledgements the power goes: the image is the file a reboot would find. The
// test opens it and checks: bbolt's tx.Check is clean, and acked ⊆ recovered —
// every acknowledged session, inbox message and log entry is there.
//
// Catches: the store opened without fsync (bolt.Options.NoSync, or DB.NoSync set):
// its commits return with their pages dirty, and the image lacks them.
func TestDurabilityPowerLoss(t *testing.T) {
	seed := harness.Seed(t)
	dir := t.TempDir()
	requireWriteback(t, dir)
	path := filepath.Join(dir, "sessions.db")
	store, err := session.OpenBolt(path)
	require.NoError(t, err)
	disk, err := newDiskImage(path)
	require.NoError(t, err)
	defer disk.close()
	require.NoError(t, disk.observe()) // the file as OpenBolt left it

	ctx := context.Background()
	var (
		// quiet is held shared by every store call and exclusively by an
		// observation, so that each observation sees the file between commits: the
		// pages it copies are of one state of the disk, not of several.
		quiet   sync.RWMutex
		mu      sync.Mutex
		acked   = map[string]*ackedSession{} // session → what was acknowledged for it
		budget  = powerAcks
		failure error
	)
	call := func(op func() error) error {
		quiet.RLock()
		defer quiet.RUnlock()
		return op()
	}
	// acknowledge observes the disk at the moment of an acknowledgement and counts
	// it; it reports whether the writer may go on.
	acknowledge := func(record func()) bool {
		quiet.Lock()
		defer quiet.Unlock()
		mu.Lock()
		defer mu.Unlock()
		if err := disk.observe(); err != nil && failure == nil {
			failure = err
		}
		record()
		budget--
		return budget > 0 && failure == nil
	}
	var wg sync.WaitGroup
	for w := range powerWriters {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for n := 0; ; n++ {
				id := fmt.Sprintf("w%d-s%d", w, n)
				if err := call(func() error {
					return store.Create(ctx, session.Header{ID: id, Origin: "subagent", ParentSession: "P"}, nil)
				}); err != nil {
					mu.Lock()
					failure = errors.Join(failure, err)
					mu.Unlock()
					return
				}
				a := &ackedSession{}
				if !acknowledge(func() { acked[id] = a }) {
					return
				}
				var snap session.Snapshot
				if err := call(func() (err error) { snap, err = store.Activate(ctx, id); return }); err != nil {
					mu.Lock()
					failure = errors.Join(failure, err)
					mu.Unlock()
					return
				}
				if !acknowledge(func() { a.epoch = snap.Header.Epoch }) {
					return
				}
				for k := range 1 + rng.IntN(6) {
					text := fmt.Sprintf("%s #%d", id, k)
					var err error
					var record func()
					if rng.IntN(3) == 0 {
						err = call(func() error {
							return store.Append(ctx, id, snap.Header.Epoch, session.Entry{Kind: session.EntryMessage, Role: "assistant",
								Content: []session.Block{{Type: "text", Text: text}}})
						})
						record = func() { a.entries = append(a.entries, text) }
					} else {
						var m session.InboxMessage
						err = call(func() (err error) {
							m, err = store.Accept(ctx, id, snap.Header.Epoch, session.InboxMessage{ID: fmt.Sprintf("msg-%d", k),
								Content: []session.Block{{Type: "text", Text: text}}, Source: session.Source{Kind: "coordinator"}})
							return
						})
						record = func() { a.inbox = append(a.inbox, m) }
					}
					if err != nil {
						mu.Lock()
						failure = errors.Join(failure, err)
						mu.Unlock()
						return
					}
					if !acknowledge(record) {
						return
					}
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, failure)
	// The power goes now: whatever the image lacks is lost. (Closing the store
	// writes nothing; the image was taken before.)
	require.NoError(t, store.Close())
	rebooted := filepath.Join(dir, "after-power-loss.db")
	require.NoError(t, os.WriteFile(rebooted, disk.bytes(), 0o600))
	t.Logf("%d acknowledged writes on %d sessions; the disk image has %d of the file's %d pages (%d observations found pages dirty)",
		powerAcks, len(acked), disk.pagesKept(), disk.pages(), disk.dirtyObservations)

	recovered, err := openAfterPowerLoss(rebooted)
	require.NoError(t, err, "the store after the power loss does not open: acknowledged writes were not on disk")
	defer func() { require.NoError(t, recovered.Close()) }()
	require.NoError(t, recovered.DB().View(func(tx *bolt.Tx) error {
		var errs []string
		for err := range tx.Check() {
			errs = append(errs, err.Error())
		}
		if len(errs) > 0 {
			return fmt.Errorf("tx.Check after the power loss: %s", strings.Join(errs, "; "))
		}
		return nil
	}))
	for id, a := range acked {
		snap, err := recovered.Load(ctx, id)
		require.NoError(t, err, "acknowledged session %s was lost in the power loss", id)
		require.GreaterOrEqual(t, snap.Header.Epoch, a.epoch, "%s: its acknowledged activation was lost", id)
		require.Equal(t, a.inbox, snap.Inbox, "%s: acknowledged inbox messages lost in the power loss", id)
		var texts []string
		for _, e := range snap.Log {
			texts = append(texts, e.Content[0].Text)
		}
		require.Equal(t, a.entries, texts, "%s: acknowledged log entries lost in the power loss", id)
	}
	// Every observation came between commits, after some acknowledgement: a page
	// still dirty then belongs to an acknowledged commit that was not synced.
	require.Zero(t, disk.dirtyObservations, "acknowledged commits left pages unsynced")
}

// openAfterPowerLoss opens the store a reboot finds; bbolt panics on some
// corruptions (a freelist page that is not one), which is an error here.
func openAfterPowerLoss(path string) (b *session.Bolt, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("bbolt panicked opening the file: %v", v)
		}
	}()
	return session.OpenBolt(path)
}

// ackedSession is what was acknowledged for one session, in acknowledgement order
// (one writer per session, so that is also its acceptance order).
type ackedSession struct {
	epoch   uint64
	inbox   []session.InboxMessage
	entries []string
}

// diskImage is the test's image of what the disk holds of one file: it is updated
// from the page cache, page by page, only with pages the kernel reports clean.
type diskImage struct {
	f                 *os.File
	image             []byte
	kept              map[int64]bool // pages of the file the image has taken from the cache
	dirtyObservations int
}

var pageSize = int64(os.Getpagesize())

func newDiskImage(path string) (*diskImage, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return &diskImage{f: f, kept: map[int64]bool{}}, nil
}

func (d *diskImage) close() { d.f.Close() }

// observe copies every page of the file that is neither dirty nor under writeback
// into the image; the others keep what the image had (zeros for a page never seen
// clean).
func (d *diskImage) observe() error {
	st, err := d.f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	if int64(len(d.image)) < size {
		d.image = append(d.image, make([]byte, size-int64(len(d.image)))...)
	}
	dirty := false
	for off := int64(0); off < size; off += pageSize {
		n := min(pageSize, size-off)
		var cs unix.Cachestat_t
		if err := unix.Cachestat(uint(d.f.Fd()), &unix.CachestatRange{Off: uint64(off), Len: uint64(n)}, &cs, 0); err != nil {
			return fmt.Errorf("cachestat: %w", err)
		}
		if cs.Dirty > 0 || cs.Writeback > 0 {
			dirty = true
			continue
		}
		if _, err := d.f.ReadAt(d.image[off:off+n], off); err != nil {
			return err
		}
		d.kept[off/pageSize] = true
	}
	if dirty {
		d.dirtyObservations++
	}
	return nil
}

func (d *diskImage) bytes() []byte  { return d.image }
func (d *diskImage) pages() int     { return int((int64(len(d.image)) + pageSize - 1) / pageSize) }
func (d *diskImage) pagesKept() int { return len(d.kept) }

// requireWriteback skips the test where it cannot tell synced pages from unsynced
// ones: without cachestat(2) (Linux ≥ 6.5), or on a filesystem whose pages are not
// written back (tmpfs). It shows, on dir's filesystem, that a written page is dirty
// until fdatasync and clean after it.
func requireWriteback(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "probe"))
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Write(make([]byte, pageSize))
	require.NoError(t, err)
	stat := func() unix.Cachestat_t {
		var cs unix.Cachestat_t
		err := unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{}, &cs, 0)
		if errors.Is(err, unix.ENOSYS) {
			t.Skip("the kernel has no cachestat(2) (Linux ≥ 6.5): cannot tell synced pages from unsynced ones")
		}
		require.NoError(t, err)
		return cs
	}
	if cs := stat(); cs.Dirty == 0 {
		t.Skipf("%s: a written page is not dirty in the page cache (tmpfs?): no power loss to simulate; set TMPDIR to a disk-backed directory", dir)
	}
	require.NoError(t, unix.Fdatasync(int(f.Fd())))
	cs := stat()
	require.Zero(t, cs.Dirty+cs.Writeback, "%s: a page is still dirty after fdatasync", dir)
}
