package harness_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/harness"
)

// racyProducer completes on its own after a seeded bit of noise, and settles killed
// when cancelled: whichever comes first must win, and every caller must agree.
func racyProducer(noise func()) job.Spec {
	return job.Spec{Kind: "racy", Label: "racy", Run: func() (job.Hooks, error) {
		done := make(chan job.Outcome, 2)
		go func() {
			noise()
			done <- job.Outcome{Status: job.Completed, Detail: "exit code: 0", Output: "ok"}
		}()
		return job.Hooks{Done: done, Cancel: func(string) error {
			done <- job.Outcome{Status: job.Killed, Detail: "signal: SIGTERM"}
			return nil
		}}, nil
	}}
}

func newRaceSystem(t *testing.T) *troupe.System {
	t.Helper()
	sys, err := troupe.New(troupe.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sys.Shutdown(context.Background())) })
	_, err = sys.Jobs().AttachController(context.Background(), sys.Scope(), "race-test")
	require.NoError(t, err)
	return sys
}

// TestRacePassesACorrectRuntime: a correct troupe passes every run, whichever of
// the producer and the kills wins.
func TestRacePassesACorrectRuntime(t *testing.T) {
	seed := harness.Seed(t)
	harness.Chaos(t, seed, 30)
	sys := newRaceSystem(t)
	won := map[string]int{}
	for i := range 100 {
		r := harness.Race{Jobs: sys.Jobs(), Seed: seed + uint64(i), Kills: 2, Waits: 2, Reads: 1, Gets: 1}
		snap, err := r.Run(fmt.Sprintf("%s-%d", t.Name(), i), racyProducer(harness.Noise(seed+uint64(i), 50)))
		require.NoError(t, err)
		won[snap.Status.Name()]++
	}
	t.Logf("outcomes over 100 runs: %v", won)
}
