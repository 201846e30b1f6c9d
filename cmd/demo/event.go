package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"time"
)

// Kind names what an Event reports. A consumer of --json ignores the kinds and the
// fields it does not know, so a kind can be added (the supervision tree's lifecycle
// events, for one) without breaking it.
type Kind string

// The kinds of events the demo emits, with the fields each one sets. Every event
// has seq, elapsedMs and kind; all but run and summary have scenario and system.
const (
	KindRun       Kind = "run"                // path: the sessions file; detail: fresh, or the previous run's removed
	KindScenario  Kind = "scenario"           // text: what the scenario shows
	KindSystem    Kind = "system"             // status: started | restarted (generation > 1) | shut down
	KindMount     Kind = "mount"              // text: what was mounted; detail; budget: maxConsecutiveWakes (job tools)
	KindAgent     Kind = "agent"              // who: the session; status: spawned | disposed
	KindNote      Kind = "note"               // who; text: narration
	KindLog       Kind = "log"                // who: troupe; status: the level; text: what the library logged
	KindJobStart  Kind = "job-started"        // who: the owner; job; text: the label
	KindJobOutput Kind = "job-output"         // who; job; status: the job's when read; text: the output read
	KindJobInput  Kind = "job-input"          // who; job; text: what was typed at a PTY prompt
	KindJobKill   Kind = "job-kill"           // who: the killer; job; detail: the reason; status: the kill's result
	KindJobSettle Kind = "job-settled"        // who: the owner; job; status; detail; cause; reported (the model knew)
	KindRefused   Kind = "refused"            // who; job or child; code; text: the error
	KindNotice    Kind = "notice"             // who: the recipient; lane; job or child: what it is about; text
	KindClaim     Kind = "inbox-claimed"      // who: the agent that claimed a user message (its wake budget resets)
	KindTool      Kind = "tool"               // who; status: the tool; child, detail: its target and argument; text: its result; code on error
	KindSubagent  Kind = "subagent-result"    // who; status: foreground | background; job (background); text: the answer
	KindInterrupt Kind = "interrupt"          // who; child (emitted as the interrupt is sent; a tool event has the answer)
	KindTurn      Kind = "turn"               // who, child: the child session; status: started (text: input; history) | its stop reason (text: reply) | aborted-by-crash (epoch)
	KindCreated   Kind = "session-created"    // who: the parent session; child
	KindActivated Kind = "session-activated"  // who, child; epoch; status: new session | resumed from the file …
	KindCrash     Kind = "activation-crash"   // who, child; epoch; text: the message in hand; detail: how the crash was injected
	KindRestart   Kind = "activation-restart" // who, child; epoch: the restarted incarnation's
	KindPromise   Kind = "promise"            // promise: what was checked; ok; detail: what broke it
	KindError     Kind = "error"              // text: why the scenario stopped early
	KindSummary   Kind = "summary"            // summary
	// KindLifecycle is the supervision tree's (System.Tree): who: the node (kind/id);
	// status: present (in the tree when the demo subscribed) | spawned | settled |
	// restarted | stopped; text: its parent (present, spawned); detail: a settled
	// job's status (detail), cause …, or a stop's or restart's cause. Printed in the
	// timeline only with --lifecycle.
	KindLifecycle Kind = "lifecycle"
)

// Event is one thing the demo shows: one line of the human timeline, one JSON
// object of --json. Kind says which fields are set; the rest are left out.
type Event struct {
	Seq       int     `json:"seq"`
	ElapsedMs float64 `json:"elapsedMs"`
	Kind      Kind    `json:"kind"`
	Scenario  string  `json:"scenario,omitempty"`
	// System is the generation of the scenario's system: 1, then 2 after a restart
	// (job ids restart with each system).
	System   int      `json:"system,omitempty"`
	Who      string   `json:"who,omitempty"`
	Job      string   `json:"job,omitempty"`
	Child    string   `json:"child,omitempty"`
	Status   string   `json:"status,omitempty"`
	Detail   string   `json:"detail,omitempty"`
	Cause    string   `json:"cause,omitempty"`
	Reported *bool    `json:"reported,omitempty"`
	Lane     string   `json:"lane,omitempty"`
	Code     string   `json:"code,omitempty"`
	Text     string   `json:"text,omitempty"`
	Epoch    uint64   `json:"epoch,omitempty"`
	History  *int     `json:"history,omitempty"` // a turn's earlier messages
	Budget   int      `json:"budget,omitempty"`
	Path     string   `json:"path,omitempty"`
	Promise  string   `json:"promise,omitempty"`
	OK       *bool    `json:"ok,omitempty"`
	Summary  *Summary `json:"summary,omitempty"`
}

// Summary closes a run.
type Summary struct {
	Scenarios []string `json:"scenarios"`
	Kept      int      `json:"kept"`
	Broken    int      `json:"broken"`
	Failed    []string `json:"failed"` // scenarios that stopped early on an error
	Store     string   `json:"store"`  // the sessions file; "" if no scenario made one
	// Interrupted is the signal that cut the run short ("" when none did).
	Interrupted string `json:"interrupted,omitempty"`
}

func ptr[T any](v T) *T { return &v }

// emitter writes events as they happen, as JSON lines or as a timeline, and keeps
// them for the demo's own checks. It is safe for concurrent use: observers, owner
// actors and turn goroutines all emit.
type emitter struct {
	start time.Time
	json  bool
	color bool
	// lifecycle prints the supervision tree's lifecycle events in the timeline too
	// (--lifecycle); --json always has them.
	lifecycle bool

	mu struct {
		sync.Mutex
		out    io.Writer // guarded: one line at a time
		seq    int
		events []Event // everything emitted, in seq order
	}
}

func newEmitter(out io.Writer, asJSON, color bool) *emitter {
	e := &emitter{start: time.Now(), json: asJSON, color: color && !asJSON}
	e.mu.out = out
	return e
}

// emit stamps ev with its sequence number and elapsed time, records it and writes it.
func (e *emitter) emit(ev Event) Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.mu.seq++
	ev.Seq = e.mu.seq
	ev.ElapsedMs = math.Round(float64(time.Since(e.start).Microseconds())/100) / 10
	e.mu.events = append(e.mu.events, ev)
	if e.json {
		line, err := json.Marshal(ev)
		if err != nil { // every field is a plain value: this cannot happen
			panic(err)
		}
		fmt.Fprintf(e.mu.out, "%s\n", line)
		return ev
	}
	if ev.Kind == KindLifecycle && !e.lifecycle {
		return ev
	}
	fmt.Fprintln(e.mu.out, e.render(ev))
	return ev
}

// events returns a copy of the events emitted so far for scenario.
func (e *emitter) events(scenario string) []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Event
	for _, ev := range e.mu.events {
		if ev.Scenario == scenario {
			out = append(out, ev)
		}
	}
	return out
}

// colorOK reports whether f is a terminal that should get ANSI colours: a
// character device, and NO_COLOR unset or empty (https://no-color.org).
func colorOK(f *os.File) bool {
	if os.Getenv("NO_COLOR") != "" {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// ANSI styles of the timeline.
const (
	reset  = "\x1b[0m"
	bold   = "\x1b[1m"
	dim    = "\x1b[2m"
	red    = "\x1b[31m"
	green  = "\x1b[32m"
	yellow = "\x1b[33m"
	blue   = "\x1b[34m"
	purple = "\x1b[35m"
	cyan   = "\x1b[36m"
)

func (e *emitter) paint(style, s string) string {
	if !e.color || s == "" {
		return s
	}
	return style + s + reset
}

// whoStyle colours the actor column: the runtime in blue, humans in yellow, the
// library's own log in purple, agents in green, continuable children in cyan.
func whoStyle(ev Event) string {
	switch ev.Who {
	case "system", "store":
		return blue
	case "human":
		return yellow
	case "troupe":
		return purple
	}
	if ev.Kind == KindTurn || ev.Kind == KindActivated || ev.Kind == KindRestart || ev.Kind == KindCrash {
		return cyan
	}
	return green
}

// render is an event's timeline line.
func (e *emitter) render(ev Event) string {
	switch ev.Kind {
	case KindScenario:
		return "\n" + e.paint(bold, fmt.Sprintf("== %s: %s", ev.Scenario, ev.Text))
	case KindSummary:
		return e.renderSummary(ev.Summary)
	}
	who := ev.Who
	if who == "" {
		who = "system"
		ev.Who = who
	}
	text := e.sentence(ev)
	switch {
	case ev.Kind == KindPromise && ev.OK != nil && *ev.OK:
		text = e.paint(green, "✓ "+text)
	case ev.Kind == KindPromise, ev.Kind == KindError:
		text = e.paint(bold+red, "✗ "+text)
	case ev.Kind == KindCrash, ev.Kind == KindLog:
		text = e.paint(yellow, text)
	}
	return fmt.Sprintf("%s  %s %s", e.paint(dim, fmt.Sprintf("%8.1fms", ev.ElapsedMs)),
		e.paint(whoStyle(ev), fmt.Sprintf("%-12s", who)), text)
}

// sentence says an event in words.
func (e *emitter) sentence(ev Event) string {
	switch ev.Kind {
	case KindRun:
		return fmt.Sprintf("sessions file %s (%s)", ev.Path, ev.Detail)
	case KindSystem:
		return fmt.Sprintf("system #%d %s", ev.System, ev.Status)
	case KindMount:
		return fmt.Sprintf("mounted %s (%s)", ev.Text, ev.Detail)
	case KindAgent:
		return fmt.Sprintf("agent %q %s", ev.Who, ev.Status)
	case KindJobStart:
		return fmt.Sprintf("started %s (%s)", ev.Job, ev.Text)
	case KindJobOutput:
		return fmt.Sprintf("read %s (%s): %q", ev.Job, ev.Status, ev.Text)
	case KindJobInput:
		return fmt.Sprintf("answers %s's prompt: %q", ev.Job, ev.Text)
	case KindJobKill:
		return fmt.Sprintf("kills %s (reason %q) → %s", ev.Job, ev.Detail, ev.Status)
	case KindJobSettle:
		detail := ""
		if ev.Detail != "" {
			detail = ": " + ev.Detail
		}
		return fmt.Sprintf("%s settled %s%s [cause: %s; the model already knows: %v]",
			ev.Job, ev.Status, detail, ev.Cause, ev.Reported != nil && *ev.Reported)
	case KindRefused:
		return fmt.Sprintf("refused (%s): %s", ev.Code, ev.Text)
	case KindNotice:
		return fmt.Sprintf("%s %s", e.paint(bold, fmt.Sprintf("%-9s", ev.Lane+":")), ev.Text)
	case KindClaim:
		return "claims a user message: the wake budget resets"
	case KindTool:
		var args []string
		if ev.Child != "" {
			args = append(args, ev.Child)
		}
		if ev.Detail != "" {
			args = append(args, fmt.Sprintf("%q", ev.Detail))
		}
		call := ev.Status + "(" + strings.Join(args, ", ") + ")"
		if ev.Code != "" {
			return fmt.Sprintf("%s → %s: %s", call, ev.Code, ev.Text)
		}
		return fmt.Sprintf("%s → %q", call, ev.Text)
	case KindSubagent:
		return fmt.Sprintf("subagent (%s) answered: %q", ev.Status, ev.Text)
	case KindInterrupt:
		return fmt.Sprintf("interrupts %s's running turn", ev.Child)
	case KindTurn:
		switch ev.Status {
		case "started":
			return fmt.Sprintf("turn started (%s before it): %q", plural(*ev.History, "message"), ev.Text)
		case "aborted-by-crash":
			return fmt.Sprintf("the turn the crash cut off is recorded aborted at epoch %d, not re-run", ev.Epoch)
		}
		if ev.Text == "" {
			return fmt.Sprintf("turn ended %s", ev.Status)
		}
		return fmt.Sprintf("turn ended %s: %q", ev.Status, ev.Text)
	case KindCreated:
		return fmt.Sprintf("session %s created in the store (parent %s)", ev.Child, ev.Who)
	case KindActivated:
		return fmt.Sprintf("activated at epoch %d (%s)", ev.Epoch, ev.Status)
	case KindCrash:
		return fmt.Sprintf("CRASH at epoch %d while journaling %q — %s", ev.Epoch, ev.Text, ev.Detail)
	case KindRestart:
		return fmt.Sprintf("restarted from the store at epoch %d", ev.Epoch)
	case KindPromise:
		if ev.OK != nil && *ev.OK {
			return fmt.Sprintf("promise kept: %s", ev.Promise)
		}
		return fmt.Sprintf("BROKEN PROMISE: %s — %s", ev.Promise, ev.Detail)
	case KindError:
		return "scenario stopped: " + ev.Text
	case KindLog:
		return fmt.Sprintf("%s: %s", ev.Status, ev.Text)
	case KindNote:
		return ev.Text
	case KindWorkflow:
		switch ev.Status {
		case "agent-start":
			return fmt.Sprintf("workflow: agent %q started", ev.Child)
		case "agent-end":
			return fmt.Sprintf("workflow: agent %q %s", ev.Child, ev.Detail)
		case "end":
			if ev.Text != "" {
				return fmt.Sprintf("workflow: run ended %s (%s)", ev.Detail, ev.Text)
			}
			return "workflow: run ended " + ev.Detail
		case "start":
			return "workflow: run started"
		}
		return fmt.Sprintf("workflow %s: %q", ev.Status, ev.Text)
	}
	parts := []string{string(ev.Kind)} // a kind this renderer does not know yet
	for _, s := range []string{ev.Status, ev.Detail, ev.Text} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, " ")
}

func (e *emitter) renderSummary(s *Summary) string {
	line := fmt.Sprintf("\n%d promises kept, %d broken, in %s", s.Kept, s.Broken, strings.Join(s.Scenarios, ", "))
	if len(s.Failed) > 0 {
		line += "; stopped early: " + strings.Join(s.Failed, ", ")
	}
	if s.Interrupted != "" {
		line += "; interrupted: " + s.Interrupted
	}
	style := green
	if s.Broken > 0 || len(s.Failed) > 0 {
		style = bold + red
	}
	if s.Store == "" {
		return e.paint(style, line) + "\n(no sessions file: these scenarios keep no continuable children)"
	}
	return e.paint(style, line) + "\nsessions file kept for inspection: " + s.Store
}
