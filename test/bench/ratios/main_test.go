package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const input = `goos: linux
pkg: github.com/troupe-rt/troupe/test/bench
cpu: Test CPU
# go version go1.26.8 linux/amd64
# load before round 1/1: 1.00, 2.00, 3.00
BenchmarkLifecycleUnowned-2   	  100	  12000 ns/op	  2290 B/op	  42 allocs/op
BenchmarkLifecycleUnowned-2   	  100	  10000 ns/op	  2300 B/op	  42 allocs/op
BenchmarkLifecycleUnowned-2   	  100	  11000 ns/op	  2280 B/op	  42 allocs/op
BenchmarkFloorSpawnStop-2     	  100	   5000 ns/op	  1900 B/op	  32 allocs/op
BenchmarkScaleJobs/jobs=1M/impl=troupe-2 	 1	 9 ns/op	 25000 ns/job
BenchmarkScaleJobs/jobs=1M/impl=mutex-2  	 1	 9 ns/op	  5000 ns/job
--- BENCH: BenchmarkSomething
    noise line 1 2 3
ok  	github.com/troupe-rt/troupe/test/bench	1.0s
pkg: github.com/troupe-rt/troupe/tools/subagenttool
BenchmarkForeground/spawn-2   	  100	  36000 ns/op
BenchmarkJobLifecycle-2       	  100	  22000 ns/op
`

func parsed(t *testing.T) *run {
	t.Helper()
	res := &run{samples: map[string]map[string][]float64{}, pkg: map[string]string{}}
	if err := res.parse("in.txt", strings.NewReader(input)); err != nil {
		t.Fatal(err)
	}
	return res
}

func TestParseMediansPackagesNotes(t *testing.T) {
	res := parsed(t)
	if v, ok := res.get("LifecycleUnowned", "ns/op"); !ok || v != 11000 {
		t.Errorf("median ns/op = %v, %v; want 11000", v, ok)
	}
	if n := res.runs("LifecycleUnowned"); n != 3 {
		t.Errorf("runs = %d, want 3", n)
	}
	if v, ok := res.get("ScaleJobs/jobs=1M/impl=troupe", "ns/job"); !ok || v != 25000 {
		t.Errorf("scale ns/job = %v, %v", v, ok)
	}
	if _, ok := res.get("Something", "ns/op"); ok {
		t.Error("a --- BENCH line was parsed as a result")
	}
	if p := res.pkg["Foreground/spawn"]; p != "./tools/subagenttool/" {
		t.Errorf("package of Foreground/spawn = %q", p)
	}
	if p := res.pkg["LifecycleUnowned"]; p != "./test/bench/" {
		t.Errorf("package of LifecycleUnowned = %q", p)
	}
	if res.cpu != "Test CPU" || len(res.notes) != 1 || len(res.notes[0].lines) != 2 {
		t.Errorf("cpu %q, notes %+v", res.cpu, res.notes)
	}
}

// matches reports whether go test's -bench pattern selects name: every level of
// the pattern (split at '/') matches the corresponding level of the full name, and
// a name with fewer levels than the pattern is selected too.
func matches(t *testing.T, pattern, name string) bool {
	t.Helper()
	levels := strings.Split(pattern, "/")
	parts := strings.Split("Benchmark"+name, "/")
	for i, part := range parts {
		if i >= len(levels) {
			break
		}
		if !regexp.MustCompile(levels[i]).MatchString(part) {
			return false
		}
	}
	return true
}

func TestBenchPatternSelectsExactlyItsNames(t *testing.T) {
	for _, tc := range []struct {
		names, others []string
		want          string
	}{
		{[]string{"LifecycleUnowned", "FloorSpawnStop"}, []string{"LifecycleUnownedHistory100k", "LifecycleOwned"},
			`^Benchmark(LifecycleUnowned|FloorSpawnStop)$`},
		{[]string{"Foreground/spawn", "JobLifecycle"}, []string{"Foreground/scripted-provider", "Background"},
			`^Benchmark(Foreground|JobLifecycle)$/^spawn$`},
		{[]string{"ScaleSessions/sync=off/sessions=1M/impl=store", "ScaleSessions/sync=off/sessions=1M/impl=raw"},
			[]string{"ScaleSessions/sync=on/sessions=1M/impl=store", "ScaleSessions/sync=off/sessions=1k/impl=store",
				"ScaleSessions/sync=off/sessions=1M/impl=raw-batch"},
			`^BenchmarkScaleSessions$/^sync=off$/^sessions=1M$/^(impl=store|impl=raw)$`},
	} {
		got := benchPattern(tc.names...)
		if got != tc.want {
			t.Errorf("benchPattern(%q) = %s, want %s", tc.names, got, tc.want)
		}
		for _, n := range tc.names {
			if !matches(t, got, n) {
				t.Errorf("%s does not select %s", got, n)
			}
		}
		for _, n := range tc.others {
			if matches(t, got, n) {
				t.Errorf("%s also selects %s", got, n)
			}
		}
	}
}

func TestCommandCarriesPackageCountAndScaleSettings(t *testing.T) {
	res := parsed(t)
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{[]string{"LifecycleUnowned", "FloorSpawnStop"},
			`go test -run '^$' -bench '^Benchmark(LifecycleUnowned|FloorSpawnStop)$' -benchmem -count 3 ./test/bench/`},
		{[]string{"ScaleJobs/jobs=1M/impl=troupe", "ScaleJobs/jobs=1M/impl=mutex"},
			`TROUPE_BENCH_SCALE=1 go test -run '^$' -bench '^BenchmarkScaleJobs$/^jobs=1M$/^(impl=troupe|impl=mutex)$' -benchmem -benchtime 1x -count 1 ./test/bench/`},
		{[]string{"Foreground/spawn", "JobLifecycle"},
			`go test -run '^$' -bench '^Benchmark(Foreground|JobLifecycle)$/^spawn$' -benchmem -count 1 ./tools/subagenttool/`},
		{[]string{"Foreground/spawn", "FloorSpawnStop"},
			`go test -run '^$' -bench '^BenchmarkForeground$/^spawn$' -benchmem -count 1 ./tools/subagenttool/; ` +
				`go test -run '^$' -bench '^BenchmarkFloorSpawnStop$' -benchmem -count 1 ./test/bench/`},
	} {
		if got := res.command(tc.names...); got != tc.want {
			t.Errorf("command(%q)\n got %s\nwant %s", tc.names, got, tc.want)
		}
	}
}

func TestValueFormatsDurations(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		unit string
		want string
	}{
		{950, "ns/job", "950 ns"},
		{25000, "cpu-ns/job", "25.00 µs"},
		{1.5e6, "ns/open+load", "1.50 ms"},
		{1.15e9, "ns/ids", "1.15 s"},
		{4195, "file-B/session", "4195"},
		{0.5, "goroutines/activation", "0.5"},
	} {
		if got := value(tc.v, tc.unit); got != tc.want {
			t.Errorf("value(%v, %s) = %q, want %q", tc.v, tc.unit, got, tc.want)
		}
	}
}

// acceptance lists every figure issue 15's acceptance gives a target, as the
// rows must carry it: benchmark (and baseline) names, units and the bound.
var acceptance = []struct {
	num, unit, base, baseUnit string // base "" for an absolute figure
	t                         target
}{
	{"LifecyclePipelined", "ns/op", "MutexRegistryPipelined", "ns/op", atMost(4)},
	{"LifecycleUnowned", "ns/op", "FloorSpawnStop", "ns/op", atMost(2)},
	{"Read", "ns/op", "FloorRequestResponse", "ns/op", atMost(0.15)},
	{"KillToSettled", "ns/op", "FloorRequestResponse", "ns/op", atMost(1.5)},
	{"KillToSettled", "p99-ns", "KillToSettled", "ns/op", atMost(3)},
	{"MemoryLiveIdleJob", "B/job", "", "", atMost(1024)},
	{"MemoryLiveIdleJobOnSettle", "B/job", "", "", atMost(1024)},
	{"MemorySettledRecord", "B/record", "", "", atMost(256)},
	{"MemorySettledNoticedRecord", "B/record", "", "", atMost(256)},
	{"MemoryIdleActivation", "B/activation", "", "", atMost(2048)},
	{"ContinuableColdRestore10Turns", "ns/op", "", "", atMost(1e6)},
	{"ContinuableColdRestore10kTurns", "ns/op", "", "", atMost(20e6)},
	{"ContinuableColdRestore10kTurns", "ns/op", "ContinuableColdRestore10Turns", "ns/op", atMost(1.5)},
	{"ContinuableFollowupThroughput", "ns/op", "FloorRequestResponse", "ns/op", atMost(2)},
	{"ShellThroughput", "MB/s", "PipeBaseline", "MB/s", atLeast(0.8)},
	{"NoticeLatency", "ns/notice", "JobtoolsFloorRequestResponse", "ns/op", atMost(2)},
	// the side-by-side file's rows of the same figures
	{"SideBySide_HundredOwnersEightInFlight", "ns/op", "SideBySide_HundredOwnersEightInFlightMutex", "ns/op", atMost(4)},
	{"SideBySide_ReadStreamJob", "ns/op", "SideBySide_RequestResponse", "ns/op", atMost(0.15)},
	{"SideBySide_KillToSettled", "mean-ns", "SideBySide_RequestResponse", "ns/op", atMost(1.5)},
	{"SideBySide_KillToSettled", "p99-ns", "SideBySide_KillToSettled", "mean-ns", atMost(3)},
	{"SideBySide_LiveIdleJob", "B/job", "", "", atMost(1024)},
}

func TestEveryAcceptanceFigureHasItsTarget(t *testing.T) {
	for _, a := range acceptance {
		found := false
		if a.base == "" {
			for _, r := range slices.Concat(absolutes, otherAbsolutes) {
				found = found || (r.name == a.num && r.unit == a.unit && r.t == a.t)
			}
		} else {
			for _, r := range slices.Concat(ratios, otherRatios) {
				found = found || (r.num == a.num && r.unit == a.unit && r.base == a.base && r.bu() == a.baseUnit && r.t == a.t)
			}
		}
		if !found {
			t.Errorf("no row %s %s / %s %s with target %+v", a.num, a.unit, a.base, a.baseUnit, a.t)
		}
	}
}

func TestTargetVerdictsAndTexts(t *testing.T) {
	for _, tc := range []struct {
		t          target
		v          float64
		unit, want string
		text       string
	}{
		{atMost(4), 4, "×", "met", "≤ 4.00×"},
		{atMost(4), 4.01, "×", "MISSED", "≤ 4.00×"},
		{atLeast(0.8), 0.8, "×", "met", "≥ 0.8×"},
		{atLeast(0.8), 0.45, "×", "MISSED", "≥ 0.8×"},
		{atMost(1e6), 2.6e6, "ns/op", "MISSED", "≤ 1.00 ms"},
		{atMost(1024), 1409, "B/job", "MISSED", "≤ 1024 B/job"},
		{info, 1e9, "ns/op", "info", "—"},
	} {
		if got := tc.t.verdict(tc.v); got != tc.want {
			t.Errorf("%+v.verdict(%v) = %s, want %s", tc.t, tc.v, got, tc.want)
		}
		if got := tc.t.text(tc.unit); got != tc.text {
			t.Errorf("%+v.text(%s) = %q, want %q", tc.t, tc.unit, got, tc.text)
		}
	}
}

// report runs print on res and returns what it printed and whether it found a
// target missed or absent.
func report(t *testing.T, print func() bool) (string, bool) {
	t.Helper()
	var b strings.Builder
	out = &b
	t.Cleanup(func() { out = os.Stdout })
	bad := print()
	return b.String(), bad
}

// line returns the report's table row that starts with "| label |".
func line(t *testing.T, report, label string) string {
	t.Helper()
	for _, l := range strings.Split(report, "\n") {
		if strings.HasPrefix(l, "| "+label+" |") {
			return l
		}
	}
	t.Fatalf("no row %q in:\n%s", label, report)
	return ""
}

const acceptanceInput = `pkg: github.com/troupe-rt/troupe/test/bench
BenchmarkKillToSettled-2        1000  20000 ns/op  61000 p99-ns
BenchmarkKillToSettled-2        1000  22000 ns/op  70000 p99-ns
BenchmarkKillToSettled-2        1000  18000 ns/op  52000 p99-ns
BenchmarkFloorRequestResponse-2 1000  10000 ns/op
BenchmarkMemoryLiveIdleJob-2       1  1 ns/op  1000 B/job
pkg: github.com/troupe-rt/troupe/producers/process
BenchmarkShellThroughput-2  8  130000000 ns/op  480.00 MB/s
BenchmarkShellThroughput-2  8  130000000 ns/op  520.00 MB/s
BenchmarkPipeBaseline-2     8   35000000 ns/op 2000.00 MB/s
BenchmarkPipeBaseline-2     8   35000000 ns/op 1000.00 MB/s
`

func TestPlainReportGivesEveryTargetAVerdict(t *testing.T) {
	res := &run{samples: map[string]map[string][]float64{}, pkg: map[string]string{}}
	require.NoError(t, res.parse("in.txt", strings.NewReader(acceptanceInput)))
	rep, bad := report(t, res.printPlain)
	require.True(t, bad, "targets missed or absent")
	// kill: 20 µs / 10 µs = 2× > 1.5×; p99 61 µs / 20 µs = 3.05× > 3×.
	require.Contains(t, line(t, rep, "kill→settled / floor request-response"), "| 2.00× | ≤ 1.50× | MISSED |")
	require.Contains(t, line(t, rep, "kill→settled p99 / its mean"), "| 3.05× | ≤ 3.00× | MISSED |")
	require.Contains(t, line(t, rep, "memory per live idle job beyond its producer (Done-channel producer)"), "| 1000 B/job | ≤ 1024 B/job | met |")
	// shell: medians 500 / 1500 MB/s = 0.33×; fastest 520 / 2000 = 0.26×.
	require.Contains(t, line(t, rep, "shell stream throughput / pipe to io.Discard"), "| 0.33× | ≥ 0.8× | MISSED | 0.26× |")
	// a figure with a target absent from the input is listed, not measured; one
	// without a target is left out for another package.
	require.Contains(t, line(t, rep, "notice latency, settle → owner's surface / floor request-response (same package)"), "not measured")
	require.Contains(t, line(t, rep, "sequential lifecycle unowned / floor spawn+stop"), "not measured")
	require.NotContains(t, rep, "| shell start → first output / os/exec |")
}

// atBounds measures every figure with a target exactly at its bound.
const atBounds = `BenchmarkFloorRequestResponse-2 1 10000 ns/op
BenchmarkRead-2 1 1500 ns/op
BenchmarkReadAmong100k-2 1 1500 ns/op
BenchmarkLifecyclePipelined-2 1 4000 ns/op
BenchmarkMutexRegistryPipelined-2 1 1000 ns/op
BenchmarkSideBySide_HundredOwnersEightInFlight-2 1 4000 ns/op
BenchmarkSideBySide_HundredOwnersEightInFlightMutex-2 1 1000 ns/op
BenchmarkSideBySide_ReadStreamJob-2 1 1500 ns/op
BenchmarkSideBySide_RequestResponse-2 1 10000 ns/op
BenchmarkLifecycleUnowned-2 1 2000 ns/op
BenchmarkLifecycleOwned-2 1 2000 ns/op
BenchmarkFloorSpawnStop-2 1 1000 ns/op
BenchmarkLifecycleUnownedHistory100k-2 1 3000 ns/op
BenchmarkLifecycleOwnedHistory100k-2 1 3000 ns/op
BenchmarkListOwner10-2 1 1000 ns/op
BenchmarkListOwner10Among100k-2 1 1500 ns/op
BenchmarkKillToSettled-2 1 15000 ns/op 45000 p99-ns
BenchmarkSideBySide_KillToSettled-2 1 20000 ns/op 15000 mean-ns 45000 p99-ns
BenchmarkContinuableFollowupThroughput-2 1 20000 ns/op
BenchmarkContinuableColdRestore10Turns-2 1 1000000 ns/op
BenchmarkContinuableColdRestore10kTurns-2 1 1500000 ns/op
BenchmarkMemorySettledRecord-2 1 1 ns/op 256 B/record
BenchmarkMemorySettledNoticedRecord-2 1 1 ns/op 256 B/record
BenchmarkMemoryLiveIdleJob-2 1 1 ns/op 1024 B/job
BenchmarkMemoryLiveIdleJobOnSettle-2 1 1 ns/op 1024 B/job
BenchmarkSideBySide_LiveIdleJob-2 1 1 ns/op 1024 B/job
BenchmarkMemoryIdleActivation-2 1 1 ns/op 2048 B/activation
pkg: github.com/troupe-rt/troupe/producers/process
BenchmarkShellThroughput-2 1 1 ns/op 800 MB/s
BenchmarkPipeBaseline-2 1 1 ns/op 1000 MB/s
pkg: github.com/troupe-rt/troupe/tools/jobtools
BenchmarkNoticeLatency-2 1 1 ns/op 20000 ns/notice
BenchmarkJobtoolsFloorRequestResponse-2 1 10000 ns/op
`

func TestStrictPassesOnlyWhenEveryTargetIsMet(t *testing.T) {
	parse := func(in string) *run {
		res := &run{samples: map[string]map[string][]float64{}, pkg: map[string]string{}}
		require.NoError(t, res.parse("in.txt", strings.NewReader(in)))
		return res
	}
	res := parse(atBounds)
	for name, print := range map[string]func() bool{
		"plain":    res.printPlain,
		"markdown": func() bool { return res.printMarkdown([]string{"in.txt"}) },
	} {
		rep, bad := report(t, print)
		require.False(t, bad, "%s: every target met and measured:\n%s", name, rep)
		require.NotContains(t, rep, "MISSED", name)
		require.NotRegexp(t, `\| [≤≥][^|]*\| not measured`, rep, "%s: a figure with a target is absent", name)
	}
	// one figure past its bound, or one absent, and the report is bad
	for _, tc := range []struct{ old, new string }{
		{"800 MB/s", "799 MB/s"},
		{"45000 p99-ns\nBenchmarkSideBySide", "45001 p99-ns\nBenchmarkSideBySide"},
		{"1500000 ns/op", "1600000 ns/op"},
		{"256 B/record", "257 B/record"},
		{"BenchmarkJobtoolsFloorRequestResponse", "BenchmarkSomethingElse"},
	} {
		require.Contains(t, atBounds, tc.old)
		_, bad := report(t, parse(strings.Replace(atBounds, tc.old, tc.new, 1)).printPlain)
		require.True(t, bad, "%s → %s", tc.old, tc.new)
	}
}

func TestMarkdownRowsCarryTargetVerdictAndCommand(t *testing.T) {
	res := &run{samples: map[string]map[string][]float64{}, pkg: map[string]string{}}
	require.NoError(t, res.parse("in.txt", strings.NewReader(acceptanceInput)))
	rep, bad := report(t, func() bool { return res.printMarkdown([]string{"in.txt"}) })
	require.True(t, bad)
	require.Contains(t, rep, "Generated by `go run ./test/bench/ratios -markdown in.txt`")
	require.Contains(t, line(t, rep, "kill→settled p99 / its mean"),
		"| 61.00 µs (p99-ns) | 20.00 µs (ns/op) | 3.05× | ≤ 3.00× | MISSED | `go test -run '^$' -bench '^BenchmarkKillToSettled$' -benchmem -count 3 ./test/bench/` |")
	require.Contains(t, line(t, rep, "shell stream throughput / pipe to io.Discard"),
		"| 500 MB/s | 1500 MB/s | 0.33× | ≥ 0.8× | MISSED | `go test -run '^$' -bench '^Benchmark(ShellThroughput\\|PipeBaseline)$' -benchmem -count 2 ./producers/process/` |")
	require.Contains(t, rep, "Not measured in this input: ")
	require.Contains(t, rep, "notice latency, settle → owner's surface / floor request-response (same package)")
}
