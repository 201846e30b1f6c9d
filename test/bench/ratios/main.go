// Command ratios reads raw `go test -bench` output (several -count runs,
// benchstat-compatible; one or more files, whose samples are merged), takes the
// median of every figure, and prints each troupe figure as a ratio to its baseline
// measured in the same run, the memory figures against the targets, and the
// scale curves (one row per size, each against its baseline at that size).
//
//	go run ./test/bench/ratios [-strict] [-markdown] bench.txt [more.txt …]
//
// With -strict it exits 1 when a target is missed or a figure with a target is
// absent. With -markdown it prints the README's performance tables instead: every
// measured row with its value, baseline, ratio, target, verdict and the exact
// command that reproduces it (package, -bench pattern, -count of the input).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// module is the import path prefix stripped from "pkg:" lines to name packages
// in commands (./producers/process/).
const module = "github.com/troupe-rt/troupe/"

// out is where the reports are printed (tests capture it).
var out io.Writer = os.Stdout

// benchPkg is where a benchmark without a "pkg:" line is assumed to live.
const benchPkg = "./test/bench/"

// scaleEnv is the variable that enables test/bench's scale benchmarks.
const scaleEnv = "TROUPE_BENCH_SCALE"

// run is what the input files hold: samples per benchmark and unit, each
// benchmark's package, and the machine notes.
type run struct {
	samples map[string]map[string][]float64 // name (no -GOMAXPROCS suffix) → unit → values
	pkg     map[string]string               // name → "./path/"
	cpu     string
	notes   []fileNotes
}

// fileNotes are the "# go version …" and "# load …" lines run.sh wrote into one
// input file.
type fileNotes struct {
	file  string
	lines []string
}

var procsSuffix = regexp.MustCompile(`-\d+$`)

// parse adds the benchmark result lines ("BenchmarkX-2  N  v1 unit1  v2 unit2 …")
// of file, read from r, to res, with the package of the "pkg:" line before them.
func (res *run) parse(file string, r io.Reader) error {
	pkg := benchPkg
	notes := fileNotes{file: file}
	defer func() { res.notes = append(res.notes, notes) }()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "pkg: "):
			pkg = "./" + strings.TrimPrefix(strings.TrimSpace(strings.TrimPrefix(line, "pkg: ")), module) + "/"
			continue
		case strings.HasPrefix(line, "cpu: "):
			res.cpu = strings.TrimSpace(strings.TrimPrefix(line, "cpu: "))
			continue
		case strings.HasPrefix(line, "# go version") || strings.HasPrefix(line, "# load"):
			notes.lines = append(notes.lines, strings.TrimPrefix(line, "# "))
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
			continue
		}
		name := procsSuffix.ReplaceAllString(strings.TrimPrefix(f[0], "Benchmark"), "")
		if res.samples[name] == nil {
			res.samples[name] = map[string][]float64{}
		}
		res.pkg[name] = pkg
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			res.samples[name][f[i+1]] = append(res.samples[name][f[i+1]], v)
		}
	}
	return sc.Err()
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// get returns the median of name's unit and whether it was measured.
func (res *run) get(name, unit string) (float64, bool) {
	v := res.samples[name][unit]
	if len(v) == 0 {
		return 0, false
	}
	return median(v), true
}

// runs is how many samples of name there are (its -count over all inputs).
func (res *run) runs(name string) int {
	n := 0
	for _, v := range res.samples[name] {
		n = max(n, len(v))
	}
	return n
}

// target is a figure's acceptance bound: at most max, or at least min (both 0:
// informational, no verdict).
type target struct{ max, min float64 }

// atMost and atLeast make targets.
func atMost(v float64) target  { return target{max: v} }
func atLeast(v float64) target { return target{min: v} }

var info target

func (t target) set() bool { return t.max > 0 || t.min > 0 }

// verdict is "met" or "MISSED" for v against t ("info" when t is not set).
func (t target) verdict(v float64) string {
	switch {
	case !t.set():
		return "info"
	case t.max > 0 && v > t.max, t.min > 0 && v < t.min:
		return "MISSED"
	default:
		return "met"
	}
}

// text renders t for a value in unit ("×" for ratios): "≤ 4×", "≥ 0.8×",
// "≤ 1.00 ms", "≤ 1024 B/job", "—".
func (t target) text(unit string) string {
	op, v := "≤ ", t.max
	if t.min > 0 {
		op, v = "≥ ", t.min
	}
	switch {
	case !t.set():
		return "—"
	case unit == "×":
		return op + num(v) + "×"
	case isDuration(unit):
		return op + value(v, unit)
	default:
		return op + num(v) + " " + unit
	}
}

// ratio is one row: num's numUnit divided by base's baseUnit ("" = numUnit),
// against t.
type ratio struct {
	label, num, base, unit string
	t                      target
	baseUnit               string
}

// bu is the unit of r's baseline.
func (r ratio) bu() string {
	if r.baseUnit != "" {
		return r.baseUnit
	}
	return r.unit
}

// ratios are test/bench's own rows: always printed, "not measured" when absent.
// Every acceptance figure of issue 15 that is a ratio has its target here (or in
// otherRatios), measured against a baseline of the same run.
var ratios = []ratio{
	// issue 15: pipelined lifecycle (100 owners × 8 in flight) ≤ 4× the mutex-map registry.
	{"pipelined lifecycle (100 owners × 8 in flight) / mutex-map registry, same shape", "LifecyclePipelined", "MutexRegistryPipelined", "ns/op", atMost(4), ""},
	{"  (side-by-side file) 100 owners × 8 in flight / its mutex-map twin", "SideBySide_HundredOwnersEightInFlight", "SideBySide_HundredOwnersEightInFlightMutex", "ns/op", atMost(4), ""},
	// issue 15: sequential lifecycle ≤ 2× protoactor spawn+stop.
	{"sequential lifecycle unowned / floor spawn+stop", "LifecycleUnowned", "FloorSpawnStop", "ns/op", atMost(2), ""},
	{"sequential lifecycle owned / floor spawn+stop", "LifecycleOwned", "FloorSpawnStop", "ns/op", atMost(2), ""},
	{"lifecycle unowned / mutex registry", "LifecycleUnowned", "MutexRegistry", "ns/op", info, ""},
	{"lifecycle owned / mutex registry", "LifecycleOwned", "MutexRegistry", "ns/op", info, ""},
	{"lifecycle unowned, 100k history / empty", "LifecycleUnownedHistory100k", "LifecycleUnowned", "ns/op", atMost(1.5), ""},
	{"lifecycle owned, 100k history / empty", "LifecycleOwnedHistory100k", "LifecycleOwned", "ns/op", atMost(1.5), ""},
	{"list owner's 10 among 100k / list baseline", "ListOwner10Among100k", "ListOwner10", "ns/op", atMost(1.5), ""},
	// issue 15: read ≤ 0.15× the request/response floor.
	{"read of a stream job / floor request-response", "Read", "FloorRequestResponse", "ns/op", atMost(0.15), ""},
	{"  (side-by-side file) read of a stream job / request-response", "SideBySide_ReadStreamJob", "SideBySide_RequestResponse", "ns/op", atMost(0.15), ""},
	{"read among 100k / read", "ReadAmong100k", "Read", "ns/op", atMost(1.5), ""},
	// issue 15: kill→settled ≤ 1.5× request/response, p99 ≤ 3× its mean.
	{"kill→settled / floor request-response", "KillToSettled", "FloorRequestResponse", "ns/op", atMost(1.5), ""},
	{"kill→settled p99 / its mean", "KillToSettled", "KillToSettled", "p99-ns", atMost(3), "ns/op"},
	{"  (side-by-side file) kill→settled mean / request-response", "SideBySide_KillToSettled", "SideBySide_RequestResponse", "mean-ns", atMost(1.5), "ns/op"},
	{"  (side-by-side file) kill→settled p99 / its mean", "SideBySide_KillToSettled", "SideBySide_KillToSettled", "p99-ns", atMost(3), "mean-ns"},
	{"kill→settled goroutine runs per op / floor request-response's (runs/op: wake-ups, load-independent)", "KillToSettled", "FloorRequestResponse", "runs/op", info, ""},
	{"kill→settled, Cancel declared non-blocking / on a runner goroutine", "KillToSettled", "KillToSettledRunner", "ns/op", info, ""},
	{"  (same, goroutine runs per op)", "KillToSettled", "KillToSettledRunner", "runs/op", info, ""},
	{"lifecycle unowned / floor spawn+stop (B/op)", "LifecycleUnowned", "FloorSpawnStop", "B/op", info, ""},
	{"lifecycle unowned / floor spawn+stop (allocs/op)", "LifecycleUnowned", "FloorSpawnStop", "allocs/op", info, ""},
	// issue 15: followups through one resident activation ≥ 50% of the request/response
	// floor, i.e. a followup's share of the back-to-back throughput run (ns/op) ≤ 2× a
	// round trip (the floor's ops/s ÷ followups/s ≤ 2).
	{"followups through one resident activation: time per followup (throughput run) / floor request-response (≤ 2× ⇔ ≥ 50% of its rate)", "ContinuableFollowupThroughput", "FloorRequestResponse", "ns/op", atMost(2), ""},
	{"continuable followup→turn start (resident) / floor request-response", "ContinuableFollowupToTurnStart", "FloorRequestResponse", "ns/op", info, ""},
	{"continuable followup→turn start, 10k-turn history / short history", "ContinuableFollowupToTurnStartHistory10k", "ContinuableFollowupToTurnStart", "ns/op", info, ""},
	{"continuable cold restore (bbolt), 10 turns / floor request-response", "ContinuableColdRestore10Turns", "FloorRequestResponse", "ns/op", info, ""},
	{"continuable cold restore (bbolt), 10 turns / one synced bbolt commit alone (the disk's share: ResumeAccept's commit)", "ContinuableColdRestore10Turns", "FloorBoltCommit", "ns/op", info, ""},
	// issue 15: cold restore, ≤ 1.5× between 10 and 10,000 turns ("the real goal").
	{"continuable cold restore (bbolt), 10k turns / 10 turns", "ContinuableColdRestore10kTurns", "ContinuableColdRestore10Turns", "ns/op", atMost(1.5), ""},
}

// otherRatios are the rows of the other packages' benchmarks (run.sh PKGS=1),
// each against the baseline in its own package: the rows with a target are always
// printed ("not measured" when absent), the others only when measured.
var otherRatios = []ratio{
	// issue 15: shell stream throughput ≥ 0.8× a raw pipe to io.Discard.
	{"shell stream throughput / pipe to io.Discard", "ShellThroughput", "PipeBaseline", "MB/s", atLeast(0.8), ""},
	// issue 15: notice latency settle → owner's surface ≤ 2× request/response.
	{"notice latency, settle → owner's surface / floor request-response (same package)", "NoticeLatency", "JobtoolsFloorRequestResponse", "ns/notice", atMost(2), "ns/op"},
	{"  (shell stream CPU time, process + command, per 64 MiB / pipe's)", "ShellThroughput", "PipeBaseline", "cpu-ns/op", info, ""},
	{"shell start → first output / os/exec", "ShellStartToFirstOutput", "ExecStartToOutput", "ns/op", info, ""},
	{"shell kill → settled (SIGTERM obeyed) / os/exec SIGTERM + Wait", "ShellKillToSettled", "ExecKillToExit", "ns/op", info, ""},
	{"job_output on a stream job / raw registry read", "JobOutputStream", "RawRead", "ns/op", info, ""},
	{"foreground delegation (spawn) / bare job lifecycle", "Foreground/spawn", "JobLifecycle", "ns/op", info, ""},
	{"foreground delegation (scripted provider) / bare job lifecycle", "Foreground/scripted-provider", "JobLifecycle", "ns/op", info, ""},
	{"background delegation start → collect / bare job lifecycle", "Background", "JobLifecycle", "ns/op", info, ""},
}

// absolute is one row compared with a fixed bound.
type absolute struct {
	label, name, unit string
	t                 target
}

// absolutes are test/bench's own absolute rows: always printed.
var absolutes = []absolute{
	// issue 15: settled owned record with notices ≤ 256 B (the jobs' owners are
	// registered agents, so every settlement is a notice to its owner).
	{"registry memory per settled owned record whose notice was delivered", "MemorySettledNoticedRecord", "B/record", atMost(256)},
	{"registry memory per settled owned record (no job tools mounted)", "MemorySettledRecord", "B/record", atMost(256)},
	{"  (same, incl. protoactor's one-off process-registry growth)", "MemorySettledRecord", "B/record-cold", info},
	// issue 15: live idle job ≤ 1,024 B.
	{"memory per live idle job beyond its producer (OnSettle producer, as troupe's own)", "MemoryLiveIdleJobOnSettle", "B/job", atMost(1024)},
	{"memory per live idle job beyond its producer (Done-channel producer)", "MemoryLiveIdleJob", "B/job", atMost(1024)},
	{"  (whole delta per live job, producer included)", "MemoryLiveIdleJob", "B/job-raw", info},
	{"  (producer's Done channel, subtracted)", "MemoryLiveIdleJob", "B/producer", info},
	{"  (of which goroutine stacks: watcher shards)", "MemoryLiveIdleJob", "B/job-stack", info},
	{"  (goroutines per live job: watcher shards)", "MemoryLiveIdleJob", "goroutines/job", info},
	{"  (side-by-side file) live idle job", "SideBySide_LiveIdleJob", "B/job", atMost(1024)},
	{"  (side-by-side file) floor: idle trivial protoactor actor", "SideBySide_LiveIdleJob", "B/bare-actor", info},
	// issue 15: idle resident activation ≤ 2 KiB.
	{"memory per idle resident continuable activation", "MemoryIdleActivation", "B/activation", atMost(2048)},
	{"  (goroutines per idle resident activation)", "MemoryIdleActivation", "goroutines/activation", info},
	// issue 15: cold restore, 10 turns ≤ 1 ms; 10,000 turns ≤ 20 ms.
	{"continuable cold restore (bbolt), 10 turns", "ContinuableColdRestore10Turns", "ns/op", atMost(1e6)},
	{"continuable cold restore (bbolt), 10k turns", "ContinuableColdRestore10kTurns", "ns/op", atMost(20e6)},
	{"followups/s through one resident activation", "ContinuableFollowupThroughput", "followups/s", info},
	{"(side-by-side file) 10 jobs live, each settlement starting the next, per job", "SideBySide_TenLiveChained", "ns/op", info},
}

// otherAbsolutes are the other packages' absolute rows: printed only when measured.
var otherAbsolutes = []absolute{
	{"notice latency, settle → owner's surface", "NoticeLatency", "ns/notice", info},
	{"peak heap of a shell job writing 1 GiB nobody reads", "MemoryOfGiBOutputJob", "peak-heap-MiB", info},
	{"one /proc scan for a job's processes", "TreeScan", "ns/op", info},
}

// curve is a scale curve: one figure of the implementation under test at several
// sizes, each against its baselines at the same size.
type curve struct {
	title   string
	pattern string // benchmark name with the size and the implementation as %s: "ScaleJobs/jobs=%s/impl=%s"
	sizes   []string
	unit    string
	num     string   // the implementation under test ("troupe", "store")
	bases   []string // its baselines; the ratio column divides by each
	labels  []string // how the table heads name num and each base
	also    string   // another unit of num shown beside it ("" for none)
}

var jobSizes = []string{"1k", "10k", "100k", "1M"}

var curves = []curve{
	{"cost per job (N jobs started and settled, 8 in flight over 100 owners)", "ScaleJobs/jobs=%s/impl=%s", jobSizes, "ns/job",
		"troupe", []string{"mutex"}, []string{"troupe", "mutex registry"}, ""},
	{"CPU time per job, same runs (the process's user + system time, GC included)", "ScaleJobs/jobs=%s/impl=%s", jobSizes, "cpu-ns/job",
		"troupe", []string{"mutex"}, []string{"troupe", "mutex registry"}, ""},
	{"bytes allocated per job, same runs", "ScaleJobs/jobs=%s/impl=%s", jobSizes, "B/job",
		"troupe", []string{"mutex"}, []string{"troupe", "mutex registry"}, "allocs/job"},
	{"heap retained per settled record, same runs", "ScaleJobs/jobs=%s/impl=%s", jobSizes, "retained-B/job",
		"troupe", []string{"mutex"}, []string{"troupe", "mutex registry"}, ""},
	{"memory per idle resident activation", "ScaleActivations/activations=%s/impl=%s", []string{"1k", "10k", "20k", "100k"}, "B/activation",
		"troupe", []string{"actor"}, []string{"troupe activation", "trivial protoactor actor"}, "goroutines/activation"},
	{"sessions created in bbolt, syncs off while creating (64 creators)", "ScaleSessions/sync=off/sessions=%s/impl=%s", jobSizes, "ns/session",
		"store", []string{"raw", "raw-batch"}, []string{"Store.Create", "raw bbolt, a commit each", "raw bbolt, shared commits"}, ""},
	{"sessions created in bbolt, every commit synced (64 creators)", "ScaleSessions/sync=on/sessions=%s/impl=%s", jobSizes, "ns/session",
		"store", []string{"raw", "raw-batch"}, []string{"Store.Create", "raw bbolt, a commit each", "raw bbolt, shared commits"}, ""},
	{"bbolt file bytes per session", "ScaleSessions/sync=off/sessions=%s/impl=%s", jobSizes, "file-B/session",
		"store", []string{"raw"}, []string{"Store", "raw bbolt, same bytes"}, ""},
	{"open the file + load one session among N", "ScaleSessions/sync=off/sessions=%s/impl=%s", jobSizes, "ns/open+load",
		"store", []string{"raw"}, []string{"Store.Load", "raw bbolt"}, ""},
	{"list every session id among N", "ScaleSessions/sync=off/sessions=%s/impl=%s", jobSizes, "ns/ids",
		"store", []string{"raw"}, []string{"Store.IDs", "raw bbolt scan"}, ""},
}

func num(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

// value formats v of unit for a curve's cells: durations (ns/…, cpu-ns/…) in ns,
// µs, ms or s, anything else as num does.
func value(v float64, unit string) string {
	if !isDuration(unit) {
		return num(v)
	}
	switch {
	case v >= 1e9:
		return num(v/1e9) + " s"
	case v >= 1e6:
		return num(v/1e6) + " ms"
	case v >= 1e3:
		return num(v/1e3) + " µs"
	default:
		return num(v) + " ns"
	}
}

// isDuration reports whether unit is a time in ns (ns/op, cpu-ns/job, p99-ns, …).
func isDuration(unit string) bool {
	return strings.HasPrefix(unit, "ns/") || strings.Contains(unit, "-ns/") || strings.HasSuffix(unit, "-ns")
}

// higherIsBetter reports whether a larger figure in unit is a faster one (a rate:
// MB/s, followups/s).
func higherIsBetter(unit string) bool { return strings.HasSuffix(unit, "/s") }

// fastest returns name's fastest sample in unit (the smallest time or size, the
// largest rate), which background load disturbs least; 0 if not measured.
func (res *run) fastest(name, unit string) float64 {
	v := res.samples[name][unit]
	if len(v) == 0 {
		return 0
	}
	if higherIsBetter(unit) {
		return slices.Max(v)
	}
	return slices.Min(v)
}

// show renders a figure with its unit: durations in ns, µs, ms or s (with the
// unit they were measured in), anything else as num does.
func show(v float64, unit string) string {
	if isDuration(unit) && v >= 1e3 {
		return value(v, unit) + " (" + unit + ")"
	}
	return num(v) + " " + unit
}

// benchPattern is the -bench pattern that runs exactly names (and nothing else of
// their packages): one alternation per level of the sub-benchmark names.
func benchPattern(names ...string) string {
	var levels [][]string
	for _, n := range names {
		for i, part := range strings.Split(n, "/") {
			if i == len(levels) {
				levels = append(levels, nil)
			}
			if !slices.Contains(levels[i], part) {
				levels[i] = append(levels[i], part)
			}
		}
	}
	parts := make([]string, len(levels))
	for i, alts := range levels {
		quoted := make([]string, len(alts))
		for j, a := range alts {
			quoted[j] = regexp.QuoteMeta(a)
		}
		alt := strings.Join(quoted, "|")
		if len(alts) > 1 {
			alt = "(" + alt + ")"
		}
		if i == 0 {
			alt = "Benchmark" + alt
		}
		parts[i] = "^" + alt + "$"
	}
	return strings.Join(parts, "/")
}

// command is the exact command that measures names again, as the input measured
// them: their package(s), -count, and for scale benchmarks the variable and
// -benchtime 1x.
func (res *run) command(names ...string) string {
	pkgs := map[string][]string{}
	var order []string
	count := 0
	scale := false
	for _, n := range names {
		p := res.pkg[n]
		if p == "" {
			p = benchPkg
		}
		if _, ok := pkgs[p]; !ok {
			order = append(order, p)
		}
		pkgs[p] = append(pkgs[p], n)
		count = max(count, res.runs(n))
		scale = scale || strings.HasPrefix(n, "Scale")
	}
	var cmds []string
	for _, p := range order {
		var b strings.Builder
		if scale {
			b.WriteString(scaleEnv + "=1 ")
		}
		fmt.Fprintf(&b, "go test -run '^$' -bench '%s' -benchmem", benchPattern(pkgs[p]...))
		if scale {
			b.WriteString(" -benchtime 1x")
		}
		fmt.Fprintf(&b, " -count %d %s", count, p)
		cmds = append(cmds, b.String())
	}
	return strings.Join(cmds, "; ")
}

// pair returns r's two figures and whether both were measured (and the
// baseline is not 0).
func (res *run) pair(r ratio) (a, b float64, ok bool) {
	a, ok1 := res.get(r.num, r.unit)
	b, ok2 := res.get(r.base, r.bu())
	return a, b, ok1 && ok2 && b != 0
}

// measured reports whether any row of rs has both its figures.
func (res *run) measured(rs []ratio) bool {
	for _, r := range rs {
		if _, _, ok := res.pair(r); ok {
			return true
		}
	}
	return false
}

func (res *run) anyAbsolute(as []absolute) bool {
	for _, a := range as {
		if _, ok := res.get(a.name, a.unit); ok {
			return true
		}
	}
	return false
}

// name is the benchmark of curve c at size for implementation impl.
func (c curve) name(size, impl string) string { return fmt.Sprintf(c.pattern, size, impl) }

// rows are the sizes at which c's implementation under test was measured.
func (c curve) rows(res *run) []string {
	var out []string
	for _, s := range c.sizes {
		if _, ok := res.get(c.name(s, c.num), c.unit); ok {
			out = append(out, s)
		}
	}
	return out
}

// md escapes a table cell's pipes for markdown.
func md(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// --- plain report ---

func (res *run) printMedians() {
	names := make([]string, 0, len(res.samples))
	for n := range res.samples {
		names = append(names, n)
	}
	slices.Sort(names)
	fmt.Fprintln(out, "Medians:")
	fmt.Fprintln(out)
	fmt.Fprintln(out, "| benchmark | runs | ns/op | B/op | allocs/op | other |")
	fmt.Fprintln(out, "| --- | ---: | ---: | ---: | ---: | --- |")
	for _, n := range names {
		units := make([]string, 0, len(res.samples[n]))
		for u := range res.samples[n] {
			units = append(units, u)
		}
		slices.Sort(units)
		var other []string
		for _, u := range units {
			if u != "ns/op" && u != "B/op" && u != "allocs/op" {
				v, _ := res.get(n, u)
				other = append(other, num(v)+" "+u)
			}
		}
		ns, _ := res.get(n, "ns/op")
		bop, _ := res.get(n, "B/op")
		al, _ := res.get(n, "allocs/op")
		fmt.Fprintf(out, "| %s | %d | %s | %s | %s | %s |\n", n, res.runs(n), num(ns), num(bop), num(al), strings.Join(other, ", "))
	}
}

// printRatios prints rs: a measured row always, an absent one as "not measured"
// when all is set or it has a target. It returns whether a target was missed or a
// row with a target is absent.
func (res *run) printRatios(rs []ratio, all bool) (bad bool) {
	fmt.Fprintln(out, "| figure | value | baseline | ratio | target | verdict | ratio of fastest |")
	fmt.Fprintln(out, "| --- | ---: | ---: | ---: | ---: | --- | ---: |")
	for _, r := range rs {
		a, b, ok := res.pair(r)
		if !ok {
			if all || r.t.set() {
				fmt.Fprintf(out, "| %s | | | | %s | not measured | |\n", r.label, r.t.text("×"))
			}
			bad = bad || r.t.set()
			continue
		}
		v := r.t.verdict(a / b)
		bad = bad || v == "MISSED"
		fast := ""
		if fb := res.fastest(r.base, r.bu()); fb != 0 {
			fast = fmt.Sprintf("%.2f×", res.fastest(r.num, r.unit)/fb)
		}
		fmt.Fprintf(out, "| %s | %s | %s | %.2f× | %s | %s | %s |\n", r.label, show(a, r.unit), show(b, r.bu()), a/b,
			r.t.text("×"), v, fast)
	}
	return bad
}

// printAbsolutes prints as, with the same rule for absent rows as printRatios.
func (res *run) printAbsolutes(as []absolute, all bool) (bad bool) {
	fmt.Fprintln(out, "| figure | value | target | verdict | fastest |")
	fmt.Fprintln(out, "| --- | ---: | ---: | --- | ---: |")
	for _, r := range as {
		v, ok := res.get(r.name, r.unit)
		if !ok {
			if all || r.t.set() {
				fmt.Fprintf(out, "| %s | | %s | not measured | |\n", r.label, r.t.text(r.unit))
			}
			bad = bad || r.t.set()
			continue
		}
		vd := r.t.verdict(v)
		bad = bad || vd == "MISSED"
		fmt.Fprintf(out, "| %s | %s | %s | %s | %s |\n", r.label, show(v, r.unit), r.t.text(r.unit), vd, show(res.fastest(r.name, r.unit), r.unit))
	}
	return bad
}

// printCurve prints c as a table of sizes (with a command column in markdown).
func (res *run) printCurve(c curve, markdown bool) {
	rows := c.rows(res)
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(out, "**%s** (%s; medians of the runs at each size)\n\n", c.title, c.unit)
	head := []string{"N", c.labels[0]}
	if c.also != "" {
		head = append(head, c.also)
	}
	for i := range c.bases {
		head = append(head, c.labels[i+1], "ratio")
	}
	head = append(head, "vs N = "+rows[0])
	if markdown {
		head = append(head, "command")
	}
	fmt.Fprintln(out, "| "+strings.Join(head, " | ")+" |")
	align := make([]string, len(head))
	for i := range align {
		align[i] = "---:"
	}
	align[0] = "---"
	if markdown {
		align[len(align)-1] = "---"
	}
	fmt.Fprintln(out, "| "+strings.Join(align, " | ")+" |")
	first, _ := res.get(c.name(rows[0], c.num), c.unit)
	for _, s := range rows {
		name := c.name(s, c.num)
		v, _ := res.get(name, c.unit)
		cells := []string{s, value(v, c.unit)}
		if c.also != "" {
			a, ok := res.get(name, c.also)
			cells = append(cells, valueIf(a, ok, c.also))
		}
		names := []string{name}
		for _, base := range c.bases {
			bn := c.name(s, base)
			bv, ok := res.get(bn, c.unit)
			if ok {
				names = append(names, bn)
			}
			r := ""
			if ok && bv != 0 {
				r = fmt.Sprintf("%.2f×", v/bv)
			}
			cells = append(cells, valueIf(bv, ok, c.unit), r)
		}
		growth := ""
		if first != 0 {
			growth = fmt.Sprintf("%.2f×", v/first)
		}
		cells = append(cells, growth)
		if markdown {
			cells = append(cells, "`"+md(res.command(names...))+"`")
		}
		fmt.Fprintln(out, "| "+strings.Join(cells, " | ")+" |")
	}
	fmt.Fprintln(out)
}

func valueIf(v float64, ok bool, unit string) string {
	if !ok {
		return ""
	}
	return value(v, unit)
}

// printPlain prints the report. test/bench's own rows are printed, absent ones
// as "not measured", unless none of them was measured (a SCALE=1 run).
func (res *run) printPlain() (bad bool) {
	res.printMedians()
	fmt.Fprintln(out)
	own := res.measured(ratios) || res.anyAbsolute(absolutes)
	other := res.measured(otherRatios) || res.anyAbsolute(otherAbsolutes)
	if own || other {
		fmt.Fprintln(out, "Ratios to baselines of the same run (medians; the verdict is on the ratio of medians, the")
		fmt.Fprintln(out, "last column divides the fastest runs instead, which background load disturbs least):")
		fmt.Fprintln(out)
		bad = res.printRatios(ratios, true)
		fmt.Fprintln(out)
		fmt.Fprintln(out, "Absolute figures against targets (medians; the last column is the fastest run):")
		fmt.Fprintln(out)
		bad = res.printAbsolutes(absolutes, true) || bad
		fmt.Fprintln(out)
		fmt.Fprintln(out, "Other packages, each against the baseline in its own package (rows without a target")
		fmt.Fprintln(out, "only when measured: run.sh PKGS=1):")
		fmt.Fprintln(out)
		bad = res.printRatios(otherRatios, false) || bad
		fmt.Fprintln(out)
		bad = res.printAbsolutes(otherAbsolutes, false) || bad
		fmt.Fprintln(out)
	} else {
		fmt.Fprintln(out, "The figures with targets: not measured in this input.")
		fmt.Fprintln(out)
		bad = true // every row with a target is absent
	}
	scale := false
	for _, c := range curves {
		scale = scale || len(c.rows(res)) > 0
	}
	if !scale {
		fmt.Fprintln(out, "Scale curves: not measured (SCALE=1 test/bench/run.sh).")
		return bad
	}
	fmt.Fprintln(out, "Scale curves (the ratio column divides by the baseline at the same N; the last column")
	fmt.Fprintln(out, "divides by the figure at the smallest N):")
	fmt.Fprintln(out)
	for _, c := range curves {
		res.printCurve(c, false)
	}
	return bad
}

// --- markdown (README) report ---

// printMarkdown prints the README's performance tables: only measured rows, each
// with its command.
func (res *run) printMarkdown(files []string) (bad bool) {
	fmt.Fprintf(out, "Generated by `go run ./test/bench/ratios -markdown %s`", strings.Join(files, " "))
	if res.cpu != "" {
		fmt.Fprintf(out, " (cpu: %s)", res.cpu)
	}
	fmt.Fprintln(out, ". Each figure is the median of its samples (the command gives their count); raw output:")
	fmt.Fprintln(out)
	for _, n := range res.notes {
		fmt.Fprintf(out, "- `%s`", n.file)
		if len(n.lines) > 0 {
			fmt.Fprintf(out, ": %s", strings.Join(n.lines, "; "))
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintln(out)

	fmt.Fprintln(out, "| figure | value | baseline | ratio | target | verdict | command |")
	fmt.Fprintln(out, "| --- | ---: | ---: | ---: | ---: | --- | --- |")
	var missing []string
	for _, r := range slices.Concat(ratios, otherRatios) {
		a, b, ok := res.pair(r)
		if !ok {
			missing = append(missing, strings.TrimSpace(r.label))
			bad = bad || r.t.set()
			continue
		}
		v := r.t.verdict(a / b)
		bad = bad || v == "MISSED"
		fmt.Fprintf(out, "| %s | %s | %s | %.2f× | %s | %s | `%s` |\n", strings.TrimSpace(r.label), show(a, r.unit), show(b, r.bu()), a/b,
			r.t.text("×"), v, md(res.command(r.num, r.base)))
	}
	for _, r := range slices.Concat(absolutes, otherAbsolutes) {
		v, ok := res.get(r.name, r.unit)
		if !ok {
			missing = append(missing, strings.TrimSpace(r.label))
			bad = bad || r.t.set()
			continue
		}
		vd := r.t.verdict(v)
		bad = bad || vd == "MISSED"
		fmt.Fprintf(out, "| %s | %s | — | — | %s | %s | `%s` |\n", strings.TrimSpace(r.label), show(v, r.unit),
			r.t.text(r.unit), vd, md(res.command(r.name)))
	}
	fmt.Fprintln(out)
	for _, c := range curves {
		res.printCurve(c, true)
	}
	if len(missing) > 0 {
		fmt.Fprintf(out, "Not measured in this input: %s.\n", strings.Join(missing, "; "))
	}
	return bad
}

func main() {
	strict := flag.Bool("strict", false, "exit 1 when a target is missed or a figure with a target is absent")
	markdown := flag.Bool("markdown", false, "print the README's performance tables (measured rows, with commands)")
	flag.Parse()
	res := &run{samples: map[string]map[string][]float64{}, pkg: map[string]string{}}
	files := flag.Args()
	if len(files) == 0 {
		if err := res.parse("(stdin)", os.Stdin); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		files = []string{"(stdin)"}
	}
	for _, path := range flag.Args() {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		err = res.parse(path, f)
		f.Close()
		if err != nil {
			fmt.Fprintln(os.Stderr, path+":", err)
			os.Exit(2)
		}
	}
	var bad bool
	if *markdown {
		bad = res.printMarkdown(files)
	} else {
		bad = res.printPlain()
	}
	if bad && *strict {
		os.Exit(1)
	}
}
