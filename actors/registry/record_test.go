package registry

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// recordSizeClass is the Go allocator size class a record is allocated in (the
// classes around it: 128, 144, 160 B). One more word (152 B, a sixth bool beside
// the 4-byte status) puts every record in the 160 B class: 16 B more per settled
// record and per live job.
const recordSizeClass = 144

// A record fits its size class: by its layout, and by what the allocator
// actually hands out for one (bytes allocated per record, over many). Fails at
// 152 B (the five bools unpacked), which the allocator rounds up to 160.
func TestRecordFitsItsSizeClass(t *testing.T) {
	require.LessOrEqual(t, unsafe.Sizeof(record{}), uintptr(recordSizeClass), "unsafe.Sizeof(record{})")

	const n = 20000
	hold := make([]*record, n)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range hold {
		hold[i] = new(record)
	}
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(hold)
	perRecord := float64(after.TotalAlloc-before.TotalAlloc) / n
	// Anything else the runtime allocated meanwhile is a few KB at most: well under
	// the 16 B per record the next size class would add.
	require.Less(t, perRecord, float64(recordSizeClass+8), "heap bytes allocated per record")
}

// Each flag is its own bit: setting or clearing one leaves the others as they
// were.
func TestRecordFlagsAreIndependent(t *testing.T) {
	all := []recordFlags{flagReported, flagSlot, flagHasDetail, flagStream, flagReadInline}
	for _, f := range all {
		for _, start := range []recordFlags{0, ^recordFlags(0)} {
			got := start
			got.set(f, start == 0)
			for _, g := range all {
				want := start.has(g)
				if g == f {
					want = start == 0
				}
				require.Equal(t, want, got.has(g), "set %b on %b: bit %b", f, start, g)
			}
		}
	}
	var r record
	r.setReported(true)
	r.setSlot(true)
	r.setHasDetail(true)
	require.True(t, r.reported() && r.slot() && r.hasDetail() && !r.stream() && !r.readInline())
	r.setSlot(false)
	require.True(t, r.reported() && !r.slot() && r.hasDetail())
}
