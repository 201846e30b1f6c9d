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

// min returns the smallest of name's unit (0 if not measured).
func (res *run) min(name, unit string) float64 {
	v := res.samples[name][unit]
	if len(v) == 0 {
		return 0
	}
	return slices.Min(v)
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

// ratio is one row: num/base in unit, with a maximum (0: informational).
type ratio struct {
	label, num, base, unit string
	max                    float64
}

// ratios are test/bench's own rows: always printed, "not measured" when absent.
var ratios = []ratio{
	{"lifecycle unowned / floor spawn+stop", "LifecycleUnowned", "FloorSpawnStop", "ns/op", 3},
	{"lifecycle owned / floor spawn+stop", "LifecycleOwned", "FloorSpawnStop", "ns/op", 3},
	{"lifecycle unowned / mutex registry", "LifecycleUnowned", "MutexRegistry", "ns/op", 0},
	{"lifecycle owned / mutex registry", "LifecycleOwned", "MutexRegistry", "ns/op", 0},
	{"lifecycle unowned, 100k history / empty", "LifecycleUnownedHistory100k", "LifecycleUnowned", "ns/op", 1.5},
	{"lifecycle owned, 100k history / empty", "LifecycleOwnedHistory100k", "LifecycleOwned", "ns/op", 1.5},
	{"list owner's 10 among 100k / list baseline", "ListOwner10Among100k", "ListOwner10", "ns/op", 1.5},
	{"read / floor request-response", "Read", "FloorRequestResponse", "ns/op", 0},
	{"read among 100k / read", "ReadAmong100k", "Read", "ns/op", 1.5},
	{"kill→settled / floor request-response", "KillToSettled", "FloorRequestResponse", "ns/op", 0},
	{"lifecycle unowned / floor spawn+stop (B/op)", "LifecycleUnowned", "FloorSpawnStop", "B/op", 0},
	{"lifecycle unowned / floor spawn+stop (allocs/op)", "LifecycleUnowned", "FloorSpawnStop", "allocs/op", 0},
	{"continuable followup→turn start (resident) / floor request-response", "ContinuableFollowupToTurnStart", "FloorRequestResponse", "ns/op", 0},
	{"continuable followup→turn start, 10k-turn history / short history", "ContinuableFollowupToTurnStartHistory10k", "ContinuableFollowupToTurnStart", "ns/op", 0},
	{"continuable followup throughput, per followup / floor request-response", "ContinuableFollowupThroughput", "FloorRequestResponse", "ns/op", 0},
	{"continuable cold restore (bbolt), 10 turns / floor request-response", "ContinuableColdRestore10Turns", "FloorRequestResponse", "ns/op", 0},
	{"continuable cold restore (bbolt), 10k turns / 10 turns", "ContinuableColdRestore10kTurns", "ContinuableColdRestore10Turns", "ns/op", 0},
}

// otherRatios are the rows of the other packages' benchmarks (run.sh PKGS=1),
// each against the baseline in its own package: printed only when measured.
var otherRatios = []ratio{
	{"shell stream throughput / pipe to io.Discard", "ShellThroughput", "PipeBaseline", "MB/s", 0},
	{"shell start → first output / os/exec", "ShellStartToFirstOutput", "ExecStartToOutput", "ns/op", 0},
	{"shell kill → settled (SIGTERM obeyed) / os/exec SIGTERM + Wait", "ShellKillToSettled", "ExecKillToExit", "ns/op", 0},
	{"job_output on a stream job / raw registry read", "JobOutputStream", "RawRead", "ns/op", 0},
	{"foreground delegation (spawn) / bare job lifecycle", "Foreground/spawn", "JobLifecycle", "ns/op", 0},
	{"foreground delegation (scripted provider) / bare job lifecycle", "Foreground/scripted-provider", "JobLifecycle", "ns/op", 0},
	{"background delegation start → collect / bare job lifecycle", "Background", "JobLifecycle", "ns/op", 0},
}

// absolute is one row compared with a fixed maximum.
type absolute struct {
	label, name, unit string
	max               float64
}

// absolutes are test/bench's own absolute rows: always printed.
var absolutes = []absolute{
	{"registry memory per settled record", "MemorySettledRecord", "B/record", 400},
	{"  (same, incl. protoactor's one-off process-registry growth)", "MemorySettledRecord", "B/record-cold", 0},
	{"memory per live idle job beyond its producer", "MemoryLiveIdleJob", "B/job", 1536},
	{"  (whole delta per live job, producer included)", "MemoryLiveIdleJob", "B/job-raw", 0},
	{"  (producer's Done channel, subtracted)", "MemoryLiveIdleJob", "B/producer", 0},
	{"  (of which goroutine stacks: watcher shards)", "MemoryLiveIdleJob", "B/job-stack", 0},
	{"  (goroutines per live job: watcher shards)", "MemoryLiveIdleJob", "goroutines/job", 0},
	{"memory per idle resident continuable activation", "MemoryIdleActivation", "B/activation", 0},
	{"  (goroutines per idle resident activation)", "MemoryIdleActivation", "goroutines/activation", 0},
	{"followups/s through one resident activation", "ContinuableFollowupThroughput", "followups/s", 0},
}

// otherAbsolutes are the other packages' absolute rows: printed only when measured.
var otherAbsolutes = []absolute{
	{"notice latency, settle → owner's surface", "NoticeLatency", "ns/notice", 0},
	{"peak heap of a shell job writing 1 GiB nobody reads", "MemoryOfGiBOutputJob", "peak-heap-MiB", 0},
	{"one /proc scan for a job's processes", "TreeScan", "ns/op", 0},
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

func verdict(v, max float64) string {
	switch {
	case max == 0:
		return "info"
	case v <= max:
		return "ok"
	default:
		return "MISSED"
	}
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
	if !strings.HasPrefix(unit, "ns/") && !strings.Contains(unit, "-ns/") {
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

func target(max float64, unit string) string {
	if max == 0 {
		return "—"
	}
	return "≤ " + num(max) + unit
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

// measured reports whether any row of rs has both its figures.
func (res *run) measured(rs []ratio) bool {
	for _, r := range rs {
		_, a := res.get(r.num, r.unit)
		_, b := res.get(r.base, r.unit)
		if a && b {
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
	fmt.Println("Medians:")
	fmt.Println()
	fmt.Println("| benchmark | runs | ns/op | B/op | allocs/op | other |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: | --- |")
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
		fmt.Printf("| %s | %d | %s | %s | %s | %s |\n", n, res.runs(n), num(ns), num(bop), num(al), strings.Join(other, ", "))
	}
}

// printRatios prints rs; absent rows are printed "not measured" when all is set.
// It returns whether a target was missed or a row with a target is absent.
func (res *run) printRatios(rs []ratio, all bool) (bad bool) {
	fmt.Println("| figure | value | baseline | ratio | target | verdict | ratio of minima |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: | --- | ---: |")
	for _, r := range rs {
		a, ok1 := res.get(r.num, r.unit)
		b, ok2 := res.get(r.base, r.unit)
		if !ok1 || !ok2 || b == 0 {
			if all {
				fmt.Printf("| %s | | | | %s | not measured | |\n", r.label, target(r.max, "×"))
			}
			bad = bad || r.max > 0
			continue
		}
		v := verdict(a/b, r.max)
		bad = bad || v == "MISSED"
		fmt.Printf("| %s | %s %s | %s %s | %.2f× | %s | %s | %.2f× |\n", r.label, num(a), r.unit, num(b), r.unit, a/b,
			target(r.max, "×"), v, res.min(r.num, r.unit)/res.min(r.base, r.unit))
	}
	return bad
}

func (res *run) printAbsolutes(as []absolute, all bool) (bad bool) {
	fmt.Println("| figure | value | target | verdict |")
	fmt.Println("| --- | ---: | ---: | --- |")
	for _, r := range as {
		v, ok := res.get(r.name, r.unit)
		if !ok {
			if all {
				fmt.Printf("| %s | | %s | not measured |\n", r.label, target(r.max, " "+r.unit))
			}
			bad = bad || r.max > 0
			continue
		}
		vd := verdict(v, r.max)
		bad = bad || vd == "MISSED"
		fmt.Printf("| %s | %s %s | %s | %s |\n", r.label, num(v), r.unit, target(r.max, " "+r.unit), vd)
	}
	return bad
}

// printCurve prints c as a table of sizes (with a command column in markdown).
func (res *run) printCurve(c curve, markdown bool) {
	rows := c.rows(res)
	if len(rows) == 0 {
		return
	}
	fmt.Printf("**%s** (%s; medians of the runs at each size)\n\n", c.title, c.unit)
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
	fmt.Println("| " + strings.Join(head, " | ") + " |")
	align := make([]string, len(head))
	for i := range align {
		align[i] = "---:"
	}
	align[0] = "---"
	if markdown {
		align[len(align)-1] = "---"
	}
	fmt.Println("| " + strings.Join(align, " | ") + " |")
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
		fmt.Println("| " + strings.Join(cells, " | ") + " |")
	}
	fmt.Println()
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
	fmt.Println()
	if res.measured(ratios) || res.anyAbsolute(absolutes) {
		fmt.Println("Ratios to baselines of the same run (medians; the verdict is on the ratio of medians, the")
		fmt.Println("last column divides the fastest runs instead, which background load disturbs least):")
		fmt.Println()
		bad = res.printRatios(ratios, true)
		fmt.Println()
		fmt.Println("Memory against targets (medians):")
		fmt.Println()
		bad = res.printAbsolutes(absolutes, true) || bad
		fmt.Println()
	} else {
		fmt.Println("test/bench's own figures: not measured in this input.")
		fmt.Println()
		bad = true // every row with a target is absent
	}
	if res.measured(otherRatios) || res.anyAbsolute(otherAbsolutes) {
		fmt.Println("Other packages, each against the baseline in its own package:")
		fmt.Println()
		res.printRatios(otherRatios, false)
		fmt.Println()
		res.printAbsolutes(otherAbsolutes, false)
		fmt.Println()
	}
	scale := false
	for _, c := range curves {
		scale = scale || len(c.rows(res)) > 0
	}
	if !scale {
		fmt.Println("Scale curves: not measured (SCALE=1 test/bench/run.sh).")
		return bad
	}
	fmt.Println("Scale curves (the ratio column divides by the baseline at the same N; the last column")
	fmt.Println("divides by the figure at the smallest N):")
	fmt.Println()
	for _, c := range curves {
		res.printCurve(c, false)
	}
	return bad
}

// --- markdown (README) report ---

// printMarkdown prints the README's performance tables: only measured rows, each
// with its command.
func (res *run) printMarkdown(files []string) (bad bool) {
	fmt.Printf("Generated by `go run ./test/bench/ratios -markdown %s`", strings.Join(files, " "))
	if res.cpu != "" {
		fmt.Printf(" (cpu: %s)", res.cpu)
	}
	fmt.Println(". Each figure is the median of its samples (the command gives their count); raw output:")
	fmt.Println()
	for _, n := range res.notes {
		fmt.Printf("- `%s`", n.file)
		if len(n.lines) > 0 {
			fmt.Printf(": %s", strings.Join(n.lines, "; "))
		}
		fmt.Println()
	}
	fmt.Println()

	fmt.Println("| figure | value | baseline | ratio | target | verdict | command |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: | --- | --- |")
	var missing []string
	for _, r := range slices.Concat(ratios, otherRatios) {
		a, ok1 := res.get(r.num, r.unit)
		b, ok2 := res.get(r.base, r.unit)
		if !ok1 || !ok2 || b == 0 {
			missing = append(missing, r.label)
			bad = bad || r.max > 0
			continue
		}
		v := verdict(a/b, r.max)
		bad = bad || v == "MISSED"
		fmt.Printf("| %s | %s %s | %s %s | %.2f× | %s | %s | `%s` |\n", r.label, num(a), r.unit, num(b), r.unit, a/b,
			target(r.max, "×"), v, md(res.command(r.num, r.base)))
	}
	for _, r := range slices.Concat(absolutes, otherAbsolutes) {
		v, ok := res.get(r.name, r.unit)
		if !ok {
			missing = append(missing, strings.TrimSpace(r.label))
			bad = bad || r.max > 0
			continue
		}
		vd := verdict(v, r.max)
		bad = bad || vd == "MISSED"
		fmt.Printf("| %s | %s %s | — | — | %s | %s | `%s` |\n", strings.TrimSpace(r.label), num(v), r.unit,
			target(r.max, " "+r.unit), vd, md(res.command(r.name)))
	}
	fmt.Println()
	for _, c := range curves {
		res.printCurve(c, true)
	}
	if len(missing) > 0 {
		fmt.Printf("Not measured in this input: %s.\n", strings.Join(missing, "; "))
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
