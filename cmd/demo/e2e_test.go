package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/require"
)

// Bounds on the end-to-end test's subprocesses; nothing waits for them to pass.
const (
	buildTimeout = 5 * time.Minute // a cold build cache on a loaded 2-core machine
	runTimeout   = 2 * time.Minute // the demo takes seconds, even under -race
)

// streamEvent is an event as --json documents it. It copies the JSON names, not the
// demo's Event type: the test reads the stream the way a consumer would.
type streamEvent struct {
	Seq      int    `json:"seq"`
	Kind     string `json:"kind"`
	Scenario string `json:"scenario"`
	System   int    `json:"system"`
	Who      string `json:"who"`
	Job      string `json:"job"`
	Child    string `json:"child"`
	Status   string `json:"status"`
	Detail   string `json:"detail"`
	Cause    string `json:"cause"`
	Reported *bool  `json:"reported"`
	Lane     string `json:"lane"`
	Code     string `json:"code"`
	Text     string `json:"text"`
	Epoch    uint64 `json:"epoch"`
	History  *int   `json:"history"`
	Budget   int    `json:"budget"`
	Promise  string `json:"promise"`
	OK       *bool  `json:"ok"`
	Summary  *struct {
		Scenarios []string `json:"scenarios"`
		Kept      int      `json:"kept"`
		Broken    int      `json:"broken"`
		Failed    []string `json:"failed"`
		Store     string   `json:"store"`
	} `json:"summary"`
}

// TestDemoEndToEnd builds the demo binary, runs every scenario with --json on a
// fresh data directory, and checks the promises from the event stream alone.
func TestDemoEndToEnd(t *testing.T) {
	bin := buildDemo(t)

	t.Run("json", func(t *testing.T) {
		data := t.TempDir()
		stdout, stderr, code := runDemo(t, bin, nil, "--json", "--data", data)
		require.Equal(t, 0, code, "exit status; stderr:\n%s", stderr)
		events := parseStream(t, stdout)
		for _, check := range streamChecks {
			check.run(t, events)
		}
		require.FileExists(t, filepath.Join(data, sessionsFile), "the sessions file is kept for inspection")
	})

	t.Run("unknown scenario", func(t *testing.T) {
		stdout, stderr, code := runDemo(t, bin, nil, "--scenario", "nosuch", "--data", t.TempDir())
		require.Equal(t, 2, code, "stderr:\n%s", stderr)
		require.Contains(t, stderr, `unknown scenario "nosuch" (the scenarios: jobs, notices, subagents, crash, workflow)`)
		require.Empty(t, stdout)
	})

	t.Run("data is a file", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "not-a-dir")
		require.NoError(t, os.WriteFile(file, []byte("x"), 0o600))
		stdout, stderr, code := runDemo(t, bin, nil, "--data", file)
		require.Equal(t, 2, code, "stderr:\n%s", stderr)
		require.Contains(t, stderr, "--data "+file+": not a directory")
		require.Empty(t, stdout)
	})

	t.Run("timeline on a pipe", func(t *testing.T) {
		data := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(data, sessionsFile), []byte("a previous run's"), 0o600))
		stdout, stderr, code := runDemo(t, bin, []string{"NO_COLOR="}, "--scenario", "crash", "--data", data)
		require.Equal(t, 0, code, "stderr:\n%s", stderr)
		require.NotContains(t, stdout, "\x1b[", "no colours when stdout is not a terminal")
		require.Contains(t, stdout, "== crash: ")
		require.Contains(t, stdout, "the previous run's was removed")
		require.Contains(t, stdout, "promise kept: the Activation restarted from the store at a newer epoch")
		require.Empty(t, stderr)
	})
}

// TestColourOnlyOnATerminal: colours when stdout is a terminal, unless NO_COLOR is
// set; never on a pipe.
func TestColourOnlyOnATerminal(t *testing.T) {
	ptmx, tty, err := pty.Open()
	require.NoError(t, err)
	defer ptmx.Close()
	defer tty.Close()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()

	t.Setenv("NO_COLOR", "")
	require.True(t, colorOK(tty), "a terminal")
	require.False(t, colorOK(w), "a pipe")
	t.Setenv("NO_COLOR", "1")
	require.False(t, colorOK(tty), "a terminal, NO_COLOR=1")
}

// goBinary is the go command of the toolchain running the test.
func goBinary(t *testing.T) string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); runtime.GOROOT() != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, err := exec.LookPath("go")
	require.NoError(t, err, "no go command to build the demo with")
	return p
}

// buildDemo builds the demo into a temporary directory, with -race when the test
// itself runs under the race detector (the packages are then in the build cache).
func buildDemo(t *testing.T) string {
	bin := filepath.Join(t.TempDir(), "demo")
	args := []string{"build", "-o", bin}
	if raceBuild {
		args = append(args, "-race")
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBinary(t), append(args, ".")...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build:\n%s", out)
	return bin
}

// runDemo runs the binary with args (env added to the test's environment) and
// returns its stdout, stderr and exit status.
func runDemo(t *testing.T, bin string, env []string, args ...string) (string, string, int) {
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return stdout.String(), stderr.String(), 0
	case errors.As(err, &exit) && ctx.Err() == nil:
		return stdout.String(), stderr.String(), exit.ExitCode()
	}
	t.Fatalf("demo %q: %v\nstderr:\n%s", args, err, stderr.String())
	return "", "", -1
}

// parseStream decodes --json's stdout: every line one JSON object, seq 1, 2, ...
func parseStream(t *testing.T, stdout string) []streamEvent {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	events := make([]streamEvent, 0, len(lines))
	for i, line := range lines {
		var obj map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(line), &obj), "line %d is not a JSON object: %q", i+1, line)
		var ev streamEvent
		require.NoError(t, json.Unmarshal([]byte(line), &ev), "line %d", i+1)
		require.Equal(t, i+1, ev.Seq, "line %d: seq", i+1)
		require.NotEmpty(t, ev.Kind, "line %d: kind", i+1)
		events = append(events, ev)
	}
	return events
}

func of(events []streamEvent, scenario string) []streamEvent {
	var out []streamEvent
	for _, ev := range events {
		if ev.Scenario == scenario {
			out = append(out, ev)
		}
	}
	return out
}

// streamChecks are the promises checked from an event stream.
var streamChecks = []struct {
	name string
	run  func(require.TestingT, []streamEvent)
}{
	{"summary", checkSummary},
	{"settlements", checkSettlements},
	{"notices", checkNotices},
	{"crash", checkCrashRestart},
	{"restart", checkResumeAfterRestart},
	{"histories", checkAllHistories},
	{"lifecycle", checkLifecycle},
	{"workflow", checkWorkflow},
}

// checkWorkflow: in the workflow scenario, every agent-start has its agent-end;
// legacy.go's child failed and huge.go's was cancelled (every other completed);
// the foreground run completed and the background one was cancelled; the model
// was told of the human's kill of the workflow job.
func checkWorkflow(t require.TestingT, events []streamEvent) {
	var starts, ends int
	bad := map[string]string{}
	var runEnds []string
	told := false
	for _, ev := range of(events, "workflow") {
		switch {
		case ev.Kind == "workflow" && ev.Status == "agent-start":
			starts++
		case ev.Kind == "workflow" && ev.Status == "agent-end":
			ends++
			if ev.Detail != "completed" {
				bad[ev.Child] = ev.Detail
			}
		case ev.Kind == "workflow" && ev.Status == "end":
			runEnds = append(runEnds, ev.Detail)
		case ev.Kind == "notice":
			told = told || strings.Contains(ev.Text, "(workflow: audit) finished [status: killed, cancelled by the user]")
		}
	}
	require.Equal(t, 9, starts, "agent starts")
	require.Equal(t, starts, ends, "every agent-start has its agent-end")
	require.Equal(t, map[string]string{"legacy.go": "failed", "huge.go": "cancelled"}, bad)
	require.Equal(t, []string{"completed", "cancelled"}, runEnds)
	require.True(t, told, "the model was told of the human's kill")
}

// checkLifecycle: the supervision tree's events agree with the jobs' — every job
// started in a system is spawned, settled with the job's status, then stopped, in
// that order — and every node present or spawned in a system is stopped by its
// shutdown.
func checkLifecycle(t require.TestingT, events []streamEvent) {
	type node struct {
		scenario string
		system   int
		who      string
	}
	seen := map[node][]string{} // lifecycle statuses in stream order
	settledAs := map[node]string{}
	for _, ev := range events {
		if ev.Kind != "lifecycle" {
			continue
		}
		n := node{ev.Scenario, ev.System, ev.Who}
		seen[n] = append(seen[n], ev.Status)
		if ev.Status == "settled" {
			settledAs[n], _, _ = strings.Cut(ev.Detail, " ")
		}
	}
	require.NotEmpty(t, seen, "no lifecycle events")
	for _, ev := range events {
		if ev.Kind != "job-settled" {
			continue
		}
		n := node{ev.Scenario, ev.System, "job/" + ev.Job}
		require.Equal(t, []string{"spawned", "settled", "stopped"}, seen[n], "lifecycle of %+v", n)
		require.Equal(t, ev.Status, settledAs[n], "the tree's settlement of %+v", n)
	}
	for n, statuses := range seen {
		require.Contains(t, []string{"present", "spawned"}, statuses[0], "%+v's first event", n)
		require.Equal(t, "stopped", statuses[len(statuses)-1], "%+v outlived its system", n)
	}
}

// checkAllHistories checks the history of every continuable child.
func checkAllHistories(t require.TestingT, events []streamEvent) {
	for _, sc := range []string{"subagents", "crash"} {
		children := continuableChildren(of(events, sc))
		require.NotEmpty(t, children, "scenario %s has no continuable child", sc)
		for _, child := range children {
			checkHistories(t, of(events, sc), child)
		}
	}
}

// checkSummary: every scenario ran, every promise event is kept, and the summary
// agrees with the promise events.
func checkSummary(t require.TestingT, events []streamEvent) {
	last := events[len(events)-1]
	require.Equal(t, "summary", last.Kind)
	require.NotNil(t, last.Summary)
	require.Equal(t, []string{"jobs", "notices", "subagents", "crash", "workflow"}, last.Summary.Scenarios)
	require.Empty(t, last.Summary.Failed, "scenarios stopped early")
	kept := map[string]int{}
	for _, ev := range events {
		if ev.Kind == "promise" {
			require.NotNil(t, ev.OK, "promise %q without ok", ev.Promise)
			require.True(t, *ev.OK, "broken promise %q: %s", ev.Promise, ev.Detail)
			kept[ev.Scenario]++
		}
	}
	for _, sc := range last.Summary.Scenarios {
		require.Positive(t, kept[sc], "scenario %s checked no promise", sc)
	}
	total := 0
	for _, n := range kept {
		total += n
	}
	require.Equal(t, total, last.Summary.Kept)
	require.Zero(t, last.Summary.Broken)
}

type key struct {
	scenario string
	system   int
	job      string
}

// checkSettlements: every job started settles exactly once; no job settles twice.
func checkSettlements(t require.TestingT, events []streamEvent) {
	started, settled := map[key]bool{}, map[key]int{}
	perScenario := map[string]int{}
	for _, ev := range events {
		k := key{ev.Scenario, ev.System, ev.Job}
		switch ev.Kind {
		case "job-started":
			started[k] = true
			perScenario[ev.Scenario]++
		case "job-settled":
			settled[k]++
		}
	}
	for _, sc := range []string{"jobs", "notices", "subagents", "workflow"} {
		require.Positive(t, perScenario[sc], "scenario %s started no job", sc)
	}
	for k := range started {
		require.Equal(t, 1, settled[k], "settlements of %+v", k)
	}
	for k, n := range settled {
		require.Equal(t, 1, n, "settlements of %+v", k)
	}
}

// checkNotices, wherever the job tools are mounted (a mount event with a wake
// budget): a settled job the model did not know about gets exactly one notice, one
// it knew about (reported) none; a human's kill is told with its reason, the
// model's own kill is not told; the lanes follow the wake budget and never exceed it.
func checkNotices(t require.TestingT, events []streamEvent) {
	budget := map[key]int{} // (scenario, system) → maxConsecutiveWakes
	notices := map[key][]streamEvent{}
	for _, ev := range events {
		switch {
		case ev.Kind == "mount" && ev.Budget > 0:
			budget[key{ev.Scenario, ev.System, ""}] = ev.Budget
		case ev.Kind == "notice" && ev.Job != "":
			k := key{ev.Scenario, ev.System, ev.Job}
			notices[k] = append(notices[k], ev)
		}
	}
	require.NotEmpty(t, budget, "no system mounted the job tools")
	causes := map[string]int{}
	for _, ev := range events {
		if ev.Kind != "job-settled" || budget[key{ev.Scenario, ev.System, ""}] == 0 {
			continue
		}
		require.NotNil(t, ev.Reported, "%s: settled without reported", ev.Job)
		got := notices[key{ev.Scenario, ev.System, ev.Job}]
		if *ev.Reported {
			require.Empty(t, got, "%s/%s: the model knew, yet was told", ev.Scenario, ev.Job)
		} else {
			require.Len(t, got, 1, "%s/%s: notices of a settlement the model did not know", ev.Scenario, ev.Job)
		}
		causes[ev.Cause]++
		switch ev.Cause {
		case "human-kill":
			require.Equal(t, "killed", ev.Status)
			require.Len(t, got, 1, "a human's kill is told to the model")
			if strings.HasPrefix(ev.Job, "workflow-") { // a workflow job has no signal
				require.Contains(t, got[0].Text, "[status: killed, cancelled by the user]")
			} else {
				require.Contains(t, got[0].Text, "[status: killed, signal: SIGTERM; cancelled by the user]")
			}
		case "model-kill":
			require.Empty(t, got, "the model's own kill is not told to it")
		}
	}
	require.Positive(t, causes["human-kill"], "no human kill")
	require.Positive(t, causes["model-kill"], "no model kill")

	// The lanes of the notices scenario, whose agent idles throughout: a notice wakes
	// it (followup) while its budget lasts, else waits in its inbox (inject); a
	// claimed user message resets the budget.
	notice := of(events, "notices")
	wakes, lanes := 0, map[string]int{}
	limit := budget[key{"notices", 1, ""}]
	require.Positive(t, limit)
	for _, ev := range notice {
		switch {
		case ev.Kind == "inbox-claimed":
			wakes = 0
			lanes["claim"]++
		case ev.Kind == "notice" && ev.Job != "":
			want := "inject"
			if wakes < limit {
				want = "followup"
				wakes++
			}
			require.Equal(t, want, ev.Lane, "notice of %s (seq %d)", ev.Job, ev.Seq)
			lanes[ev.Lane]++
		}
	}
	require.Positive(t, lanes["inject"], "the wake budget was never spent")
	require.Positive(t, lanes["claim"], "no claimed user message reset the budget")

	// Everywhere: never more wakes in a row than the budget.
	row := map[string]int{}
	for _, ev := range events {
		k := fmt.Sprintf("%s/%d/%s", ev.Scenario, ev.System, ev.Who)
		switch {
		case ev.Kind == "inbox-claimed":
			row[k] = 0
		case ev.Kind == "notice" && ev.Job != "" && ev.Lane == "followup":
			row[k]++
			require.LessOrEqual(t, row[k], budget[key{ev.Scenario, ev.System, ""}], "%s woken too often in a row", k)
		}
	}
}

// checkCrashRestart: the crash scenario's Activation crashed mid-turn, the message
// in hand was answered ACTIVATION_FAILED, the Activation restarted at a higher
// epoch, the cut-off turn was recorded aborted and not re-run, and the messages
// parked behind it ran after the restart, in order, to completion.
func checkCrashRestart(t require.TestingT, events []streamEvent) {
	evs := of(events, "crash")
	crashes := filter(evs, func(ev streamEvent) bool { return ev.Kind == "activation-crash" })
	require.Len(t, crashes, 1)
	crash := crashes[0]
	child := crash.Child
	require.NotEmpty(t, child)

	// The turn in flight at the crash: started, not ended, before it.
	var inFlight *streamEvent
	for i, ev := range evs {
		if ev.Seq > crash.Seq || ev.Kind != "turn" || ev.Who != child {
			continue
		}
		if ev.Status == "started" {
			inFlight = &evs[i]
		} else {
			inFlight = nil
		}
	}
	require.NotNil(t, inFlight, "the crash did not happen mid-turn")
	var parked []string
	for _, ev := range evs {
		if ev.Kind == "tool" && ev.Status == "send_message" && ev.Child == child && ev.Code == "" &&
			ev.Seq > inFlight.Seq && ev.Seq < crash.Seq {
			parked = append(parked, ev.Detail)
		}
	}
	require.NotEmpty(t, parked, "no message waited behind the crashed turn")

	after := func(seq int, match func(streamEvent) bool) *streamEvent {
		for i, ev := range evs {
			if ev.Seq > seq && match(ev) {
				return &evs[i]
			}
		}
		return nil
	}
	refused := after(crash.Seq, func(ev streamEvent) bool { return ev.Kind == "refused" && ev.Child == child })
	require.NotNil(t, refused, "the message in hand was not answered")
	require.Equal(t, "ACTIVATION_FAILED", refused.Code)
	restart := after(crash.Seq, func(ev streamEvent) bool { return ev.Kind == "activation-restart" && ev.Child == child })
	require.NotNil(t, restart, "no restart after the crash")
	require.Greater(t, restart.Epoch, crash.Epoch, "the restart took a higher epoch")
	aborted := after(restart.Seq, func(ev streamEvent) bool {
		return ev.Kind == "turn" && ev.Who == child && ev.Status == "aborted-by-crash"
	})
	require.NotNil(t, aborted, "the cut-off turn was not recorded aborted")

	var ran []string
	ended := map[string]string{}
	last := ""
	for _, ev := range evs {
		if ev.Kind != "turn" || ev.Who != child {
			continue
		}
		if ev.Status == "started" {
			if ev.Seq > restart.Seq {
				ran = append(ran, ev.Text)
			} else {
				require.NotContains(t, parked, ev.Text, "a parked message ran before the restart")
			}
			last = ev.Text
			continue
		}
		if ev.Seq > restart.Seq && ev.Status != "aborted-by-crash" {
			ended[last] = ev.Status
		}
	}
	require.GreaterOrEqual(t, len(ran), len(parked))
	require.Equal(t, parked, ran[:len(parked)], "the parked messages ran first after the restart, in order")
	require.NotContains(t, ran, inFlight.Text, "the cut-off turn was re-run")
	for _, m := range parked {
		require.Equal(t, "completed", ended[m], "parked message %q", m)
	}
}

// checkResumeAfterRestart: in the subagents scenario, the whole system restarted
// and the continuable child resumed from the sessions file at a higher epoch; the
// message parked by the interrupt before the restart ran first after it.
func checkResumeAfterRestart(t require.TestingT, events []streamEvent) {
	evs := of(events, "subagents")
	restarts := filter(evs, func(ev streamEvent) bool { return ev.Kind == "system" && ev.Status == "restarted" })
	require.Len(t, restarts, 1)
	gen := restarts[0].System
	require.Equal(t, 2, gen)

	children := continuableChildren(evs)
	require.Len(t, children, 1)
	child := children[0]
	var epochBefore, epochAfter uint64
	for _, ev := range evs {
		if ev.Kind == "session-activated" && ev.Child == child {
			if ev.System < gen {
				epochBefore = max(epochBefore, ev.Epoch)
			} else if epochAfter == 0 {
				epochAfter = ev.Epoch
			}
		}
	}
	require.Positive(t, epochBefore)
	require.Greater(t, epochAfter, epochBefore, "the resumed child took a higher epoch")

	interrupt := filter(evs, func(ev streamEvent) bool { return ev.Kind == "interrupt" && ev.Child == child })
	require.Len(t, interrupt, 1)
	startedBefore := map[string]bool{}
	var abortedAfterInterrupt bool
	for _, ev := range evs {
		if ev.Kind == "turn" && ev.Who == child && ev.System < gen {
			startedBefore[ev.Text] = startedBefore[ev.Text] || ev.Status == "started"
			abortedAfterInterrupt = abortedAfterInterrupt || ev.Status == "aborted" && ev.Seq > interrupt[0].Seq
		}
	}
	require.True(t, abortedAfterInterrupt, "the interrupt did not stop the running turn")
	var parked, sentAfter, ranAfter []string
	for _, ev := range evs {
		switch {
		case ev.Kind == "tool" && ev.Status == "send_message" && ev.Child == child && ev.Code == "":
			if ev.System < gen && !startedBefore[ev.Detail] {
				parked = append(parked, ev.Detail)
			} else if ev.System == gen {
				sentAfter = append(sentAfter, ev.Detail)
			}
		case ev.Kind == "turn" && ev.Who == child && ev.Status == "started" && ev.System == gen:
			ranAfter = append(ranAfter, ev.Text)
		}
	}
	require.NotEmpty(t, parked, "no message was parked across the restart")
	require.NotEmpty(t, sentAfter)
	require.Equal(t, append(parked, sentAfter...), ranAfter, "after the restart: the parked messages, then the new ones")
}

// checkHistories: each turn of child was given its whole history — every input
// and every reply before it, across interrupts, crashes and restarts.
func checkHistories(t require.TestingT, evs []streamEvent, child string) {
	messages, turns := 0, 0
	for _, ev := range evs {
		if ev.Kind != "turn" || ev.Who != child {
			continue
		}
		switch {
		case ev.Status == "started":
			require.NotNil(t, ev.History)
			require.Equal(t, messages, *ev.History, "turn %q of %s", ev.Text, child)
			messages++
			turns++
		case ev.Status != "aborted-by-crash" && ev.Text != "":
			messages++ // the reply
		}
	}
	require.GreaterOrEqual(t, turns, 3, "%s ran too few turns to show a history", child)
}

// continuableChildren are the children with a persisted session in evs.
func continuableChildren(evs []streamEvent) []string {
	var out []string
	for _, ev := range evs {
		if ev.Kind == "session-created" && !slices.Contains(out, ev.Child) {
			out = append(out, ev.Child)
		}
	}
	return out
}

func filter(evs []streamEvent, keep func(streamEvent) bool) []streamEvent {
	var out []streamEvent
	for _, ev := range evs {
		if keep(ev) {
			out = append(out, ev)
		}
	}
	return out
}
