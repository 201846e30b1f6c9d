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
	"github.com/troupe-rt/troupe/test/mutation"
)

const (
	// defaultSchedules is the default total, split between the two modes. Sized for
	// `go test -race ./test/settle/` on 2 cores; see the package doc for the knobs.
	defaultSchedules = 3000
	schedulesEnv     = "TROUPE_CHAOS_SCHEDULES"
	onlyEnv          = "TROUPE_SCHEDULE"
	maxReported      = 3 // failing schedules reported in full before stopping
)

// Schedule index ranges per test, so each test's schedules have their own seeds.
const (
	baseDeterministic = 0
	baseStress        = 1 << 32
	baseMutation      = 2 << 32
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
	runSchedules(t, seed, []mode{m}, first, last, "", maxReported)
	goleak.VerifyNone(t)
}

// runSchedules runs the schedules [first, last), schedule i in mode
// modes[i%len(modes)], with the bug plant planted ("" for none), seeded from the
// run's seed. It fails tb on each failing schedule, with its history and rerun
// command (through the named oracles that fired, if any: mutation.Errorf), and
// stops after maxFailed of them; with a bug planted, only schedules that fired a
// named oracle count towards maxFailed (a timeout is not a catch). It returns how
// many schedules ran.
func runSchedules(tb testing.TB, seed uint64, modes []mode, first, last uint64, plant string, maxFailed int) int {
	start := time.Now()
	ran, failed, ops := 0, 0, 0
	for i := first; i < last && failed < maxFailed; i++ {
		m := modes[i%uint64(len(modes))]
		sc := schedule{index: i, seed: scheduleSeed(seed, i), mode: m, plant: plant}
		v := runSchedule(sc)
		ran++
		ops += v.ops
		if len(v.violations) == 0 {
			continue
		}
		if plant == "" || len(v.fired) > 0 {
			failed++
		}
		mutation.Errorf(tb, v.fired, "schedule %d (%s, seed %d) failed:\n- %s\n%s\nrerun this schedule: %s",
			i, m, sc.seed, joinLines(v.violations), v.history,
			harness.RerunCommand(tb, seed, fmt.Sprintf("%s=%d", onlyEnv, i)))
	}
	tb.Logf("%d %v schedules, %d operations checked, in %v (GOMAXPROCS %d)",
		ran, modes, ops, time.Since(start).Round(time.Millisecond), runtime.GOMAXPROCS(0))
	return ran
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
