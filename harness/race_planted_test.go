//go:build troupe_mutation

package harness_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/harness"
	"github.com/troupe-rt/troupe/internal/fault"
)

// TestRaceCatchesPlantedCheckThenActSettle is the harness's own mutation check:
// with troupe's planted check-then-act settlement bug switched on, Race must report
// a linearizability violation in some of the runs.
func TestRaceCatchesPlantedCheckThenActSettle(t *testing.T) {
	seed := harness.Seed(t)
	t.Cleanup(fault.Install(fault.New(seed, fault.YieldPercent(30), fault.Plant(job.PlantedCheckThenActSettle))))
	sys := newRaceSystem(t)
	const runs = 200
	caught := 0
	for i := range runs {
		r := harness.Race{Jobs: sys.Jobs(), Seed: seed + uint64(i), Kills: 2, Waits: 2, Reads: 1, Gets: 1}
		_, err := r.Run(fmt.Sprintf("%s-%d", t.Name(), i), racyProducer(harness.Noise(seed+uint64(i), 50)))
		var le *harness.LinearizabilityError
		if err != nil {
			require.ErrorAs(t, err, &le, "a failure other than the model's")
			caught++
		}
	}
	t.Logf("planted check-then-act settle caught in %d of %d races", caught, runs)
	require.Positive(t, caught)
}
