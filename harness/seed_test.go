package harness_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/harness"
	"github.com/troupe-rt/troupe/internal/fault"
)

// fakeTB captures what Seed logs and registers.
type fakeTB struct {
	name     string
	failed   bool
	logs     []string
	cleanups []func()
}

func (f *fakeTB) Helper()                      {}
func (f *fakeTB) Logf(format string, a ...any) { f.logs = append(f.logs, sprintf(format, a...)) }
func (f *fakeTB) Cleanup(fn func())            { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Failed() bool                 { return f.failed }
func (f *fakeTB) Name() string                 { return f.name }
func (f *fakeTB) runCleanups() {
	for _, c := range f.cleanups {
		c()
	}
}

func TestSeedFromEnvLoggedFirstAndRerunOnFailure(t *testing.T) {
	t.Setenv(harness.SeedEnv, "12345")
	f := &fakeTB{name: "TestX/sub case"}
	require.EqualValues(t, 12345, harness.Seed(f))
	require.Len(t, f.logs, 1)
	require.Contains(t, f.logs[0], "seed 12345")
	f.runCleanups()
	require.Len(t, f.logs, 1, "no rerun line when the test passed")
	f.failed = true
	f.runCleanups()
	require.Len(t, f.logs, 2)
	line := f.logs[1]
	require.Contains(t, line, "go test")
	require.Contains(t, line, "./harness")
	require.Contains(t, line, `-run '^TestX$/^sub case$'`)
	require.Contains(t, line, "-seed 12345")
}

func TestSeedRandomWhenUnset(t *testing.T) {
	t.Setenv(harness.SeedEnv, "")
	f := &fakeTB{name: "TestY"}
	harness.Seed(f)
	require.True(t, strings.Contains(f.logs[0], "random"), f.logs[0])
}

func TestRerunCommandEnv(t *testing.T) {
	cmd := harness.RerunCommand(&fakeTB{name: "TestZ"}, 7, "TROUPE_SCHEDULE=3")
	require.True(t, strings.HasPrefix(cmd, "TROUPE_SCHEDULE=3 go test"), cmd)
}

func TestNoiseIsSafeForConcurrentUse(t *testing.T) {
	noise := harness.Noise(1, 50)
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 1000 {
				noise()
			}
		}()
	}
	for range 4 {
		<-done
	}
	harness.Noise(1, 0)() // pct 0 never yields
}

func sprintf(format string, a ...any) string { return fmt.Sprintf(format, a...) }

func TestChaosInstallsUntilCleanup(t *testing.T) {
	f := &fakeTB{name: "TestChaos"}
	harness.Chaos(f, 3, 10)
	require.True(t, fault.Active())
	f.runCleanups()
	require.False(t, fault.Active())
}
