package job

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/internal/fault"
	"github.com/troupe-rt/troupe/internal/mailbox"
	"github.com/troupe-rt/troupe/messages"
)

// Config is what the registry hands a new job actor. Hooks stay on this node. Meta
// is shared with the registry's record: it is immutable after registration.
type Config struct {
	*Meta
	Hooks Hooks
	*Shared
}

// Shared is what all job actors of one registry share.
type Shared struct {
	Registry *actor.PID
	Watcher  *Watcher
	Logger   *slog.Logger
	Now      func() int64 // Unix milliseconds
	// SettleTimeout, when positive, bounds how long a job stays stopping after a
	// kill or teardown cancel landed: then it settles failed (TextSettleTimeout).
	SettleTimeout time.Duration
	// AfterFunc arms a timer that calls f once after d, returning its stop function
	// (time.AfterFunc's Stop). nil means time.AfterFunc; tests inject a fake clock.
	AfterFunc func(d time.Duration, f func()) (stop func() bool)
	// Runners runs the producers' Cancel calls (nil: a goroutine per call).
	Runners *Runners
	// Root is the actor system's root context: what a job actor delivers its
	// producer's outcome with, from any goroutine (shared here, not held per job).
	Root *actor.RootContext
	// CallerRuns (registry Config.CallerRuns: troupe's PoolDispatcher) lets the
	// goroutines that send to an idle job actor run it: a producer's settle
	// (Hooks.SettleInline) and a Client's kill (Kill.Handoff); and a Client's
	// start whose ctx can never end runs the new actor's Started (Spawner.Spawn's
	// Handoff). Off, as on a seeded schedule, every run of a job actor is its
	// dispatcher's.
	CallerRuns bool
}

// Spawner spawns job actors from one shared Props: per-job Props and a per-job
// producer closure were ~400 B of every live job. Spawn stages the job's config
// and protoactor calls the producer synchronously inside the spawn, so a Spawner
// must be used by one goroutine at a time (the registry actor). Job actors are
// never restarted (supervision stops them), so the producer never runs later.
//
// Their mailbox is a linked lock-free one (mailbox.NewLinked: protoactor's unbounded
// lock-free mailbox in one allocation, holding no node when empty): a job actor gets
// a handful of messages in its life, and the default mailbox's ring buffer (goring:
// 10 slots, ~250 B with its headers) was held by every live job, protoactor's
// lock-free one 176 B, this one 80 B.
type Spawner struct {
	props *actor.Props
	// staged is the config of the spawn in progress, by value: a *Config kept
	// here made the caller's Config escape, one more allocation per job.
	staged Config
	// hold: the spawn in progress makes a held mailbox (Spawn given a Handoff),
	// held once made, until Spawn releases it.
	hold bool
	held *mailbox.Linked
}

// NewSpawner returns a spawner whose actors run on dispatcher (nil: protoactor's).
func NewSpawner(dispatcher actor.Dispatcher) *Spawner {
	s := &Spawner{}
	s.props = actor.PropsFromProducer(func() actor.Actor {
		if s.staged.Meta == nil {
			panic("jobs: a job actor was produced outside Spawner.Spawn (job actors are never restarted)")
		}
		a := &jobActor{cfg: s.staged, core: NewCore()}
		s.staged = Config{}
		return a
	}, actor.WithMailbox(s.mailbox))
	if dispatcher != nil {
		s.props = s.props.Configure(actor.WithDispatcher(dispatcher))
	}
	return s
}

// mailbox is the job actors' actor.MailboxProducer (called inside the spawn).
func (s *Spawner) mailbox() actor.Mailbox {
	if s.hold {
		s.held = mailbox.NewLinkedHeld()
		return s.held
	}
	return mailbox.NewLinked()
}

// Spawn starts the actor of one live job as a child of c, named name. The actor
// keeps a copy of *cfg (its only allocation of it); cfg is not retained, and the
// Spawner keeps nothing of it once Spawn returns.
//
// Given h (a registry Client's start whose caller's ctx can never end, with
// Shared.CallerRuns, of an OnSettle producer), the actor's first run — its
// Started: startWatch, the producer's OnSettle — is left in h for the caller,
// which takes it once its send returns and runs it before it waits for its answer
// (mailbox.NewLinkedHeld, Release): no worker is woken for it, and the actor is
// idle when Start returns. It is left only once protoactor has registered the
// actor's PID (SpawnNamed has returned), so nothing runs before the actor can be
// sent to; taken late (the start ran on a worker after the caller stopped
// looking), h refuses it and the run is the dispatcher's. Such a run is bounded
// to the system messages: whatever else is posted meanwhile is the dispatcher's.
func (s *Spawner) Spawn(c actor.Context, cfg *Config, name string, h *mailbox.Handoff) (*actor.PID, error) {
	s.staged, s.hold = *cfg, h != nil
	defer func() { s.staged, s.hold, s.held = Config{}, false, nil }()
	pid, err := c.SpawnNamed(s.props, name)
	if s.held != nil && err == nil {
		s.held.Release(h)
	}
	return pid, err
}

// jobActor owns one live job: its hooks, its settlement core and its pending waits.
// Once settled it hands the job to the registry (Settled) and forwards anything it
// still receives there; the registry poisons it after committing.
//
// An idle job's actor is its Config, a 16-byte Core, its Watch, its own PID (to
// deliver the producer's outcome from any goroutine, with Shared.Root) and a nil
// pointer: 96 B, with no allocation for the watch or the delivery (it is the
// watcher's target); what only a wait, a kill or a teardown needs is allocated with
// the first of them (jobMore). It has handed its job off exactly when its core has
// settled.
type jobActor struct {
	cfg   Config // by value: a separate Config was another 48 B per live job
	core  Core
	watch Watch
	more  *jobMore // nil until the first wait, Cancel or SettleTimeout timer
	self  *actor.PID
}

// jobMore is the part of a job actor that only waits, kills and teardowns use.
type jobMore struct {
	waits     map[uint64]*Wait
	cancel    cancelling  // the producer's Cancel in flight, when cancelOn
	cancelOn  bool        // a Cancel is in flight
	stopTimer func() bool // the armed SettleTimeout timer's stop, nil when none
	// captured is the outcome the producer settled with while its non-blocking
	// Cancel ran on this actor (startCancel), or abandonedDone once that Cancel
	// returned without finding one stored.
	captured atomic.Pointer[doneMsg]
	// stop is the landing kill's StopRequested (with the Settled that may ride on
	// it), not sent yet: made with this jobMore when a kill made it (killMore).
	stop *stopSettled
}

// killMore is the jobMore a job actor's first need of one, a kill, makes, with
// the message that kill's landing sends: one allocation (256 B) where there were
// two per kill (README "Performance": each is a share of the kill's span refills
// and sweeps, what its p99 is made of). A job stopping after a kill holds it,
// 176 B more than a jobMore; a job only waited on holds a plain jobMore.
type killMore struct {
	more jobMore
	stop stopSettled
}

func (a *jobActor) extra() *jobMore {
	if a.more == nil {
		a.more = &jobMore{}
	}
	return a.more
}

// extraForKill is extra for a kill: a jobMore made now is a killMore.
func (a *jobActor) extraForKill() *jobMore {
	if a.more == nil {
		k := &killMore{}
		k.more.stop = &k.stop
		a.more = &k.more
	}
	return a.more
}

// landingStop returns the StopRequested a landing kill sends, with its Settled
// slot: the one made with the jobMore (killMore) the first time, else a new one.
func (a *jobActor) landingStop() *stopSettled {
	if s := a.more.stop; s != nil {
		a.more.stop = nil
		return s
	}
	return &stopSettled{}
}

// handedOff reports whether the job has settled: its decision went to the registry
// (Settled), which answers for it from now on.
func (a *jobActor) handedOff() bool { return !a.core.Live() }

// cancelling returns the producer's Cancel in flight, nil when none.
func (a *jobActor) cancelling() *cancelling {
	if a.more == nil || !a.more.cancelOn {
		return nil
	}
	return &a.more.cancel
}

// endCancel marks the Cancel in flight as over and returns its request and the
// messages held behind it (the slot is reused by the next Cancel).
func (a *jobActor) endCancel() (req any, held []any) {
	cn := &a.more.cancel
	req, held = cn.req, cn.deferred
	*cn = cancelling{}
	a.more.cancelOn = false
	return req, held
}

// stopTimer returns the armed SettleTimeout timer's stop, nil when none.
func (a *jobActor) stopTimer() func() bool {
	if a.more == nil {
		return nil
	}
	return a.more.stopTimer
}

// waits returns the pending waits by token (nil when none).
func (a *jobActor) waits() map[uint64]*Wait {
	if a.more == nil {
		return nil
	}
	return a.more.waits
}

// cancelling is a producer Cancel running on its own goroutine (so a Cancel that
// blocks holds up only its own job) and the messages held until it returns: the
// producer's hooks stay serialised, and a Kill's change lands before an outcome the
// Cancel itself sent (SPEC §1.3 rule 8).
type cancelling struct {
	req      any   // *Kill or *Teardown
	deferred []any // *Kill, *Teardown, *Read, *doneMsg, in arrival order
}

type doneMsg struct {
	o  Outcome
	ok bool
	// bySender: the producer's settle may run the idle job actor on its own
	// goroutine (Hooks.SettleInline, Shared.CallerRuns; mailbox.BySender).
	bySender bool
}

// BySender makes a producer's outcome, settled through OnSettle by a producer that
// declares Hooks.SettleInline, a mailbox.BySender message: delivered to the idle
// job actor, the settling goroutine runs the actor's step itself (the settlement,
// the registry's commit that is Inline behind it, its listeners and an inline
// owner's notice; the actor's stop that the commit's poison asks for).
func (d *doneMsg) BySender() (bool, *mailbox.Handoff) { return d.bySender, nil }

// abandonedDone marks a capture that its Cancel's return closed (jobMore.captured).
var abandonedDone = &doneMsg{}

// cancelDone is a Cancel call's result, sent by the goroutine that ran it.
type cancelDone struct{ err error }

// cancelOK is the result of every Cancel that returned nil: one shared, immutable
// message, so a successful Cancel allocates no result.
var cancelOK = &cancelDone{}

// settleTimedOut is the SettleTimeout timer firing.
type settleTimedOut struct{}

// ForceFail settles a live job failed with Detail now, whatever its producer does
// (a Cancel still running, a Done that never sends): the job's slot is freed and a
// later outcome is ignored (first wins). Work may be orphaned; Warn is logged.
type ForceFail struct {
	Route
	Detail, Warn, Reason string
}

// PointCrash is the fault point where a job actor panics once it has taken a wait
// up (the wait is pending, so the settlement its Stopping handler makes answers
// it): a test's stand-in for a bug in the job actor. It never fires outside tests
// (internal/fault).
const PointCrash = "job.crash"

// Texts of a forced settlement (model-visible details, and the logged warnings).
const (
	TextShutdownDeadline = "Error: job did not stop before the shutdown deadline; work may be orphaned"
	TextSettleTimeout    = "Error: job did not stop within the settle timeout after it was killed; work may be orphaned"
)

func (a *jobActor) Receive(c actor.Context) {
	if after := plantedReceive(a); after != nil {
		defer after()
	}
	if m, ok := c.Message().(Routable); ok && !a.cfg.Shared.Stamped(m) {
		a.refuse(m)
		return
	}
	switch m := c.Message().(type) {
	case *actor.Started:
		a.startWatch(c)
	case *cancelDone:
		a.cancelReturned(c, m.err)
	case *settleTimedOut:
		a.extra().stopTimer = nil
		if a.core.Live() && a.core.Status() == Stopping {
			a.forceFail(c, &ForceFail{Detail: TextSettleTimeout,
				Warn: fmt.Sprintf("jobs: job %s did not stop within %s after it was killed; job record forced failed and work may be orphaned", a.cfg.ID, a.cfg.SettleTimeout)})
		}
	case *ForceFail:
		a.forceFail(c, m)
	case *doneMsg, *Read, *Kill, *Teardown:
		if cn := a.cancelling(); cn != nil && !a.handedOff() {
			cn.deferred = append(cn.deferred, m)
			return
		}
		a.hooked(c, m)
	case *Wait:
		if a.handedOff() {
			c.Send(a.cfg.Registry, m)
			return
		}
		if m.Ctx.Err() != nil {
			a.endWait(m)
			return
		}
		a.core.AddWaiter(m.Token)
		more := a.extra()
		if more.waits == nil {
			more.waits = map[uint64]*Wait{}
		}
		more.waits[m.Token] = m
		if fault.Point(PointCrash) {
			panic("jobs: planted job actor crash (" + PointCrash + ")")
		}
	case *WaitEnd:
		if a.handedOff() {
			c.Send(a.cfg.Registry, m)
			return
		}
		if w := a.waits()[m.Token]; w != nil && a.core.RemoveWaiter(m.Token) {
			delete(a.more.waits, m.Token)
			a.endWait(w)
		}
	case *CountWaiters:
		if a.handedOff() {
			c.Send(a.cfg.Registry, m)
			return
		}
		m.Reply <- len(a.core.Waiters())
	case *actor.Stopped:
		plantedStopped(a)
	default:
		if refuseWire(c, m) {
			a.cfg.Logger.Warn(fmt.Sprintf("jobs: job %s refused a wire %T sent straight to its actor (from %v): the registry serves job requests", a.cfg.ID, m, c.Sender()))
		}
	case *actor.Stopping:
		if !a.handedOff() {
			// Stopped before its producer settled (a panic in this actor, or a stop from
			// outside): settle failed so no waiter hangs and the slot is freed.
			a.watch.Remove()
			a.settle(c, Outcome{Status: Failed, Detail: "Error: job actor stopped before the job settled"}, false)
			a.releaseCancel(c)
		}
	}
}

// refuse answers (or drops, logged) a request that its registry did not route:
// nothing of the job is read or changed.
func (a *jobActor) refuse(m Routable) {
	if !Refuse(m) {
		a.cfg.Logger.Warn(fmt.Sprintf("jobs: job %s dropped a %T its registry did not route", a.cfg.ID, m))
	}
}

// startWatch starts listening for the producer's outcome: through its OnSettle
// callback when it has one, else on its Done channel (the shared Watcher). An
// OnSettle that panics settles the job failed (a producer contract violation).
//
// A Done channel that already holds its value (or is closed) when the actor starts
// is not watched: its value goes through the same delivery at once, without the
// round trip through a watcher shard's goroutine (two goroutine wake-ups and a
// reflect.Select per job). The delivery is a send to this actor, so the outcome
// still queues behind whatever the registry routed here first.
func (a *jobActor) startWatch(c actor.Context) {
	a.self = c.Self()
	plantedStart(a, a.cfg.Root, a.self)
	onSettle := a.cfg.Hooks.OnSettle
	if onSettle == nil {
		select {
		case o, ok := <-a.cfg.Hooks.Done:
			if a.watch.claim() {
				a.deliver(o, ok)
			}
		default:
			a.cfg.Watcher.Add(a.cfg.Hooks.Done, a)
		}
		return
	}
	if err := protect(func() error { onSettle(a.producerSettle); return nil }); err != nil {
		a.watch.Remove()
		violation := "producer OnSettle panicked: " + ErrorText(err)
		a.cfg.Logger.Warn(fmt.Sprintf("jobs: job %s producer contract violation: %s", a.cfg.ID, violation))
		a.settle(c, Outcome{Status: Failed, Detail: CleanDetail("Error: " + violation)}, false)
	}
}

// producerSettle is the settle function OnSettle hands the producer: the first
// call delivers, unless the watch was removed. Called while the producer's
// non-blocking Cancel runs on this actor (the watch is capturing, startCancel),
// it leaves the outcome for that Cancel's return instead of sending it — unless
// the return came first, and then it is sent as any outcome.
func (a *jobActor) producerSettle(o Outcome) {
	prev, ok := a.watch.claimFrom()
	if !ok {
		return
	}
	d := &doneMsg{o: o, ok: true, bySender: a.cfg.Hooks.SettleInline && a.cfg.Shared.CallerRuns}
	if prev == &capturePoke && a.more.captured.CompareAndSwap(nil, d) {
		return // the Cancel's return takes it (the watch's CAS published a.more)
	}
	a.send(d)
}

// watched is the job's Watch (the watcher's target).
func (a *jobActor) watched() *Watch { return &a.watch }

// deliver forwards the producer's outcome to the job actor, from whichever
// goroutine has it (a watcher shard's, the producer's through OnSettle, or the
// actor's own when Done was ready at start); in a troupe_mutation build a planted
// bug may take it over (plantedStart).
func (a *jobActor) deliver(o Outcome, ok bool) { a.send(&doneMsg{o: o, ok: ok}) }

// send is deliver's send of d (a planted delivery takes it over).
func (a *jobActor) send(d *doneMsg) {
	if plantedDeliver(a, d.o, d.ok) {
		return
	}
	fault.Yield("job.done.deliver")
	a.cfg.Root.Send(a.self, d)
}

// endWait answers a wait that ended before settlement, as its timeout or abort would.
func (a *jobActor) endWait(w *Wait) {
	if errors.Is(context.Cause(w.Ctx), ErrWaitTimeout) {
		w.Reply <- WaitResult{Snapshot: a.snapshot()}
		return
	}
	w.Reply <- WaitResult{Err: WaitAbortedBy(w.Ctx)}
}

// settle applies an outcome: first wins. Waits whose context already ended are
// ended first (SPEC §1.3 rule 11), then — with the teardown's claim if teardown —
// the decision is handed to the registry.
func (a *jobActor) settle(c actor.Context, o Outcome, teardown bool) {
	a.settleWith(c, o, teardown, nil)
}

// settleWith is settle, whose Settled rides with stop when stop is not nil: the
// kill that landed in this same step, committed by the registry first (SPEC §2.7's
// stopping, announced), then the settlement, then the kill's reply. stop is sent
// even if the job had already settled (then without a Settled); a stop's non-nil
// Settled is the slot the settlement is written to.
func (a *jobActor) settleWith(c actor.Context, o Outcome, teardown bool, stop *StopRequested) {
	if !a.core.Live() {
		if stop != nil {
			stop.Settled = nil
			c.Send(a.cfg.Registry, stop)
		}
		return
	}
	fault.Yield("job.settle.before-decide")
	a.endExpiredWaits()
	if teardown {
		a.core.TeardownBegin()
	}
	d, _ := a.core.Settle(o)
	replies := make([]chan<- WaitResult, len(d.Waiters))
	for i, t := range d.Waiters {
		replies[i] = a.waits()[t].Reply
	}
	if m := a.more; m != nil {
		m.waits = nil
		if m.stopTimer != nil {
			m.stopTimer()
			m.stopTimer = nil
		}
	}
	now := max(a.cfg.Now(), a.cfg.StartedAt)
	slot := stop.slot() // the stop's own when it has one (stopSettled: one allocation)
	if slot == nil {
		slot = new(Settled)
	}
	*slot = Settled{ID: a.cfg.ID, Decision: d, FinishedAt: now, Waiters: replies, ReadOutput: a.cfg.Hooks.ReadOutput}
	if stop == nil {
		c.Send(a.cfg.Registry, slot)
	} else {
		stop.Settled = slot
		c.Send(a.cfg.Registry, stop)
	}
	fault.Yield("job.settle.after-decide")
}

// endExpiredWaits ends every pending wait whose context is already done, each as
// its own timeout or abort would (SPEC §1.3 rule 11).
func (a *jobActor) endExpiredWaits() {
	for _, t := range append([]uint64(nil), a.core.Waiters()...) {
		if w := a.waits()[t]; w.Ctx.Err() != nil {
			a.core.RemoveWaiter(t)
			delete(a.more.waits, t)
			a.endWait(w)
		}
	}
}

func (a *jobActor) snapshot() *messages.JobSnapshot {
	return a.cfg.Snapshot(a.core.Status(), nil, nil, a.core.Reported())
}

// outcome settles the job with the producer's outcome m (first wins). A non-nil
// stop is a landed kill's StopRequested that the settlement rides with (settleWith).
func (a *jobActor) outcome(c actor.Context, m *doneMsg, stop *StopRequested) {
	o, violation := CheckOutcome(m.o, m.ok)
	if violation != "" && a.core.Live() {
		a.cfg.Logger.Warn(fmt.Sprintf("jobs: job %s producer done promise rejected (producer contract violation): %s", a.cfg.ID, violation))
	}
	a.settleWith(c, o, false, stop)
}

// hooked handles the messages that call a producer hook (or, for an outcome, must
// not overtake one): never while a Cancel is in flight (Receive holds them).
func (a *jobActor) hooked(c actor.Context, msg any) {
	switch m := msg.(type) {
	case *doneMsg:
		a.outcome(c, m, nil)
	case *Read:
		if a.handedOff() {
			c.Send(a.cfg.Registry, m)
			return
		}
		if err := ctxErr(m.Ctx); err != nil {
			// The caller has gone: a consuming read would lose its delta.
			m.Reply <- ReadResult{Err: err}
			return
		}
		var text string
		if a.cfg.Hooks.ReadOutput != nil {
			var err error
			if err = protect(func() (e error) { text, e = a.cfg.Hooks.ReadOutput(); return }); err != nil {
				m.Reply <- ReadResult{Err: &messages.Error{Code: messages.CodeReadFailed, Message: ErrorText(err), Cause: err}}
				return
			}
			text = ValidText(text)
		}
		m.Reply <- ReadResult{Text: text, Snapshot: a.snapshot()}
	case *Kill:
		if a.handedOff() {
			c.Send(a.cfg.Registry, m)
			return
		}
		if err := ctxErr(m.Ctx); err != nil {
			m.Reply <- KillResult{Err: err} // the caller has gone: no Cancel, nothing changes
			return
		}
		a.startCancel(c, m.Reason, m)
	case *Teardown:
		if a.handedOff() {
			return
		}
		a.startCancel(c, m.Reason, m)
	}
}

// startCancel runs the producer's Cancel on a goroutine troupe owns (a runner of
// Shared.Runners, recovering a panic) and holds the hooked messages until its
// result comes back as cancelDone.
// A Cancel that blocks holds up nobody but this job: the job's waits, the registry,
// every other job and the caller's ctx go on.
func (a *jobActor) startCancel(c actor.Context, reason string, req any) {
	var more *jobMore
	if _, ok := req.(*Kill); ok {
		more = a.extraForKill()
	} else {
		more = a.extra()
	}
	more.cancel, more.cancelOn = cancelling{req: req}, true
	cancel := a.cfg.Hooks.Cancel
	if cancel == nil {
		a.cancelReturned(c, nil)
		return
	}
	if a.cfg.Hooks.CancelNonBlocking {
		// Declared to return at once: called here. With callers running job actors
		// (Shared.CallerRuns), an OnSettle producer's watch captures an outcome
		// settled during the call (producerSettle), which is then held as the first
		// thing that arrived behind the Cancel, and the result is applied at once:
		// the kill, the settlement riding with it and the registry's commit happen
		// in this one step, with no message to this actor in between (so a sender
		// running this actor's step — a Client's kill, Kill.Handoff — runs them all).
		capture := a.cfg.Shared.CallerRuns && a.cfg.Hooks.OnSettle != nil && !plantedDelivery(a) &&
			a.watch.poke.CompareAndSwap(nil, &capturePoke)
		err := protect(func() error { return cancel(reason) })
		fault.Yield("job.cancel.after-hook")
		if capture {
			var first *doneMsg
			if !a.watch.poke.CompareAndSwap(&capturePoke, nil) { // settled during the call
				if first = more.captured.Swap(abandonedDone); first != nil && len(more.cancel.deferred) > 0 {
					more.cancel.deferred = append(more.cancel.deferred, first)
					first = nil
				}
			}
			a.cancelReturnedFirst(c, err, first)
			return
		}
		// Otherwise its result is sent to this actor as a runner's would be. The send
		// only queues (this mailbox is running), so what arrived during the call — an
		// outcome Cancel itself settled first — is held before it and handled after
		// it, exactly as behind a runner's Cancel.
		if err == nil {
			c.Send(c.Self(), cancelOK)
			return
		}
		c.Send(c.Self(), &cancelDone{err: err})
		return
	}
	root, self := c.ActorSystem().Root, c.Self()
	a.cfg.Runners.Go(func() {
		err := protect(func() error { return cancel(reason) })
		fault.Yield("job.cancel.after-hook") // a producer may settle inside Cancel
		if err == nil {
			root.Send(self, cancelOK)
			return
		}
		root.Send(self, &cancelDone{err: err})
	})
}

// cancelReturned applies a Cancel's result to the request that made it (SPEC §2.7
// for a kill, §2.11's cancel-for-teardown for a teardown), then handles what was
// held meanwhile, in arrival order, until the next Cancel starts.
func (a *jobActor) cancelReturned(c actor.Context, err error) { a.cancelReturnedFirst(c, err, nil) }

// cancelReturnedFirst is cancelReturned with first, when not nil, the outcome
// held first behind the Cancel (a non-blocking Cancel's capture, startCancel),
// given apart from the held messages: on a kill's usual path nothing else is
// held, and appending it to them was an allocation per kill.
func (a *jobActor) cancelReturnedFirst(c actor.Context, err error, first *doneMsg) {
	if a.cancelling() == nil {
		return
	}
	req, held := a.endCancel()
	switch m := req.(type) {
	case *Kill:
		switch {
		case a.handedOff():
			c.Send(a.cfg.Registry, m) // forced failed meanwhile: already-finished
		case err != nil:
			m.Reply <- KillResult{Err: &messages.Error{Code: messages.CodeCancelFailed, Message: ErrorText(err), Cause: err}}
		default:
			a.core.KillLanded(!m.NoClaim, m.Reason)
			d, ok := first, first != nil
			if ok {
				first = nil
			} else if d, ok = heldOutcome(held); ok {
				held = held[1:]
			}
			if ok {
				// The outcome is next in line (Cancel itself settled, or the producer
				// did meanwhile): it is handled now as it would be next, and its
				// settlement rides with the stop — one registry step, no SettleTimeout.
				both := a.landingStop()
				both.stop = StopRequested{ID: a.cfg.ID, Reported: a.core.Reported(), Kill: m}
				both.stop.Settled = &both.settled
				a.outcome(c, d, &both.stop)
				break
			}
			a.armSettleTimer(c)
			stop := &a.landingStop().stop
			*stop = StopRequested{ID: a.cfg.ID, Reported: a.core.Reported(), Kill: m}
			c.Send(a.cfg.Registry, stop)
		}
	case *Teardown:
		switch {
		case a.handedOff():
		case err != nil:
			// The teardown's claim (SPEC §2.11 step 1) is recorded once Cancel has
			// returned: nothing observes the job meanwhile except the waits a forced
			// settlement ends, and those end as their own timeout or abort would.
			a.cfg.Logger.Warn(fmt.Sprintf("jobs: cancel of %s threw during teardown; job record forced failed and work may be orphaned: %s", a.cfg.ID, err.Error()))
			a.watch.Remove()
			a.settle(c, Outcome{Status: Failed, Detail: "cancel threw during teardown; work may be orphaned: Error: " + err.Error()}, true)
		default:
			a.core.TeardownBegin()
			a.core.TeardownCancelled()
			a.armSettleTimer(c)
			c.Send(a.cfg.Registry, &StopRequested{ID: a.cfg.ID, Reported: true})
		}
	}
	if first != nil { // not taken up above: handled as the first held message
		held = append([]any{first}, held...)
	}
	a.drainDeferred(c, held)
}

// stopSettled is a landed kill's StopRequested and the Settled riding with it, in
// one allocation.
type stopSettled struct {
	stop    StopRequested
	settled Settled
}

// slot returns the Settled that rides with s, nil when none (or s is nil).
func (s *StopRequested) slot() *Settled {
	if s == nil {
		return nil
	}
	return s.Settled
}

// heldOutcome returns the producer outcome at the head of the held messages, if one is.
func heldOutcome(held []any) (*doneMsg, bool) {
	if len(held) == 0 {
		return nil, false
	}
	d, ok := held[0].(*doneMsg)
	return d, ok
}

// drainDeferred handles held messages until one starts a Cancel, which holds the rest.
func (a *jobActor) drainDeferred(c actor.Context, held []any) {
	for i, m := range held {
		if cn := a.cancelling(); cn != nil && !a.handedOff() {
			cn.deferred = append(cn.deferred, held[i:]...)
			return
		}
		a.hooked(c, m)
	}
}

// armSettleTimer starts the SettleTimeout clock the first time the job is stopping.
// Its firing is a message to this actor (settleTimedOut).
func (a *jobActor) armSettleTimer(c actor.Context) {
	d := a.cfg.SettleTimeout
	if d <= 0 || a.stopTimer() != nil || !a.core.Live() {
		return
	}
	after := a.cfg.AfterFunc
	if after == nil {
		after = func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
	}
	root, self := c.ActorSystem().Root, c.Self()
	a.extra().stopTimer = after(d, func() { root.Send(self, &settleTimedOut{}) })
}

// forceFail settles the job failed now (SettleTimeout, or Shutdown's deadline): its
// Done is no longer watched, an in-flight Cancel's request is answered as for a
// settled job, and everything held is handed on.
func (a *jobActor) forceFail(c actor.Context, m *ForceFail) {
	if a.handedOff() || !a.core.Live() {
		return
	}
	if m.Warn != "" {
		a.cfg.Logger.Warn(m.Warn)
	}
	neverCancelled := a.cancelling() == nil && a.core.Status() == Running
	a.watch.Remove()
	a.settle(c, Outcome{Status: Failed, Detail: m.Detail}, false)
	a.releaseCancel(c)
	if neverCancelled && m.Reason != "" && a.cfg.Hooks.Cancel != nil {
		// Best effort against orphaned work: a producer never asked to stop is asked
		// once now; the record is already settled, so its answer changes nothing.
		cancel, reason := a.cfg.Hooks.Cancel, m.Reason
		a.cfg.Runners.Go(func() { _ = protect(func() error { return cancel(reason) }) })
	}
}

// releaseCancel, once the job has settled, answers the request of a Cancel still in
// flight — which may never return — as for a settled job (a kill: already-finished),
// and hands on everything held.
func (a *jobActor) releaseCancel(c actor.Context) {
	if a.cancelling() == nil || !a.handedOff() {
		return
	}
	req, held := a.endCancel()
	if k, ok := req.(*Kill); ok {
		c.Send(a.cfg.Registry, k)
	}
	a.drainDeferred(c, held)
}

// ctxErr is the coded error of a request whose caller's ctx has ended (nil ctx: never).
func ctxErr(ctx context.Context) error {
	if ctx == nil || ctx.Err() == nil {
		return nil
	}
	return Aborted(ctx)
}

// Aborted is the error of a client call whose ctx ended before its answer: code
// job/aborted, matching ctx's error (context.Canceled or DeadlineExceeded) and its
// cause with errors.Is.
func Aborted(ctx context.Context) error {
	cause := ctx.Err()
	if cause == nil {
		cause = context.Canceled // not ended: only a caller's mistake gets here
	}
	if c := context.Cause(ctx); c != nil && c != cause {
		cause = errors.Join(cause, c)
	}
	return &messages.Error{Code: messages.CodeAborted, Message: "call aborted: " + cause.Error(), Cause: cause}
}

// protect runs f, turning a panic into an error whose message is fmt.Sprint of the
// panic value (SPEC §1.3 rule 13).
func protect(f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = Panicked(v)
		}
	}()
	return f()
}

// Panicked is the error a recovered producer panic becomes.
func Panicked(v any) error {
	if e, ok := v.(error); ok {
		return e
	}
	return errors.New(fmt.Sprint(v))
}

// Protect runs f with the recover rule of the job runtime (used by the registry for
// Run and for reads after settlement).
func Protect(f func() error) error { return protect(f) }
