package fault_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/troupe-rt/troupe/internal/fault"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestInactiveByDefault(t *testing.T) {
	require.False(t, fault.Active())
	require.False(t, fault.Point("x"))
	require.False(t, fault.Planted("x"))
	fault.Yield("x") // no injector: a no-op
}

func TestInstallRestoreAndHits(t *testing.T) {
	in := fault.New(7, fault.PointPercent("always", 100), fault.Plant("bug"))
	restore := fault.Install(in)
	require.True(t, fault.Active())
	require.True(t, fault.Point("always"))
	require.False(t, fault.Point("never"))
	require.True(t, fault.Planted("bug"))
	require.False(t, fault.Planted("other"))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				fault.Yield("y")
			}
		})
	}
	wg.Wait()
	require.Equal(t, 800, in.Hits("y"))
	require.Equal(t, 1, in.Hits("always"))
	restore()
	require.False(t, fault.Active())
	require.False(t, fault.Planted("bug"))
}

// The k-th decision is a function of (seed, k) only.
func TestDecisionsReplayFromSeed(t *testing.T) {
	run := func(seed uint64) []bool {
		restore := fault.Install(fault.New(seed, fault.PointPercent("p", 30)))
		defer restore()
		out := make([]bool, 200)
		for i := range out {
			out[i] = fault.Point("p")
		}
		return out
	}
	a, b, c := run(42), run(42), run(43)
	require.Equal(t, a, b)
	require.NotEqual(t, a, c)
	fired := 0
	for _, v := range a {
		if v {
			fired++
		}
	}
	require.InDelta(t, 60, fired, 30) // ≈ 30% of 200
}

func BenchmarkYieldInactive(b *testing.B) {
	for b.Loop() {
		fault.Yield("job.settle.before-decide")
	}
}

// Rule 5: an injector installed inside another keeps the outer one's planted bugs
// until it is restored; restoring brings back exactly the outer one.
func TestNestedInjectorKeepsPlantedBugs(t *testing.T) {
	outer := fault.New(1, fault.Plant("bug"))
	restoreOuter := fault.Install(outer)
	inner := fault.New(2, fault.YieldPercent(50), fault.Plant("own"))
	restoreInner := fault.Install(inner)
	require.True(t, fault.Planted("bug"), "the outer injector's bug")
	require.True(t, fault.Planted("own"))
	fault.Yield("p")
	require.Equal(t, 1, inner.Hits("p"))
	require.Zero(t, outer.Hits("p"))
	restoreInner()
	require.True(t, fault.Planted("bug"))
	require.False(t, fault.Planted("own"), "the inner injector's bug went with it")
	restoreOuter()
	require.False(t, fault.Active())
	require.False(t, fault.Planted("bug"))

	// Nothing planted outside: the inner injector plants only its own.
	restore := fault.Install(fault.New(3))
	require.False(t, fault.Planted("bug"))
	restore()
}
