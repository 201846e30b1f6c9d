package harness

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// SeedEnv is the environment variable that fixes a run's seed when -seed is absent.
const SeedEnv = "TROUPE_SEED"

// seedFlagName is the flag harness registers (unless the binary already has one).
const seedFlagName = "seed"

func init() {
	if flag.Lookup(seedFlagName) == nil {
		flag.String(seedFlagName, "", "seed of randomized troupe tests (default: $"+SeedEnv+", else random)")
	}
}

// Seed returns the run's seed — from -seed, else $TROUPE_SEED, else a random one —
// and logs it with t.Logf before anything else. If the test fails, a cleanup logs
// the exact command that reruns it with the same seed. All of a test's randomness
// (schedules, noise, faults, generated operations) should derive from this value.
func Seed(t TB) uint64 {
	t.Helper()
	seed, src := pickSeed()
	t.Logf("seed %d (%s)", seed, src)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("reproduce with: %s", RerunCommand(t, seed))
		}
	})
	return seed
}

func pickSeed() (uint64, string) {
	if f := flag.Lookup(seedFlagName); f != nil && f.Value.String() != "" {
		if v, err := strconv.ParseUint(f.Value.String(), 10, 64); err == nil {
			return v, "from -seed"
		}
	}
	if s := os.Getenv(SeedEnv); s != "" {
		if v, err := strconv.ParseUint(s, 10, 64); err == nil {
			return v, "from $" + SeedEnv
		}
	}
	return rand.Uint64() >> 1, "random; set -seed or $" + SeedEnv + " to fix it"
}

// RerunCommand is the shell command that reruns test t with seed, from the module
// root: the package path, -race when this binary has it, -run anchored to t's full
// name, -seed, and extra environment assignments (for example
// "TROUPE_CHAOS_SCHEDULES=100000") placed before the command.
func RerunCommand(t TB, seed uint64, env ...string) string {
	var b strings.Builder
	for _, e := range env {
		b.WriteString(e)
		b.WriteByte(' ')
	}
	b.WriteString("go test")
	if raceEnabled {
		b.WriteString(" -race")
	}
	fmt.Fprintf(&b, " %s -run '%s' -seed %d -count=1 -v", packageDir(), runPattern(t.Name()), seed)
	return b.String()
}

func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// packageDir returns the test's package directory relative to the module root
// ("./test/settle"), or "." if there is no go.mod above the working directory.
func packageDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			rel, err := filepath.Rel(dir, wd)
			if err != nil || rel == "." {
				return "."
			}
			return "./" + filepath.ToSlash(rel)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "."
		}
		dir = parent
	}
}
