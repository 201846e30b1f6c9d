package settle

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/troupe-rt/troupe/harness"
	"github.com/troupe-rt/troupe/internal/fault"
)

const (
	// defaultSchedules is the default total, split between the two modes. Sized for
	// `go test -race ./test/settle/` on 2 cores; see the package doc for the knobs.
	defaultSchedules = 3000
	schedulesEnv     = "TROUPE_CHAOS_SCHEDULES"
	onlyEnv          = "TROUPE_SCHEDULE"
	// plantedSchedules is how many schedules the planted-bug check runs per mode.
	plantedSchedules = 250
	maxReported      = 3 // failing schedules reported in full before stopping
)

// Schedule index ranges per test, so each test's schedules have their own seeds.
const (
	baseDeterministic = 0
	baseStress        = 1 << 32
	basePlanted       = 2 << 32
)

func totalSchedules(t *testing.T) int {
	t.Helper()
	if s := os.Getenv(schedulesEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 2 {
			t.Fatalf("%s=%q: want an integer ≥ 2", schedulesEnv, s)
		}
		return n
	}
	return defaultSchedules
}

// scheduleSeed derives schedule index's seed from the run's seed.
func scheduleSeed(run, index uint64) uint64 { return fault.Mix(run, index) }

// runSuite runs n schedules of one mode from base, failing t on the first
// maxReported failing ones with their histories and rerun commands.
func runSuite(t *testing.T, m mode, base uint64, n int) {
	seed := harness.Seed(t)
	first, last := base, base+uint64(n)
	if s := os.Getenv(onlyEnv); s != "" {
		i, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want a schedule index", onlyEnv, s)
		}
		if i < first || i >= last {
			t.Skipf("%s=%d is not one of this test's schedules [%d, %d)", onlyEnv, i, first, last)
		}
		first, last = i, i+1
	}
	start := time.Now()
	failed, ops := 0, 0
	for i := first; i < last && failed < maxReported; i++ {
		sc := schedule{index: i, seed: scheduleSeed(seed, i), mode: m}
		v := runSchedule(sc)
		ops += v.ops
		if len(v.violations) == 0 {
			continue
		}
		failed++
		t.Errorf("schedule %d (%s, seed %d) failed:\n- %s\n%s\nrerun this schedule: %s",
			i, m, sc.seed, joinLines(v.violations), v.history,
			harness.RerunCommand(t, seed, fmt.Sprintf("%s=%d", onlyEnv, i)))
	}
	t.Logf("%d %s schedules, %d operations checked, in %v (GOMAXPROCS %d)",
		last-first, m, ops, time.Since(start).Round(time.Millisecond), runtime.GOMAXPROCS(0))
	goleak.VerifyNone(t)
}

func joinLines(ss []string) string {
	out := ""
	for i, s := range ss {
		if i > 0 {
			out += "\n- "
		}
		out += s
	}
	return out
}

// TestSettleDeterministic: schedules on the seeded dispatcher.
func TestSettleDeterministic(t *testing.T) {
	runSuite(t, deterministic, baseDeterministic, totalSchedules(t)/2)
}

// TestSettleStress: schedules on troupe's default dispatcher with seeded Gosched noise.
func TestSettleStress(t *testing.T) {
	n := totalSchedules(t)
	runSuite(t, stress, baseStress, n-n/2)
}

// TestSettleCatchesPlantedCheckThenAct is the mutation check: with the planted
// check-then-act settlement bug (job.PlantedCheckThenActSettle) the suite's checks
// must fail. It reports how many schedules of each mode caught it.
func TestSettleCatchesPlantedCheckThenAct(t *testing.T) {
	seed := harness.Seed(t)
	total := 0
	for _, m := range []mode{deterministic, stress} {
		caught, kinds := 0, map[string]int{}
		for i := range uint64(plantedSchedules) {
			idx := basePlanted + uint64(m)<<20 + i
			v := runSchedule(schedule{index: idx, seed: scheduleSeed(seed, idx), mode: m, planted: true})
			if len(v.violations) > 0 {
				caught++
				kinds[classify(v.violations[0])]++
			}
		}
		total += caught
		t.Logf("planted %s caught in %d of %d %s schedules (first violation by check: %v)",
			"check-then-act-settle", caught, plantedSchedules, m, kinds)
	}
	if total == 0 {
		t.Fatalf("the planted check-then-act settlement bug was caught in 0 of %d schedules", 2*plantedSchedules)
	}
	goleak.VerifyNone(t)
}

func classify(v string) string {
	for _, k := range []string{"porcupine", "settlement commits", "onJobDone", "operations did not", "admission", "Get after", "waiters"} {
		if len(v) >= len(k) && v[:len(k)] == k {
			return k
		}
	}
	return "other"
}
