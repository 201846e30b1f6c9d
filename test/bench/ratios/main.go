// Command ratios reads raw `go test -bench` output of ./test/bench (several
// -count runs, benchstat-compatible), takes the median of every figure, and
// prints each troupe figure as a ratio to its baseline measured in the same run,
// plus the memory figures against the targets.
//
//	go run ./test/bench/ratios [-strict] bench.txt
//
// With -strict it exits 1 when a target is missed or a figure is absent.
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

// samples maps benchmark name (without the -GOMAXPROCS suffix) → unit → values.
type samples map[string]map[string][]float64

var procsSuffix = regexp.MustCompile(`-\d+$`)

// parse reads benchmark result lines: "BenchmarkX-2  N  v1 unit1  v2 unit2 …".
func parse(r io.Reader) (samples, error) {
	s := samples{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
			continue
		}
		name := procsSuffix.ReplaceAllString(strings.TrimPrefix(f[0], "Benchmark"), "")
		if s[name] == nil {
			s[name] = map[string][]float64{}
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			s[name][f[i+1]] = append(s[name][f[i+1]], v)
		}
	}
	return s, sc.Err()
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
func (s samples) min(name, unit string) float64 {
	v := s[name][unit]
	if len(v) == 0 {
		return 0
	}
	return slices.Min(v)
}

// get returns the median of name's unit and whether it was measured.
func (s samples) get(name, unit string) (float64, bool) {
	v := s[name][unit]
	if len(v) == 0 {
		return 0, false
	}
	return median(v), true
}

// ratio is one row: num/base in unit, with a maximum (0: informational).
type ratio struct {
	label, num, base, unit string
	max                    float64
}

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

// absolute is one row compared with a fixed maximum.
type absolute struct {
	label, name, unit string
	max               float64
}

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

func main() {
	strict := flag.Bool("strict", false, "exit 1 when a target is missed or a figure is absent")
	flag.Parse()
	in := io.Reader(os.Stdin)
	if flag.NArg() > 0 {
		f, err := os.Open(flag.Arg(0))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		defer f.Close()
		in = f
	}
	s, err := parse(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	bad := false

	names := make([]string, 0, len(s))
	for n := range s {
		names = append(names, n)
	}
	slices.Sort(names)
	fmt.Println("Medians:")
	fmt.Println()
	fmt.Println("| benchmark | runs | ns/op | B/op | allocs/op | other |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: | --- |")
	for _, n := range names {
		var other []string
		units := make([]string, 0, len(s[n]))
		for u := range s[n] {
			units = append(units, u)
		}
		slices.Sort(units)
		for _, u := range units {
			if u != "ns/op" && u != "B/op" && u != "allocs/op" {
				v, _ := s.get(n, u)
				other = append(other, num(v)+" "+u)
			}
		}
		ns, _ := s.get(n, "ns/op")
		bop, _ := s.get(n, "B/op")
		al, _ := s.get(n, "allocs/op")
		fmt.Printf("| %s | %d | %s | %s | %s | %s |\n", n, len(s[n]["ns/op"]), num(ns), num(bop), num(al), strings.Join(other, ", "))
	}

	fmt.Println()
	fmt.Println("Ratios to baselines of the same run (medians; the verdict is on the ratio of medians, the")
	fmt.Println("last column divides the fastest runs instead, which background load disturbs least):")
	fmt.Println()
	fmt.Println("| figure | value | baseline | ratio | target | verdict | ratio of minima |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: | --- | ---: |")
	for _, r := range ratios {
		a, ok1 := s.get(r.num, r.unit)
		b, ok2 := s.get(r.base, r.unit)
		target := "—"
		if r.max > 0 {
			target = "≤ " + num(r.max) + "×"
		}
		if !ok1 || !ok2 || b == 0 {
			fmt.Printf("| %s | | | | %s | not measured | |\n", r.label, target)
			bad = bad || r.max > 0
			continue
		}
		v := verdict(a/b, r.max)
		bad = bad || v == "MISSED"
		fmt.Printf("| %s | %s %s | %s %s | %.2f× | %s | %s | %.2f× |\n", r.label, num(a), r.unit, num(b), r.unit, a/b, target, v,
			s.min(r.num, r.unit)/s.min(r.base, r.unit))
	}

	fmt.Println()
	fmt.Println("Memory against targets (medians):")
	fmt.Println()
	fmt.Println("| figure | value | target | verdict |")
	fmt.Println("| --- | ---: | ---: | --- |")
	for _, r := range absolutes {
		v, ok := s.get(r.name, r.unit)
		target := "—"
		if r.max > 0 {
			target = "≤ " + num(r.max) + " " + r.unit
		}
		if !ok {
			fmt.Printf("| %s | | %s | not measured |\n", r.label, target)
			bad = bad || r.max > 0
			continue
		}
		vd := verdict(v, r.max)
		bad = bad || vd == "MISSED"
		fmt.Printf("| %s | %s %s | %s | %s |\n", r.label, num(v), r.unit, target, vd)
	}
	if bad && *strict {
		os.Exit(1)
	}
}
