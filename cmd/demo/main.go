// Command demo runs a scripted agent system on troupe — no network and no model: a
// scripted turn runner plays the agents' models — and shows what the runtime does
// as a timeline, checking each promise it shows.
//
//	go run ./cmd/demo                   # every scenario, as a timeline
//	go run ./cmd/demo --scenario crash  # one scenario
//	go run ./cmd/demo --json            # the event stream: one JSON object per line
//	go run ./cmd/demo --data DIR        # where the sessions file (bbolt) goes
//	go run ./cmd/demo --web             # a live system and its task list, until Ctrl-C
//	go run ./cmd/demo --cluster 3       # 3 node processes over PostgreSQL ($TROUPE_PG_DSN), one SIGKILLed
//
// Exit status: 0 when every promise held, 1 when one broke or a scenario could not
// finish, 2 on bad usage (an unknown scenario, a --data that is not a directory),
// 130 when SIGINT or SIGTERM interrupted the run (every live system is shut down
// first: its jobs are torn down, none is left running).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/troupe-rt/troupe/cluster"
)

// scenario is one part of the demo, on systems of its own.
type scenario struct {
	name, about string
	play        func(*stage) error
}

// scenarios are the demo's parts, in the order a full run plays them.
var scenarios = []scenario{
	{"jobs", "shell jobs streaming output, a kill with a reason, a PTY prompt answered, an agent torn down with its work", scenarioJobs},
	{"notices", "completion notices: a wake budget at work, a human's kill the model is told about, the model's own kill it is not", scenarioNotices},
	{"subagents", "delegation in the foreground and the background; a continuable child across followups, an interrupt and a restart of the whole system", scenarioSubagents},
	{"crash", "a continuable child's Activation crashes mid-turn and restarts from the sessions file", scenarioCrash},
	{"workflow", "a model-written script audits files in parallel through scripted subagents as a workflow job: one child fails, a background run is killed by a human", scenarioWorkflow},
}

// sessionsFile is the name of the bbolt file in the data directory.
const sessionsFile = "sessions.db"

// exitInterrupted is the exit status of a run a signal cut short.
const exitInterrupted = 130

// main runs the demo until it ends or SIGINT/SIGTERM arrives: a signal shuts every
// live system down (Shutdown tears its jobs down) and ends the run.
func main() {
	if os.Getenv(nodeEnv) == "1" { // a node of --cluster N
		os.Exit(cluster.RunNode(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// usageError is bad usage: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// run is the demo: it returns the exit status. When ctx ends, every live system
// shuts down, the scenario in play stops, and no other starts.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	only := fs.String("scenario", "", "run only the scenario `NAME` ("+strings.Join(names(), ", ")+"); default: all")
	asJSON := fs.Bool("json", false, "print the event stream, one JSON object per line, instead of the timeline")
	data := fs.String("data", defaultDataDir(), "keep the sessions file in `DIR`")
	showTree := fs.Bool("lifecycle", false, "also print the supervision tree's lifecycle events in the timeline (--json always has them)")
	asWeb := fs.Bool("web", false, "run a live system and serve its task list (a loopback URL with a token) until Ctrl-C")
	webAddr := fs.String("web-addr", "127.0.0.1:0", "with --web, listen on `ADDR` (loopback only)")
	nodes := fs.Int("cluster", 0, "run `N` troupe-node processes (2 to 9) over the PostgreSQL at $TROUPE_PG_DSN, SIGKILL one, show its children carrying on")
	fs.Usage = func() { usage(fs) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *nodes != 0 {
		switch {
		case *nodes < 2 || *nodes > 9:
			fmt.Fprintf(stderr, "demo: --cluster %d: want 2 to 9 nodes\nrun with --help for usage\n", *nodes)
			return 2
		case *only != "" || *asJSON || *asWeb || fs.NArg() > 0:
			fmt.Fprintln(stderr, "demo: --cluster runs alone (no --scenario, --json, --web or arguments)\nrun with --help for usage")
			return 2
		}
		return runCluster(ctx, *nodes, stdout, stderr)
	}
	path, fresh, err := setup(fs, *only, *data)
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		var ue *usageError
		if errors.As(err, &ue) {
			fmt.Fprintln(stderr, "run with --help for usage")
			return 2
		}
		return 1
	}
	if *asWeb {
		return runWeb(ctx, *webAddr, path, stdout, stderr)
	}
	color := false
	if f, ok := stdout.(*os.File); ok {
		color = colorOK(f)
	}
	out := newEmitter(stdout, *asJSON, color)
	out.lifecycle = *showTree
	out.emit(Event{Kind: KindRun, Path: path, Detail: fresh})
	sum := Summary{Store: path, Scenarios: []string{}, Failed: []string{}}
	for _, sc := range scenarios {
		if *only != "" && *only != sc.name {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		sum.Scenarios = append(sum.Scenarios, sc.name)
		kept, broken, err := play(ctx, out, sc, path)
		sum.Kept += kept
		sum.Broken += len(broken)
		for _, b := range broken {
			fmt.Fprintf(stderr, "demo: scenario %s: broken promise: %v\n", sc.name, b)
		}
		if err != nil {
			sum.Failed = append(sum.Failed, sc.name)
			var b *brokenPromise
			if !errors.As(err, &b) { // a broken promise was said above
				fmt.Fprintf(stderr, "demo: scenario %s stopped early: %v\n", sc.name, err)
			}
		}
	}
	if _, err := os.Stat(path); err != nil {
		sum.Store = "" // no scenario that ran keeps continuable children
	}
	if ctx.Err() != nil {
		sum.Interrupted = context.Cause(ctx).Error()
	}
	out.emit(Event{Kind: KindSummary, Summary: &sum})
	if sum.Interrupted != "" {
		fmt.Fprintf(stderr, "demo: interrupted (%s): every live system was shut down, its jobs torn down\n", sum.Interrupted)
		return exitInterrupted
	}
	if sum.Broken > 0 || len(sum.Failed) > 0 {
		fmt.Fprintf(stderr, "demo: %d broken promises, %d scenarios stopped early (see the timeline)\n", sum.Broken, len(sum.Failed))
		return 1
	}
	return 0
}

// play runs one scenario, then the promises every scenario keeps (each job settled
// once; notices match settlements; the wake budget held). It returns the promises
// kept and broken, and the error that stopped the scenario early, if any.
func play(ctx context.Context, out *emitter, sc scenario, path string) (kept int, broken []*brokenPromise, err error) {
	st := newStage(ctx, out, sc.name, path)
	st.emit(Event{Kind: KindScenario, Text: sc.about})
	if err = sc.play(st); err != nil {
		st.emit(Event{Kind: KindError, Text: err.Error()})
	}
	_ = st.checkSettlements() // a broken one is recorded in st.broken
	_ = st.checkNotices()
	for _, ev := range out.events(sc.name) {
		if ev.Kind == KindPromise && *ev.OK {
			kept++
		}
	}
	return kept, st.broken, err
}

func names() []string {
	var ns []string
	for _, sc := range scenarios {
		ns = append(ns, sc.name)
	}
	return ns
}

// setup checks the arguments and prepares the data directory: it returns the
// sessions file's path (removed if a previous run left one: every run starts
// afresh, and leaves its file for inspection) and says which.
func setup(fs *flag.FlagSet, only, dir string) (path, fresh string, err error) {
	if fs.NArg() > 0 {
		return "", "", &usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	if only != "" && !slices.Contains(names(), only) {
		return "", "", &usageError{fmt.Sprintf("unknown scenario %q (the scenarios: %s)", only, strings.Join(names(), ", "))}
	}
	if dir == "" {
		return "", "", &usageError{"--data needs a directory"}
	}
	if info, err := os.Stat(dir); err == nil && !info.IsDir() {
		return "", "", &usageError{fmt.Sprintf("--data %s: not a directory", dir)}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", &usageError{fmt.Sprintf("--data %s: cannot create the directory: %v", dir, err)}
	}
	path = filepath.Join(dir, sessionsFile)
	fresh = "a fresh file"
	switch err := os.Remove(path); {
	case err == nil:
		fresh = "a fresh file: the previous run's was removed"
	case !errors.Is(err, os.ErrNotExist):
		return "", "", &usageError{fmt.Sprintf("--data %s: cannot remove the previous run's %s: %v", dir, sessionsFile, err)}
	}
	probe, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return "", "", &usageError{fmt.Sprintf("--data %s: cannot write there: %v", dir, err)}
	}
	probe.Close()
	if err := os.Remove(path); err != nil { // bbolt creates it when a scenario opens it
		return "", "", err
	}
	return path, fresh, nil
}

// defaultDataDir is where the sessions file goes without --data (the rule --help
// states): $XDG_STATE_HOME/troupe-demo when XDG_STATE_HOME is an absolute path,
// else ~/.local/state/troupe-demo, else <os.TempDir()>/troupe-demo.
func defaultDataDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "troupe-demo")
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		return filepath.Join(home, ".local", "state", "troupe-demo")
	}
	return filepath.Join(os.TempDir(), "troupe-demo")
}

func usage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprint(w, `usage: go run ./cmd/demo [--scenario NAME] [--json] [--data DIR]
       go run ./cmd/demo --cluster N   (PostgreSQL: eval "$(.ci/postgres.sh)")

A scripted agent system on troupe — no network, no model: a scripted turn runner
plays the models. It prints a timeline of what the runtime does and checks every
promise it shows. The scenarios, in the order a full run plays them:

`)
	for _, sc := range scenarios {
		fmt.Fprintf(w, "  %-10s %s\n", sc.name, sc.about)
	}
	fmt.Fprint(w, "\nflags:\n")
	fs.PrintDefaults()
	fmt.Fprintf(w, `
The continuable children's sessions go to DIR/%s (bbolt). Each run starts that
file afresh and leaves it for inspection. Without --data, DIR is
$XDG_STATE_HOME/troupe-demo, else ~/.local/state/troupe-demo, else
<temp dir>/troupe-demo.

With --json, stdout carries only the events (one JSON object per line; colours
never); diagnostics go to stderr. The timeline is coloured when stdout is a
terminal and NO_COLOR is not set.

Exit status: 0 every promise held; 1 a promise broke or a scenario could not
finish (stderr says which); 2 bad usage; 130 SIGINT or SIGTERM cut the run
short (every live system was shut down first, its jobs torn down).
`, sessionsFile)
}
