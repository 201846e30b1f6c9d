package session

import (
	"context"
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// A session's log, appended a few entries at a time, allocates about its own size
// (chunked): append's own growth of a long slice by a quarter allocates about four
// times the final size over 10,000 entries, and copies it about as often.
func TestMemoryLogAllocatesItsEntriesOnce(t *testing.T) {
	m := NewMemory()
	ctx := context.Background()
	require.NoError(t, m.Create(ctx, Header{ID: "c"}, nil))
	snap, err := m.Activate(ctx, "c")
	require.NoError(t, err)
	turn := []Entry{{Kind: EntryMessage}, {Kind: EntryTurnEnd}}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 5_000 {
		require.NoError(t, m.Append(ctx, "c", snap.Header.Epoch, turn...))
	}
	runtime.ReadMemStats(&after)
	log, err := m.Load(ctx, "c")
	require.NoError(t, err)
	require.Len(t, log.Log, 10_000)
	for i, e := range log.Log {
		require.Equal(t, uint64(i+1), e.Seq)
	}
	size := float64(len(log.Log)) * float64(unsafe.Sizeof(Entry{}))
	require.Less(t, float64(after.TotalAlloc-before.TotalAlloc)/size, 1.5, "bytes allocated per byte of the log")
}
