//go:build troupe_mutation

package mutation

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/internal/fault"
)

// RunsEnv overrides every mutation test's number of paired runs.
const RunsEnv = "TROUPE_MUTATION_RUNS"

// Bug is one planted bug of the catalogue.
type Bug struct {
	Switch string // its fault.Plant name (the Planted… constant's value)
	Const  string // the constant that names it, package-qualified
	What   string // the mistake
	Suite  string // the package of the suite that catches it, from the module root
	Test   string // the mutation test in Suite
	Oracle string // what in the suite catches it
}

// Catalogue is every planted bug, with the suite that must catch it.
var Catalogue = []Bug{
	{
		Switch: job.PlantedCheckThenActSettle, Const: "job.PlantedCheckThenActSettle",
		What:  "the Done watcher settles from a published copy of the job's state, outside the job actor",
		Suite: "./test/settle", Test: "TestMutation_CheckThenActSettle",
		Oracle: "porcupine settlement model + exact counters",
	},
	{
		Switch: registry.PlantedDoubleSlotRelease, Const: "registry.PlantedDoubleSlotRelease",
		What:  "the job actor's termination frees the admission slot the settlement commit already freed",
		Suite: "./test/settle", Test: "TestMutation_DoubleSlotRelease",
		Oracle: "admission probe at quiescence (one start fits, the next is refused)",
	},
	{
		Switch: job.PlantedNoticeBeforeCommit, Const: "job.PlantedNoticeBeforeCommit",
		What:  "the completion is announced from the producer's outcome before the job settles and the registry commits",
		Suite: "./test/notices", Test: "TestMutation_NoticeBeforeCommit",
		Oracle: "settled snapshot and notice vs SPEC's prediction; settled == delivered + claimed",
	},
	{
		Switch: activation.PlantedActivationWithoutClaim, Const: "activation.PlantedActivationWithoutClaim",
		What:  "a followup to a child being materialized resumes it again instead of waiting on the directory's claim",
		Suite: "./test/activation_suites", Test: "TestMutation_ActivationWithoutClaim",
		Oracle: "stale-epoch counter; porcupine directory model (each alone catches it)",
	},
	{
		Switch: activation.PlantedAuthzBySender, Const: "activation.PlantedAuthzBySender",
		What:  "the parent-only check trusts the sender the message claims, not the live incarnation's session",
		Suite: "./test/activation_suites", Test: "TestMutation_AuthzBySender",
		Oracle: "every ordered pair of a generated tree: delivered iff direct parent of record",
	},
	{
		Switch: activation.PlantedFIFOByMapIteration, Const: "activation.PlantedFIFOByMapIteration",
		What:  "the next turn is taken by ranging over a map of pending messages, not from the queue's head",
		Suite: "./test/activation_suites", Test: "TestMutation_FIFOByMapIteration",
		Oracle: "porcupine FIFO model + turn order == acceptance order",
	},
}

// Lookup returns the catalogue's entry for a switch name.
func Lookup(name string) (Bug, bool) {
	for _, b := range Catalogue {
		if b.Switch == name {
			return b, true
		}
	}
	return Bug{}, false
}

// Runs returns how many paired runs a mutation test makes: $TROUPE_MUTATION_RUNS
// if set, else def.
func Runs(t testing.TB, def int) int {
	t.Helper()
	if s := os.Getenv(RunsEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive integer", RunsEnv, s)
		}
		return n
	}
	return def
}

// Suite is one run of a suite's oracle, reporting through tb as the suite's own
// test would. run numbers the paired runs (derive the run's seed from it); planted
// is the switch planted for this run, "" for none — a suite may use it to shorten
// budgets that only a bug can exhaust, never to change what it checks.
type Suite func(tb testing.TB, run int, planted string)

// Result is what Check found.
type Result struct {
	Runs, Caught int
	First        []string // per caught run, the first failure the suite reported
}

// Check is the mutation check of the planted bug switch: for each of runs paired
// runs, suite with nothing planted must pass and suite with the bug planted must
// fail. It fails t otherwise, and logs "caught k of n runs" with the first
// failure of each caught run.
func Check(t testing.TB, switchName string, runs int, suite Suite) Result {
	t.Helper()
	bug, ok := Lookup(switchName)
	if !ok {
		t.Fatalf("planted bug %q is not in the mutation catalogue", switchName)
	}
	res := Result{Runs: runs}
	for i := range runs {
		if clean := Run(t, func(tb testing.TB) { suite(tb, i, "") }); clean.Failed {
			t.Errorf("run %d fails with nothing planted, so a catch would prove nothing:\n%s", i, clean.Report())
			continue
		}
		planted := Run(t, func(tb testing.TB) {
			// Restored by the first cleanup registered, so last: after those of any
			// injector the suite installs inside (fault's rule 5 keeps the bug planted).
			tb.Cleanup(fault.Install(fault.New(uint64(i), fault.Plant(switchName))))
			suite(tb, i, switchName)
		})
		if !planted.Failed {
			t.Errorf("run %d: the suite passed with %q planted (%s): not caught", i, switchName, bug.What)
			continue
		}
		first := "(failed without a message)"
		if len(planted.Failures) > 0 {
			first = firstLine(planted.Failures[0])
		}
		res.Caught++
		res.First = append(res.First, first)
		t.Logf("run %d: %s caught: %s", i, switchName, first)
	}
	t.Logf("mutation %s: caught %d of %d runs by %s (%s)", switchName, res.Caught, res.Runs, bug.Suite, bug.Oracle)
	return res
}

// firstLine condenses a failure to one line: its first line, and its second when
// the first only introduces it (ends with a colon); for testify's report, its
// Error and Messages fields.
func firstLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if strings.HasPrefix(lines[0], "Error Trace:") {
		return testifyLine(lines)
	}
	if len(lines) > 1 && strings.HasSuffix(lines[0], ":") {
		return lines[0] + " " + strings.TrimSpace(lines[1])
	}
	return lines[0]
}

// testifyLine joins the Error (without its diff) and Messages fields of a testify
// report, whose lines are "\tName:   \tvalue" and "\t        \tcontinuation".
func testifyLine(lines []string) string {
	var out []string
	field, diff := "", false
	for _, l := range lines {
		name, value, ok := strings.Cut(strings.TrimPrefix(l, "\t"), "\t")
		if !ok {
			continue
		}
		if name = strings.TrimSuffix(strings.TrimSpace(name), ":"); name != "" {
			field, diff = name, false
		}
		value = strings.Join(strings.Fields(value), " ")
		diff = diff || value == "Diff:"
		if (field == "Error" || field == "Messages") && value != "" && !diff {
			out = append(out, value)
		}
	}
	line := strings.Join(out, " ")
	if len(line) > 240 {
		line = line[:240] + "…"
	}
	return line
}

// Outcome is what one run of a suite body reported.
type Outcome struct {
	Failed   bool
	Skipped  bool
	Failures []string // Error/Fatal messages, in order
}

// Report renders the failures for a log.
func (o Outcome) Report() string { return strings.Join(o.Failures, "\n") }

// Run runs body against a testing.TB that records failures instead of reporting
// them to t: Error and Errorf record; Fatal, Fatalf, FailNow, Skip and SkipNow
// record and end the calling goroutine (as testing.T's do); Cleanup functions run,
// last first, once body has returned. Everything else (Name, Log, Helper,
// TempDir, Context, …) is t's. body runs on a goroutine of its own; Run returns
// after it and its cleanups.
func Run(t testing.TB, body func(tb testing.TB)) Outcome {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		body(r)
	}()
	<-done
	r.runCleanups()
	r.mu.Lock()
	defer r.mu.Unlock()
	return Outcome{Failed: r.failed, Skipped: r.skipped, Failures: append([]string(nil), r.failures...)}
}

// recorder is the testing.TB of a mutation run. Embedding t's TB supplies the
// methods it does not override (and testing.TB's unexported one).
type recorder struct {
	testing.TB

	mu       sync.Mutex
	failed   bool
	skipped  bool
	failures []string
	cleanups []func()
}

func (r *recorder) record(msg string) {
	r.mu.Lock()
	r.failed = true
	if msg != "" {
		r.failures = append(r.failures, msg)
	}
	r.mu.Unlock()
}

func (r *recorder) Fail()                             { r.record("") }
func (r *recorder) Error(args ...any)                 { r.record(strings.TrimSuffix(fmt.Sprintln(args...), "\n")) }
func (r *recorder) Errorf(format string, args ...any) { r.record(fmt.Sprintf(format, args...)) }
func (r *recorder) FailNow()                          { r.record(""); runtime.Goexit() }
func (r *recorder) Fatal(args ...any)                 { r.Error(args...); runtime.Goexit() }
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); runtime.Goexit() }

func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func (r *recorder) SkipNow() {
	r.mu.Lock()
	r.skipped = true
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *recorder) Skip(args ...any)                 { r.Log(args...); r.SkipNow() }
func (r *recorder) Skipf(format string, args ...any) { r.Logf(format, args...); r.SkipNow() }

func (r *recorder) Skipped() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.skipped
}

func (r *recorder) Cleanup(f func()) {
	r.mu.Lock()
	r.cleanups = append(r.cleanups, f)
	r.mu.Unlock()
}

// runCleanups runs the registered cleanups, last first, each on a goroutine of its
// own so that a FailNow in one ends only that one; cleanups registered meanwhile
// run too.
func (r *recorder) runCleanups() {
	for {
		r.mu.Lock()
		n := len(r.cleanups)
		if n == 0 {
			r.mu.Unlock()
			return
		}
		f := r.cleanups[n-1]
		r.cleanups = r.cleanups[:n-1]
		r.mu.Unlock()
		done := make(chan struct{})
		go func() {
			defer close(done)
			f()
		}()
		<-done
	}
}
