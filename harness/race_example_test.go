package harness_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/harness"
	"github.com/troupe-rt/troupe/producers/process"
)

// TestMyProducerSettlesOnceUnderKillRaces is the README's example: an embedder's
// producer (here troupe's own shell producer) tested for cancellation races.
func TestMyProducerSettlesOnceUnderKillRaces(t *testing.T) {
	seed := harness.Seed(t)    // -seed or $TROUPE_SEED; a failure logs the rerun command
	harness.Chaos(t, seed, 20) // seeded yields at troupe's own settlement points
	sys, err := troupe.New(troupe.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sys.Shutdown(context.Background())) })
	_, err = sys.Jobs().AttachController(context.Background(), sys.Scope(), "race-test")
	require.NoError(t, err)
	for i := range 20 {
		spec := process.Shell(fmt.Sprintf("echo start; sleep 0.0%d; echo end", i%3), process.Config{})
		race := harness.Race{Jobs: sys.Jobs(), Seed: seed + uint64(i), Kills: 2, Waits: 2}
		snap, err := race.Run(fmt.Sprintf("%s-%d", t.Name(), i), spec) // porcupine-checked
		require.NoError(t, err)
		require.Contains(t, []string{"completed", "killed"}, snap.Status.Name())
	}
}
