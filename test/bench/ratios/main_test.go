package main

import (
	"regexp"
	"strings"
	"testing"

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
