package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
)

// stopTimeout bounds a system's shutdown.
const stopTimeout = 10 * time.Second

// stage is what one scenario plays on: the emitter, the scenario's name, the
// sessions file, and the generation of the scenario's current system.
type stage struct {
	ctx      context.Context // the run's: its end (SIGINT/SIGTERM) shuts every live system down
	out      *emitter
	scenario string
	store    string       // the sessions file (bbolt)
	system   atomic.Int32 // generation of the current system; a restart makes a new one

	// causes names who ended a job, for its settled event; the scenario writes it
	// before acting, the registry's observer reads it.
	causes struct {
		sync.Mutex
		m map[jobKey]string
	}
	broken []*brokenPromise // promises this scenario broke (only the scenario goroutine checks)

	// trees follows each live system's supervision tree, from newSystem to shutdown
	// (both called on the scenario's goroutine only).
	trees map[*troupe.System]*lifecycle
	// onSignal holds, per live system, the stop of its shutdown on the run's end
	// (context.AfterFunc); newSystem and shutdown use it, on the scenario's goroutine.
	onSignal map[*troupe.System]func() bool
}

func newStage(ctx context.Context, out *emitter, scenario, store string) *stage {
	st := &stage{ctx: ctx, out: out, scenario: scenario, store: store}
	st.causes.m = map[jobKey]string{}
	st.trees = map[*troupe.System]*lifecycle{}
	st.onSignal = map[*troupe.System]func() bool{}
	return st
}

// emit stamps ev with the scenario and, unless set, the current system generation.
func (st *stage) emit(ev Event) {
	ev.Scenario = st.scenario
	if ev.System == 0 {
		ev.System = int(st.system.Load())
	}
	st.out.emit(ev)
}

func (st *stage) say(who, format string, args ...any) {
	st.emit(Event{Kind: KindNote, Who: who, Text: fmt.Sprintf(format, args...)})
}

// brokenPromise is the error of a check that failed.
type brokenPromise struct{ promise, detail string }

func (b *brokenPromise) Error() string { return b.promise + ": " + b.detail }

// check emits a promise event and, when ok is false, records and returns the
// broken promise (format and args say what broke it).
func (st *stage) check(promise string, ok bool, format string, args ...any) error {
	ev := Event{Kind: KindPromise, Promise: promise, OK: ptr(ok)}
	if ok {
		st.emit(ev)
		return nil
	}
	ev.Detail = fmt.Sprintf(format, args...)
	st.emit(ev)
	b := &brokenPromise{promise: promise, detail: ev.Detail}
	st.broken = append(st.broken, b)
	return b
}

// logger turns troupe's warnings into log events, so --json keeps stdout to events
// and the timeline shows what the library said where it said it.
func (st *stage) logger() *slog.Logger { return slog.New(&logHandler{st: st}) }

type logHandler struct {
	st    *stage
	attrs []slog.Attr
}

func (h *logHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *logHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	for _, a := range h.attrs {
		b.WriteString(" " + a.String())
	}
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	h.st.emit(Event{Kind: KindLog, Who: "troupe", Status: strings.ToLower(r.Level.String()), Text: b.String()})
	return nil
}

func (h *logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &logHandler{st: h.st, attrs: append(slices.Clip(h.attrs), as...)}
}

func (h *logHandler) WithGroup(string) slog.Handler { return h }

// newSystem starts the scenario's next system, with an OnJobDone observer that
// emits every settlement: the registry calls it once per settled job, on its actor.
func (st *stage) newSystem() (*troupe.System, error) {
	gen := int(st.system.Add(1))
	sys, err := troupe.New(troupe.Config{Logger: st.logger()})
	if err != nil {
		return nil, err
	}
	st.onSignal[sys] = context.AfterFunc(st.ctx, func() {
		st.emit(Event{Kind: KindNote, System: gen, Who: "demo", Text: fmt.Sprintf("%s: shutting system #%d down", context.Cause(st.ctx), gen)})
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		_ = sys.Shutdown(ctx) // the scenario's own shutdown waits for this one and reports it
	})
	lc, err := st.followTree(sys, gen)
	if err != nil {
		st.shutdown(sys)
		return nil, err
	}
	st.trees[sys] = lc
	if _, err := sys.Jobs().OnJobDone(context.Background(), sys.Scope(), func(s *messages.JobSnapshot, o registry.Owner) {
		st.emit(Event{Kind: KindJobSettle, System: gen, Who: o.Session, Job: s.Id, Status: s.Status.Name(),
			Detail: s.GetDetail(), Cause: st.causeOf(gen, s.Id), Reported: ptr(s.Reported)})
	}); err != nil {
		st.shutdown(sys)
		return nil, err
	}
	status := "started"
	if gen > 1 {
		status = "restarted"
	}
	st.emit(Event{Kind: KindSystem, System: gen, Status: status})
	return sys, nil
}

// shutdown stops sys (its jobs torn down, its actors stopped) and says so.
func (st *stage) shutdown(sys *troupe.System) {
	if stop := st.onSignal[sys]; stop != nil {
		stop()
		delete(st.onSignal, sys)
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if err := sys.Shutdown(ctx); err != nil {
		st.emit(Event{Kind: KindLog, Who: "troupe", Status: "error", Text: "shutdown: " + err.Error()})
	}
	lc := st.trees[sys]
	delete(st.trees, sys)
	if lc != nil {
		st.finishTree(lc)
	}
	st.emit(Event{Kind: KindSystem, Status: "shut down"})
}

// cause records who is about to end job id of the current system.
func (st *stage) cause(id, cause string) {
	st.causes.Lock()
	defer st.causes.Unlock()
	st.causes.m[jobKey{int(st.system.Load()), id}] = cause
}

// causeOf is who ended a job: the cause recorded before acting on it, or its own
// producer when nobody acted.
func (st *stage) causeOf(gen int, id string) string {
	st.causes.Lock()
	defer st.causes.Unlock()
	if c, ok := st.causes.m[jobKey{gen, id}]; ok {
		return c
	}
	return causeProducer
}

// Causes of a settlement, as job-settled events name them.
const (
	causeProducer  = "producer"   // the work ended on its own
	causeKill      = "kill"       // the embedder's code killed it (registry Kill)
	causeModelKill = "model-kill" // the model's job_kill
	causeHumanKill = "human-kill" // a human's job.kill through the job-controller
	causeTeardown  = "teardown"   // its owner agent was disposed
)

// started emits a job start.
func (st *stage) started(who, id, label string) {
	st.emit(Event{Kind: KindJobStart, Who: who, Job: id, Text: label})
}

// jobKey names a job across the scenario's systems (ids restart with each system).
type jobKey struct {
	system int
	job    string
}

// checkSettlements is the settle suite's promise, over this scenario's events:
// every job it started settled exactly once, and none settled twice. Run it after
// the last system shut down (the observer has then run for every settlement).
func (st *stage) checkSettlements() error {
	started, settled := map[jobKey]bool{}, map[jobKey]int{}
	for _, ev := range st.out.events(st.scenario) {
		switch ev.Kind {
		case KindJobStart:
			started[jobKey{ev.System, ev.Job}] = true
		case KindJobSettle:
			settled[jobKey{ev.System, ev.Job}]++
		}
	}
	var bad []string
	for k := range started {
		if settled[k] != 1 {
			bad = append(bad, fmt.Sprintf("%s of system %d settled %d times", k.job, k.system, settled[k]))
		}
	}
	for k, n := range settled {
		if n > 1 && !started[k] {
			bad = append(bad, fmt.Sprintf("%s of system %d settled %d times", k.job, k.system, n))
		}
	}
	if len(started) == 0 && len(settled) == 0 {
		return nil
	}
	slices.Sort(bad)
	return st.check(fmt.Sprintf("every job started settled exactly once (%s)", plural(len(started), "job")),
		len(bad) == 0, "%s", strings.Join(bad, "; "))
}

// checkNotices is the notices suite's promise, over this scenario's events, for
// every system where the job tools were mounted: a settled job the model did not
// already know about (reported false) gets exactly one notice, one it knew about
// gets none; and no agent was woken more than its wake budget between two claimed
// user messages.
func (st *stage) checkNotices() error {
	events := st.out.events(st.scenario)
	budget := map[int]int{} // system → maxConsecutiveWakes, where tool-jobs is mounted
	notices := map[jobKey]int{}
	for _, ev := range events {
		switch {
		case ev.Kind == KindMount:
			budget[ev.System] = ev.Budget
		case ev.Kind == KindNotice && ev.Job != "":
			notices[jobKey{ev.System, ev.Job}]++
		}
	}
	if len(budget) == 0 || !slices.ContainsFunc(events, func(ev Event) bool { return ev.Kind == KindJobSettle }) {
		return nil
	}
	var bad []string
	settled := 0
	for _, ev := range events {
		if _, mounted := budget[ev.System]; !mounted || ev.Kind != KindJobSettle || ev.Who == "" {
			continue
		}
		settled++
		want := 1
		if *ev.Reported {
			want = 0
		}
		if n := notices[jobKey{ev.System, ev.Job}]; n != want {
			bad = append(bad, fmt.Sprintf("%s (reported %v) got %d notices, want %d", ev.Job, *ev.Reported, n, want))
		}
	}
	if err := st.check(fmt.Sprintf("settled == notified + already known to the model (%s)", plural(settled, "owned job")),
		len(bad) == 0, "%s", strings.Join(bad, "; ")); err != nil {
		return err
	}
	wakes, worst, woken := map[string]int{}, 0, false // consecutive job-notice followups per system/agent
	for _, ev := range events {
		key := fmt.Sprintf("%d/%s", ev.System, ev.Who)
		switch {
		case ev.Kind == KindClaim:
			wakes[key] = 0
		case ev.Kind == KindNotice && ev.Job != "" && ev.Lane == "followup":
			wakes[key]++
			woken = true
			if wakes[key] > budget[ev.System] {
				bad = append(bad, fmt.Sprintf("%s woken %d times in a row (budget %d)", ev.Who, wakes[key], budget[ev.System]))
			}
			worst = max(worst, wakes[key])
		}
	}
	if !woken {
		return nil
	}
	return st.check(fmt.Sprintf("the wake budget was never exceeded (at most %d wakes in a row)", worst),
		len(bad) == 0, "%s", strings.Join(bad, "; "))
}
