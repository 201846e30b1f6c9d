package postgres

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
)

// A live lease keeps other holders out; its holder may claim again; an expired
// or released lease is anyone's; the holder that lost it finds its writes,
// renewals and release refused by the epoch.
func TestClaimTakesTheLeaseByCompareAndSet(t *testing.T) {
	s, _ := open(t)
	require.NoError(t, s.Create(ctx, session.Header{ID: "c1"}, nil))
	a, err := s.Claim(ctx, "c1", "node-a", time.Hour)
	require.NoError(t, err)
	require.Equal(t, uint64(1), a.Header.Epoch)

	_, err = s.Claim(ctx, "c1", "node-b", time.Hour)
	require.Equal(t, CodeLeased, messages.CodeOf(err), "%v", err)
	require.ErrorContains(t, err, `leased to "node-a"`)
	snap, err := s.Load(ctx, "c1")
	require.NoError(t, err)
	require.Equal(t, uint64(1), snap.Header.Epoch, "a refused claim changes nothing")

	a, err = s.Claim(ctx, "c1", "node-a", time.Hour) // its holder re-activates it
	require.NoError(t, err)
	require.Equal(t, uint64(2), a.Header.Epoch)
	require.NoError(t, s.Renew(ctx, "c1", 2, "node-a", 0)) // expires now

	b, err := s.Claim(ctx, "c1", "node-b", time.Hour) // expired: node-b takes it
	require.NoError(t, err)
	require.Equal(t, uint64(3), b.Header.Epoch)
	require.ErrorIs(t, s.Append(ctx, "c1", 2, session.Entry{Kind: session.EntryMessage}), session.ErrStaleEpoch)
	require.ErrorIs(t, s.Renew(ctx, "c1", 2, "node-a", time.Hour), session.ErrStaleEpoch)
	require.ErrorIs(t, s.Release(ctx, "c1", 2, "node-a"), session.ErrStaleEpoch)
	require.ErrorIs(t, s.Renew(ctx, "c1", 3, "node-a", time.Hour), session.ErrStaleEpoch, "the right epoch, the wrong holder")
	require.NoError(t, s.Append(ctx, "c1", 3, session.Entry{Kind: session.EntryMessage}))

	require.NoError(t, s.Release(ctx, "c1", 3, "node-b"))
	c, err := s.Claim(ctx, "c1", "node-c", time.Hour)
	require.NoError(t, err)
	require.Equal(t, uint64(4), c.Header.Epoch)
	require.Len(t, c.Log, 1, "the snapshot a claim returns is the session")

	_, err = s.Claim(ctx, "nosuch", "node-a", time.Hour)
	require.ErrorIs(t, err, session.ErrNotFound)
	require.ErrorIs(t, s.Renew(ctx, "nosuch", 1, "node-a", time.Hour), session.ErrNotFound)
}

// Holders racing for a free session: exactly one claims it.
func TestConcurrentClaimsOneWins(t *testing.T) {
	const n = 8
	s, _ := open(t)
	require.NoError(t, s.Create(ctx, session.Header{ID: "c1"}, nil))
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			_, err := s.Claim(ctx, "c1", string(rune('a'+i)), time.Hour)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	won := 0
	for err := range errs {
		if err == nil {
			won++
			continue
		}
		require.Equal(t, CodeLeased, messages.CodeOf(err), "%v", err)
	}
	require.Equal(t, 1, won)
	snap, err := s.Load(ctx, "c1")
	require.NoError(t, err)
	require.Equal(t, uint64(1), snap.Header.Epoch)
}
