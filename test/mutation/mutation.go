package mutation

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// RunsEnv overrides every mutation test's number of paired runs.
const RunsEnv = "TROUPE_MUTATION_RUNS"

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
// test would, its oracles' violations through Oracle.TB or Errorf. run numbers
// the paired runs (derive the run's seed from it); planted is the switch planted
// for this run, "" for none: a suite may plant it in an injector of its own, never
// change what it checks or its budgets (a planted run waits as long as a clean one).
type Suite func(tb testing.TB, run int, planted string)

// Oracle names one of a suite's oracles: a check whose violation shows a bug. A
// timeout, a setup error or a leak is not an oracle's violation: the suite reports
// those with tb's own methods, and a planted run that fails only by them is not a
// catch.
type Oracle string

// The named oracles of the suites that catch the catalogue's bugs.
const (
	SettleModel      Oracle = "settle: porcupine settlement model"
	SettleCommits    Oracle = "settle: one settlement commit per settled job"
	SettleAnnounce   Oracle = "settle: onJobDone once, agreeing with the settlement"
	SettleReplies    Oracle = "settle: replies after settlement agree with it"
	SettleAdmission  Oracle = "settle: admission probe at quiescence"
	NoticesSettled   Oracle = "notices: settled snapshot vs SPEC's prediction"
	NoticesDelivered Oracle = "notices: each notice vs SPEC's prediction, after the commit"
	NoticesAccount   Oracle = "notices: settled == delivered + claimed"
	StaleEpoch       Oracle = "activation: stale-epoch counter"
	LiveGauge        Oracle = "activation: live activations <= sessions"
	DirectoryModel   Oracle = "activation: porcupine directory model"
	AuthzPairs       Oracle = "authz: delivered iff the direct parent of record sent it"
	TurnOrder        Oracle = "fifo: turn order == acceptance order"
	FIFOModel        Oracle = "fifo: porcupine FIFO model"
	// The multi-process cluster suite's (cluster.TestClusterFailover).
	ClusterReach         Oracle = "cluster: every child of a dead node reachable within 2 s"
	ClusterOneActivation Oracle = "cluster: one live Activation per session (unique epochs, epoch gauge, serial log)"
	ClusterNoLoss        Oracle = "cluster: no acknowledged message lost"
	ClusterOnce          Oracle = "cluster: each message accepted once"
	ClusterFIFO          Oracle = "cluster: porcupine FIFO model"
)

// TB returns tb for o's checks: a failure reported through it (Error, Errorf,
// Fatal, Fatalf, Fail, FailNow, hence any testify assertion) is prefixed
// "oracle <o>: " and, under Run, recorded as o firing (Outcome.Fired).
func (o Oracle) TB(tb testing.TB) testing.TB { return oracleTB{TB: tb, o: o} }

// Errorf reports a violation of every oracle in fired on tb (none: a plain
// failure), as one failure.
func Errorf(tb testing.TB, fired []Oracle, format string, args ...any) {
	tb.Helper()
	if len(fired) == 0 {
		tb.Errorf(format, args...)
		return
	}
	names := make([]string, len(fired))
	for i, o := range fired {
		names[i] = string(o)
	}
	msg := fmt.Sprintf(format, args...)
	for _, o := range fired {
		fire(tb, o, msg)
	}
	tb.Errorf("oracle %s: %s", strings.Join(names, "; "), msg)
}

// oracleTB is Oracle.TB's testing.TB.
type oracleTB struct {
	testing.TB
	o Oracle
}

func (w oracleTB) report(msg string) {
	fire(w.TB, w.o, msg)
	w.TB.Errorf("oracle %s: %s", w.o, msg)
}

func (w oracleTB) Errorf(format string, args ...any) {
	w.TB.Helper()
	w.report(fmt.Sprintf(format, args...))
}

func (w oracleTB) Error(args ...any) {
	w.TB.Helper()
	w.report(strings.TrimSuffix(fmt.Sprintln(args...), "\n"))
}

func (w oracleTB) Fatalf(format string, args ...any) {
	w.TB.Helper()
	w.report(fmt.Sprintf(format, args...))
	w.TB.FailNow()
}

func (w oracleTB) Fatal(args ...any) {
	w.TB.Helper()
	w.report(strings.TrimSuffix(fmt.Sprintln(args...), "\n"))
	w.TB.FailNow()
}

func (w oracleTB) Fail() {
	fire(w.TB, w.o, "")
	w.TB.Fail()
}

func (w oracleTB) FailNow() {
	fire(w.TB, w.o, "")
	w.TB.FailNow()
}

// fire records o firing with msg on the recorder under tb, if tb is one (or an
// oracle's TB over one).
func fire(tb testing.TB, o Oracle, msg string) {
	for {
		switch x := tb.(type) {
		case *recorder:
			x.fire(o, msg)
			return
		case oracleTB:
			tb = x.TB
		default:
			return
		}
	}
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
	Fired    []Firing // the named oracles' violations, in order
}

// Firing is one violation of a named oracle: its message (without the "oracle
// <name>: " prefix of the failure), "" if it failed without one.
type Firing struct {
	Oracle Oracle
	Msg    string
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
	return Outcome{Failed: r.failed, Skipped: r.skipped, Failures: append([]string(nil), r.failures...),
		Fired: append([]Firing(nil), r.fired...)}
}

// recorder is the testing.TB of a mutation run. Embedding t's TB supplies the
// methods it does not override (and testing.TB's unexported one).
type recorder struct {
	testing.TB

	mu       sync.Mutex
	failed   bool
	skipped  bool
	failures []string
	fired    []Firing
	cleanups []func()
}

func (r *recorder) fire(o Oracle, msg string) {
	r.mu.Lock()
	r.fired = append(r.fired, Firing{Oracle: o, Msg: msg})
	r.mu.Unlock()
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
