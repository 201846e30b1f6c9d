package settle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/harness"
	"github.com/troupe-rt/troupe/internal/fault"
	"github.com/troupe-rt/troupe/internal/userauth"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/test/mutation"
	"github.com/troupe-rt/troupe/troupetest"
)

// mode is how a schedule's actors are dispatched.
type mode int

const (
	deterministic mode = iota // harness.Dispatcher: one worker, seeded picks
	stress                    // troupe's default dispatcher + seeded Gosched noise
)

func (m mode) String() string {
	if m == deterministic {
		return "deterministic"
	}
	return "stress"
}

// The schedule's fixed ids and names. Ids are deterministic (a counter per kind), so
// observers can match them without sharing a variable with the test goroutine.
const (
	session     = "s"
	jobA        = "bash-1"      // the job under test
	bystanderID = "bystander-1" // holds a slot in A's bucket for the whole schedule
	limit       = 2             // MaxConcurrentJobsPerOwner: A + bystander fill a bucket
	noisePct    = 10            // TESTING.md: Gosched at ~10% of points
	cancelPanic = "cancel exploded"
	cancelError = "cancel refused"
	maxOffset   = 40 // an operation's start offset in the race, in yields
)

// Budgets. They bound waiting for a reply that should come; none orders events.
const (
	longWait      = 10 * time.Second       // a wait that must end by settlement
	hangBudget    = 30 * time.Second       // all of a schedule's operations must return by then (planted bug or not)
	shutdownLimit = 10 * time.Second       // a schedule's system must shut down by then
	shortWaitMin  = 200 * time.Microsecond // short waits time out during the race
)

// schedule is one seeded run of the race.
type schedule struct {
	index uint64
	seed  uint64
	mode  mode
	plant string // the planted bug (fault.Plant), "" for none
}

// verdict is what checking a schedule found.
type verdict struct {
	violations []string
	fired      []mutation.Oracle // the named oracles among the violations
	history    string
	ops        int
}

// failf records a violation that is no oracle's (a timeout, a setup error).
func (v *verdict) failf(format string, args ...any) {
	v.violations = append(v.violations, fmt.Sprintf(format, args...))
}

// oraclef records a violation of the named oracle o.
func (v *verdict) oraclef(o mutation.Oracle, format string, args ...any) {
	v.violations = append(v.violations, fmt.Sprintf(format, args...))
	if !slices.Contains(v.fired, o) {
		v.fired = append(v.fired, o)
	}
}

// cancelMode is how the producer's Cancel behaves.
type cancelMode int

const (
	cancelReturns     cancelMode = iota // returns; the producer settles on its own
	cancelSettles                       // sends killed on Done before returning
	cancelSettlesLate                   // returns; a producer goroutine sends killed later
	cancelPanics                        // panics every time
	cancelPanicsOnce                    // panics on the first call only
	cancelErrors                        // returns an error every time
)

var cancelModeNames = [...]string{"returns", "settles", "settles-late", "panics", "panics-once", "errors"}

// doneKind is what the producer's own completion sends on Done.
type doneKind int

const (
	doneCompleted doneKind = iota
	doneFailed
	doneKilled
	doneKilledBare // killed with no detail
	doneClosed     // Done closed without a value
	doneUnknown    // a value with an unknown status
	doneTwice      // completed, then a second value (troupe reads one)
	doneLive       // a value with a live status (stopping), its output to be ignored
)

var doneKindNames = [...]string{"completed", "failed", "killed", "killed-bare", "closed", "unknown", "twice", "live"}

// producer is the job under test's producer. It records its offers in the history.
type producer struct {
	h      *harness.History
	noise  func()
	cancel cancelMode
	stream bool // a stream kind: ReadOutput present (reads consume; their text is not modelled)
	done   chan job.Outcome
	// settler, when set, is how the producer settles (Hooks.OnSettle) in place of
	// done: the outcome reaches the job actor on the offering goroutine, with no
	// Done watcher in between. A Settler cannot be closed without a value.
	settler *job.Settler
	// inline declares Cancel non-blocking (Hooks.CancelNonBlocking): the job actor
	// calls it itself instead of handing it to a runner goroutine.
	inline bool
	// busy counts the producer hooks running now (Cancel, ReadOutput); overlaps
	// counts the calls that found another one running (Hooks: one call at a time,
	// Cancel never together with ReadOutput).
	busy, overlaps atomic.Int32
	bg             *sync.WaitGroup // its own goroutines (late settles)

	mu struct {
		sync.Mutex
		sent    bool          // Done has been given its value (or closed)
		cancels []cancelEntry // every Cancel call, in order
	}
}

type cancelEntry struct {
	reason string
	failed string // the panic or error text of a failed Cancel, "" if it returned
}

func (p *producer) run() (job.Hooks, error) {
	h := job.Hooks{Cancel: p.onCancel, Done: p.done, CancelNonBlocking: p.inline}
	if p.settler != nil {
		h.Done, h.OnSettle = nil, p.settler.OnSettle
	}
	if p.stream {
		h.ReadOutput = func() (string, error) {
			defer p.enterHook()()
			p.noise()
			return "chunk", nil
		}
	}
	return h, nil
}

// offer sends the producer's one outcome; later offers are no-ops (the Done contract).
func (p *producer) offer(source string, o job.Outcome, closed bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.sent {
		return false
	}
	p.mu.sent = true
	p.h.Open(0, harness.Input{Op: harness.OpOffer, Source: source, Outcome: o, Closed: closed})
	if p.settler != nil {
		p.settler.Settle(o) // generate never draws a closed Done for a settler
		return true
	}
	if closed {
		close(p.done)
	} else {
		p.done <- o
	}
	return true
}

var killedBySignal = job.Outcome{Status: job.Killed, Detail: "signal: SIGTERM"}

// enterHook marks a producer hook running until the returned function is called.
func (p *producer) enterHook() (leave func()) {
	if p.busy.Add(1) > 1 {
		p.overlaps.Add(1)
	}
	return func() { p.busy.Add(-1) }
}

func (p *producer) onCancel(reason string) error {
	defer p.enterHook()()
	p.noise()
	p.mu.Lock()
	panics := p.cancel == cancelPanics || (p.cancel == cancelPanicsOnce && len(p.mu.cancels) == 0)
	e := cancelEntry{reason: reason}
	switch {
	case panics:
		e.failed = cancelPanic
	case p.cancel == cancelErrors:
		e.failed = cancelError
	}
	p.mu.cancels = append(p.mu.cancels, e)
	p.mu.Unlock()
	if panics {
		panic(cancelPanic)
	}
	if e.failed != "" {
		return errors.New(e.failed)
	}
	switch p.cancel {
	case cancelSettles:
		p.offer("cancel", killedBySignal, false)
	case cancelSettlesLate:
		p.bg.Go(func() {
			p.noise()
			p.offer("cancel-late", killedBySignal, false)
		})
	}
	return nil
}

// complete is the producer finishing on its own.
func (p *producer) complete(k doneKind) {
	switch k {
	case doneCompleted:
		p.offer("producer", job.Outcome{Status: job.Completed, Detail: "exit code: 0", Output: "all done"}, false)
	case doneFailed:
		p.offer("producer", job.Outcome{Status: job.Failed, Detail: "exit code: 1", Output: "boom"}, false)
	case doneKilled:
		p.offer("producer", job.Outcome{Status: job.Killed, Detail: "signal: SIGKILL"}, false)
	case doneKilledBare:
		p.offer("producer", job.Outcome{Status: job.Killed}, false)
	case doneClosed:
		p.offer("producer", job.Outcome{}, true)
	case doneUnknown:
		p.offer("producer", job.Outcome{Status: job.Status(42), Detail: "???"}, false)
	case doneLive:
		p.offer("producer", job.Outcome{Status: job.Stopping, Detail: "still going", Output: "partial"}, false)
	case doneTwice:
		if p.offer("producer", job.Outcome{Status: job.Completed, Detail: "exit code: 0", Output: "first"}, false) {
			second := job.Outcome{Status: job.Failed, Detail: "second outcome"}
			if p.settler != nil {
				p.settler.Settle(second) // ignored: only the first counts
			} else {
				p.done <- second // never read (room for 2)
			}
		}
	}
}

// teardownOutput is what the teardown with reason did to the producer's Cancel.
func (p *producer) teardownOutput(reason string) (harness.Output, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out harness.Output
	n := 0
	for _, c := range p.mu.cancels {
		if c.reason != reason {
			continue
		}
		n++
		out.Cancel = harness.CancelReturned
		if c.failed != "" {
			out.Cancel, out.PanicMsg = harness.CancelPanicked, c.failed
		}
	}
	if n > 1 {
		return out, fmt.Errorf("teardown %q called Cancel %d times", reason, n)
	}
	return out, nil
}

func (p *producer) cancelCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.mu.cancels)
}

// action is one racing operation of a schedule.
type action struct {
	name string
	run  func()
}

// world is one schedule's running system and what it records.
type world struct {
	sc      schedule
	rng     *rand.Rand
	noise   func()
	sys     *troupe.System
	agent   *owner.Agent // nil: A is unowned
	caller  registry.Caller
	h       *harness.History
	prod    *producer
	bystand *troupetest.Producer

	announces   atomic.Int32 // onJobDone calls for A
	announced   atomic.Pointer[messages.JobSnapshot]
	ownerGone   atomic.Bool // owner teardown ran (A's owner)
	serviceGone atomic.Bool // service disposal ran
	clients     atomic.Int32
	bg          sync.WaitGroup // producer and helper goroutines
}

func (w *world) client() int { return int(w.clients.Add(1)) }

func outputOf(snap *messages.JobSnapshot, err error) harness.Output {
	return harness.Output{Err: harness.ErrOf(err), HasSnap: snap != nil, Snap: harness.SnapOf(snap)}
}

func (w *world) kill(reason string, noClaim bool) action {
	return action{fmt.Sprintf("kill(%q,noClaim=%v)", reason, noClaim), func() {
		end := w.h.Call(w.client(), harness.Input{Op: harness.OpKill, Reason: reason, NoClaim: noClaim})
		res, snap, err := w.sys.Jobs().Kill(context.Background(), jobA, w.caller, registry.KillOptions{Reason: reason, NoClaim: noClaim})
		out := outputOf(snap, err)
		out.Kill = res
		end(out)
	}}
}

type waitCtx int

const (
	waitPlain waitCtx = iota
	waitPreAborted
	waitAbortedDuring
)

func (w *world) wait(timeout time.Duration, how waitCtx) action {
	return action{fmt.Sprintf("wait(%v,ctx=%d)", timeout, how), func() {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		switch how {
		case waitPreAborted:
			cancel()
		case waitAbortedDuring:
			w.bg.Go(func() {
				w.noise()
				w.noise()
				cancel()
			})
		}
		end := w.h.Call(w.client(), harness.Input{Op: harness.OpWait})
		snap, err := w.sys.Jobs().Wait(ctx, jobA, timeout, w.caller)
		end(outputOf(snap, err))
	}}
}

func (w *world) read() action {
	return action{"read", func() {
		end := w.h.Call(w.client(), harness.Input{Op: harness.OpRead, Stream: w.prod.stream})
		text, snap, err := w.sys.Jobs().Read(context.Background(), jobA, w.caller)
		out := outputOf(snap, err)
		out.Text = text
		end(out)
	}}
}

func (w *world) get() action {
	return action{"get", func() {
		end := w.h.Call(w.client(), harness.Input{Op: harness.OpGet})
		snap, err := w.sys.Jobs().Get(context.Background(), jobA, w.caller)
		end(outputOf(snap, err))
	}}
}

// teardown records the cancel-for-teardown reaching A and (if it removes A's
// record) the removal, both within the disposal's call.
func (w *world) teardown(name, reason string, removes bool, dispose func() error) action {
	return action{name, func() {
		c := w.client()
		endT := w.h.Call(c, harness.Input{Op: harness.OpTeardown, Reason: reason})
		var endR func(harness.Output)
		if removes {
			endR = w.h.Call(c, harness.Input{Op: harness.OpRemove})
		}
		err := dispose()
		out, cerr := w.prod.teardownOutput(reason)
		if err != nil || cerr != nil {
			// Recorded as an impossible teardown so the check fails with the history.
			out.Cancel, out.PanicMsg = harness.CancelPanicked, fmt.Sprintf("dispose: %v; %v", err, cerr)
		}
		endT(out)
		if endR != nil {
			endR(harness.Output{})
		}
	}}
}

// generate draws the schedule: the producer's behaviour and the racing actions.
func (w *world) generate() []action {
	r := w.rng
	k := doneKind(r.IntN(len(doneKindNames)))
	if k == doneClosed && w.prod.settler != nil {
		k = doneUnknown // a Settler has no "closed without a value"
	}
	acts := []action{{"producer-done(" + doneKindNames[k] + ")", func() { w.prod.complete(k) }}}
	ownerTeardown, serviceDispose := false, false
	for n := 2 + r.IntN(6); n > 0; n-- {
		switch x := r.IntN(100); {
		case x < 30:
			reasons := []string{"", "stop it", "cancelled by the user"}
			acts = append(acts, w.kill(reasons[r.IntN(len(reasons))], r.IntN(3) == 0))
		case x < 55:
			timeout := longWait
			if r.IntN(10) < 3 {
				timeout = shortWaitMin + time.Duration(r.IntN(2000))*time.Microsecond
			}
			how := waitPlain
			switch x := r.IntN(20); {
			case x < 3:
				how = waitPreAborted
			case x < 8:
				how = waitAbortedDuring
			}
			acts = append(acts, w.wait(timeout, how))
		case x < 68:
			acts = append(acts, w.read())
		case x < 80:
			acts = append(acts, w.get())
		case x < 93:
			if !ownerTeardown && w.agent != nil {
				ownerTeardown = true
				a := w.agent
				acts = append(acts, w.teardown("owner-teardown", job.ReasonOwnerDisposed, true, func() error {
					defer w.ownerGone.Store(true)
					return a.Dispose(context.Background())
				}))
			}
		default:
			if !serviceDispose {
				serviceDispose = true
				acts = append(acts, w.teardown("service-dispose", job.ReasonServiceDisposed, true, func() error {
					defer w.serviceGone.Store(true)
					return w.sys.Jobs().Dispose(context.Background())
				}))
			}
		}
	}
	r.Shuffle(len(acts), func(i, j int) { acts[i], acts[j] = acts[j], acts[i] })
	return acts
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// runSchedule runs one schedule and returns what its checks found. It never calls
// t.Fatal: the planted-bug test counts verdicts.
func runSchedule(sc schedule) (v verdict) {
	opts := []fault.Option{fault.YieldPercent(noisePct)}
	if sc.plant != "" {
		opts = append(opts, fault.Plant(sc.plant))
	}
	in := fault.New(sc.seed, opts...)
	restore := fault.Install(in)
	defer restore()

	w := &world{sc: sc, rng: rand.New(rand.NewPCG(sc.seed, sc.index)), h: &harness.History{}}
	w.noise = harness.Noise(sc.seed, noisePct)
	cfg := troupe.Config{MaxConcurrentJobsPerOwner: new(int64(limit)), Logger: quiet}
	var d *harness.Dispatcher
	if sc.mode == deterministic {
		d = harness.NewDispatcher(sc.seed)
		defer func() {
			d.Close()
			if err := d.Err(); err != nil {
				v.failf("dispatcher: %v", err)
			}
		}()
		cfg.Dispatcher = d
	}
	sys, err := troupe.New(cfg)
	if err != nil {
		v.failf("troupe.New: %v", err)
		return v
	}
	w.sys = sys
	var ops sync.WaitGroup // the racing operations
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownLimit)
		defer cancel()
		if err := sys.Shutdown(ctx); err != nil {
			v.failf("shutdown: %v", err)
		}
		ops.Wait() // after a lost reply, the shutdown is what ends them
		w.bg.Wait()
	}()
	if err := w.setup(); err != nil {
		v.failf("setup: %v", err)
		return v
	}

	// Observe A's settlement without claiming (answered at its commit).
	awaited := make(chan *messages.JobSnapshot, 1)
	endAwait := w.h.Call(w.client(), harness.Input{Op: harness.OpAwait})
	w.bg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), hangBudget)
		defer cancel()
		snap, err := sys.Jobs().AwaitSettled(ctx, jobA, w.caller)
		if harness.ErrOf(err) == harness.ErrGone {
			err = nil // the record went before the query reached it
		} else {
			endAwait(outputOf(snap, err))
		}
		if err != nil {
			snap = nil
		}
		awaited <- snap
	})

	// The operations start together, released by one gate, each after its own seeded
	// noise. In one deterministic schedule in five the dispatcher is paused while they
	// submit, so its picks choose among batches of queued runs (how much gets queued
	// is up to the Go scheduler: the yields make batches likely and order nothing).
	acts := w.generate()
	names := make([]string, len(acts))
	gate := make(chan struct{})
	for i, a := range acts {
		names[i] = a.name
		ops.Go(func() {
			<-gate
			w.noise()
			a.run()
		})
	}
	if d != nil && w.rng.IntN(5) == 0 {
		d.Pause()
		close(gate)
		for range 2 * len(acts) {
			runtime.Gosched()
		}
		d.Resume()
	} else {
		close(gate)
	}
	if !waitFor(&ops, hangBudget) {
		v.failf("operations did not all return within %v (a lost reply)", hangBudget)
		v.history = harness.DescribeHistory(w.h.Operations())
		return v // the deferred shutdown unblocks them
	}
	var winner *messages.JobSnapshot
	select {
	case winner = <-awaited:
	case <-time.After(hangBudget):
		v.failf("AwaitSettled(%s) did not return: the job never settled", jobA)
		return v
	}
	w.finalChecks(&v, in, winner)
	hist := w.h.Operations()
	v.ops = len(hist)
	if err := harness.CheckSettlement(fmt.Sprintf("settle-%s-%d-%d", sc.mode, sc.seed, sc.index), hist); err != nil {
		var le *harness.LinearizabilityError
		if errors.As(err, &le) && le.Artifact != "" {
			v.oraclef(mutation.SettleModel, "porcupine: the history is not linearizable (%s); timeline: %s", le.Result, le.Artifact)
		} else if le != nil {
			v.oraclef(mutation.SettleModel, "porcupine: the history is not linearizable (%s)", le.Result)
		} else {
			v.failf("porcupine: %v", err)
		}
	}
	if len(v.violations) > 0 {
		v.history = fmt.Sprintf("producer cancel=%s stream=%v onSettle=%v inline=%v owned=%v; actions %s\n%s",
			cancelModeNames[w.prod.cancel], w.prod.stream, w.prod.settler != nil, w.prod.inline, w.agent != nil, strings.Join(names, ", "),
			harness.DescribeHistory(hist))
	}
	return v
}

// setup attaches a controller, mounts agents, makes the owner (2 in 3 schedules),
// registers the onJobDone observer, and starts the bystander and A.
func (w *world) setup() error {
	jobs := w.sys.Jobs()
	if _, err := jobs.AttachController(context.Background(), w.sys.Scope(), "settle"); err != nil {
		return err
	}
	if _, err := jobs.MountAgents(context.Background(), w.sys.Scope()); err != nil {
		return err
	}
	if w.rng.IntN(3) != 0 {
		a, err := w.sys.NewAgent(nil, session)
		if err != nil {
			return err
		}
		if err := jobs.RegisterAgent(context.Background(), a); err != nil {
			return err
		}
		// The session's user authority, not a's: the schedule's calls go on across
		// the owner's teardown, where the oracle expects the record's removal
		// (job/not-found), and a disposed incarnation is no caller at all.
		w.agent, w.caller = a, asSession(session)
	}
	client := w.client()
	_, err := jobs.OnJobDone(context.Background(), w.sys.Scope(), func(snap *messages.JobSnapshot, _ registry.Owner) {
		if snap.Id != jobA {
			return
		}
		w.announces.Add(1)
		w.announced.Store(snap)
		w.h.Instant(client, harness.Input{Op: harness.OpAnnounce}, outputOf(snap, nil))
	})
	if err != nil {
		return err
	}
	w.bystand = troupetest.NewProducer()
	w.bystand.Kind = "bystander"
	w.bystand.OnCancel = &job.Outcome{Status: job.Killed}
	if id, err := jobs.Start(context.Background(), w.bystand.Spec(w.agent)); err != nil || id != bystanderID {
		return fmt.Errorf("start bystander: %q, %v", id, err)
	}
	w.prod = &producer{h: w.h, noise: w.noise, cancel: cancelMode(w.rng.IntN(len(cancelModeNames))),
		stream: w.rng.IntN(4) == 0, done: make(chan job.Outcome, 2), bg: &w.bg}
	if w.sc.seed&(1<<9) != 0 {
		// Half the schedules settle through OnSettle, half through Done (drawn from
		// the seed, not the rng, so each seed's schedule is the same either way).
		w.prod.settler = &job.Settler{}
	}
	// Half the schedules declare Cancel non-blocking: the job actor runs it itself
	// (again drawn from the seed).
	w.prod.inline = w.sc.seed&(1<<10) != 0
	spec := job.Spec{Kind: "bash", Label: "settle race", Owner: w.agent, Run: w.prod.run}
	if id, err := jobs.Start(context.Background(), spec); err != nil || id != jobA {
		return fmt.Errorf("start %s: %q, %v", jobA, id, err)
	}
	return nil
}

// finalChecks runs after every racing operation returned and A's settlement was
// observed: exact counters, replies after settlement, admission.
func (w *world) finalChecks(v *verdict, in *fault.Injector, winner *messages.JobSnapshot) {
	jobs := w.sys.Jobs()
	disposed := w.serviceGone.Load()
	gone := disposed || (w.agent != nil && w.ownerGone.Load())

	// One settlement commit for A, plus the bystander's if a teardown reached it.
	want := 1
	if len(w.bystand.Cancels()) > 0 {
		want = 2
	}
	if n := w.prod.overlaps.Load(); n > 0 {
		v.failf("producer hooks overlapped %d times: Cancel and ReadOutput ran together", n)
	}
	if got := in.Hits(registry.PointSettleCommit); got != want {
		v.oraclef(mutation.SettleCommits, "settlement commits: got %d, want %d (one per settled job)", got, want)
	}
	n := int(w.announces.Load())
	switch {
	case n > 1:
		v.oraclef(mutation.SettleAnnounce, "onJobDone called %d times for %s", n, jobA)
	case n == 0 && !disposed:
		v.oraclef(mutation.SettleAnnounce, "onJobDone never called for %s (service not disposed)", jobA)
	}
	if winner != nil && !winner.Status.Terminal() {
		v.oraclef(mutation.SettleReplies, "AwaitSettled returned a live snapshot: %s", harness.SnapOf(winner))
	}
	if a := w.announced.Load(); a != nil && winner != nil && !sameOutcome(a, winner) {
		v.oraclef(mutation.SettleAnnounce, "onJobDone saw %s, AwaitSettled %s", harness.SnapOf(a), harness.SnapOf(winner))
	}
	if gone {
		return
	}
	// Replies after settlement agree with the winner (the model checks them too).
	if winner != nil {
		w.get().run()
		snap, err := jobs.Get(context.Background(), jobA, w.caller)
		if err != nil || !sameOutcome(snap, winner) {
			v.oraclef(mutation.SettleReplies, "Get after settlement: %v %v, winner %s", harness.SnapOf(snap), err, harness.SnapOf(winner))
		}
		w.read().run()
		w.wait(longWait, waitPlain).run()
	}
	if n, err := jobs.Waiters(context.Background(), jobA); err != nil || n != 0 {
		v.oraclef(mutation.SettleReplies, "waiters pending after quiescence: %d, %v", n, err)
	}
	// The slot was released exactly once, also counting what A's job actor's
	// termination did: the bucket holds only the bystander, so one more start fits
	// and the next is refused.
	if err := w.awaitJobActorStopped(); err != nil {
		v.failf("quiescence: %v", err)
		return
	}
	probe := func() (string, error) {
		p := troupetest.NewProducer()
		p.Kind = "probe"
		p.OnCancel = &job.Outcome{Status: job.Killed}
		return jobs.Start(context.Background(), p.Spec(w.agent))
	}
	if _, err := probe(); err != nil {
		v.oraclef(mutation.SettleAdmission, "admission: a start after settlement failed (slot not released): %v", err)
	} else if _, err := probe(); !errors.Is(err, messages.ErrCapacity) {
		v.oraclef(mutation.SettleAdmission, "admission: a second start was not refused (slot released twice): %v", err)
	}
}

// awaitJobActorStopped waits until A's job actor has stopped (the registry poisons
// it when it commits the settlement), watching it from an actor of the test's. Its
// parent, the registry, is told of the termination in the same step as its
// watchers, just after them: a registry request sent once this returns finds it
// there (short of the stopping goroutine being descheduled between two sends for
// as long as the request takes to arrive).
func (w *world) awaitJobActorStopped() error {
	reg := w.sys.Jobs().PID()
	target := actor.NewPID(reg.Address, reg.Id+"/"+jobA)
	stopped := make(chan struct{})
	root := w.sys.Actors().Root
	watcher := root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started:
			c.Watch(target)
		case *actor.Terminated:
			if m.Who.Equal(target) {
				close(stopped)
			}
		}
	}))
	defer func() { _ = root.StopFuture(watcher).Wait() }()
	timer := time.NewTimer(hangBudget)
	defer timer.Stop()
	select {
	case <-stopped:
		return nil
	case <-timer.C:
		return fmt.Errorf("the job actor of %s still runs %v after its settlement", jobA, hangBudget)
	}
}

// sameOutcome compares what settlement fixed: status, detail and finishedAt. The
// claim (reported) may still turn true after settlement.
func sameOutcome(a, b *messages.JobSnapshot) bool {
	return a.Status == b.Status && a.GetDetail() == b.GetDetail() && (a.Detail == nil) == (b.Detail == nil) &&
		a.GetFinishedAt() == b.GetFinishedAt() && (a.FinishedAt == nil) == (b.FinishedAt == nil)
}

// waitFor waits for wg up to budget; false if the budget ran out first.
func waitFor(wg *sync.WaitGroup, budget time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	timer := time.NewTimer(budget)
	defer timer.Stop()
	select {
	case <-done:
		return true
	case <-timer.C:
		return false
	}
}

// asSession is the user authority over session (SPEC §4, as the human surface
// holds it): it sees what the session sees whichever incarnation is registered.
// Only troupe's own code can mint it (internal/userauth).
func asSession(session string) registry.Caller {
	return userauth.ForSession(session).(registry.Caller)
}
