//go:build troupe_mutation

package job

import (
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/internal/fault"
)

// The planted bugs of the job actor (TESTING.md's mutation check). This file is
// compiled only into troupe_mutation builds (planted_off.go is its no-op twin in
// every other build); even there each bug is inert until a test plants it.

// plantedReceive is the job actor's per-message hook: the after-message step of
// PlantedCheckThenActSettle (publishing the core), or nil.
func plantedReceive(a *jobActor) func() {
	if p := plantedOf(a); p != nil {
		return func() { p.publish(a) }
	}
	return nil
}

// plantedStopped forgets a stopped job actor's planted state.
func plantedStopped(a *jobActor) {
	if plantedAny.Load() {
		planted.Delete(a)
		plantedDeliveries.Delete(a)
	}
}

// plantedStart gives a job actor started while a planted bug of this package is
// planted its planted delivery (plantedDeliverer), kept outside the actor.
func plantedStart(a *jobActor, root *actor.RootContext, self *actor.PID) {
	if d := plantedDeliverer(a, root, self); d != nil {
		plantedAny.Store(true)
		plantedDeliveries.Store(a, d)
	}
}

// plantedDeliver runs a's planted delivery, if it has one, and reports whether it did.
func plantedDeliver(a *jobActor, o Outcome, ok bool) bool {
	if !plantedAny.Load() {
		return false
	}
	d, found := plantedDeliveries.Load(a)
	if found {
		d.(func(Outcome, bool))(o, ok)
	}
	return found
}

// plantedDelivery reports whether a has a planted delivery (which every outcome
// must go through: no capture of it, startCancel).
func plantedDelivery(a *jobActor) bool {
	if !plantedAny.Load() {
		return false
	}
	_, found := plantedDeliveries.Load(a)
	return found
}

// plantedDeliverer is the outcome delivery (the Done watcher's callback, or the
// settle function OnSettle hands the producer) of a job actor started while a
// planted bug of this package is planted, or nil (the production closure).
func plantedDeliverer(a *jobActor, root *actor.RootContext, self *actor.PID) func(Outcome, bool) {
	fast, noticeFirst := fault.Planted(PlantedCheckThenActSettle), fault.Planted(PlantedNoticeBeforeCommit)
	if !fast && !noticeFirst {
		return nil
	}
	deliver := func(o Outcome, ok bool) { root.Send(self, &doneMsg{o: o, ok: ok}) }
	if fast {
		p := newPlantedFastSettle(a, root, self)
		setPlanted(a, p)
		deliver = p.deliver
	}
	if noticeFirst {
		deliver = plantedNoticeFirst(&a.cfg, root, deliver)
	}
	return func(o Outcome, ok bool) {
		fault.Yield("job.done.deliver")
		deliver(o, ok)
	}
}

// PlantedCheckThenActSettle names a deliberately planted bug (TESTING.md's mutation
// check). It is inert: only a test that installs a fault injector
// with fault.Plant(PlantedCheckThenActSettle) turns it on, for the job actors started
// while that injector is installed. test/settle shows its suite catches it.
const PlantedCheckThenActSettle = "check-then-act-settle"

// plantedFastSettle is the planted bug: a "skip the mailbox hop" optimisation of the
// Done delivery. The job actor publishes a copy of its core after every message;
// when the producer's outcome arrives, the delivering goroutine (the Done watcher's,
// or the producer's own through OnSettle) checks that copy
// ("the job is live"), decides the settlement from it and commits it straight to the
// registry, then tells the job actor as usual. There is no data race — the copy is
// published through an atomic pointer — and without contention the result is
// indistinguishable from the real path. But the check and the act are separated by
// whatever the job actor processes in between: a kill landing (its claim and reason),
// a wait registering, a teardown claiming or force-failing. Each then also makes
// the job actor reach its own settlement decision: two decisions for one job, of
// which the registry records the stale one, and replies disagree with it.
type plantedFastSettle struct {
	cfg  *Config // immutable after spawn
	root *actor.RootContext
	self *actor.PID
	pub  atomic.Pointer[Core] // the core as of the end of the job actor's last message
}

func newPlantedFastSettle(a *jobActor, root *actor.RootContext, self *actor.PID) *plantedFastSettle {
	p := &plantedFastSettle{cfg: &a.cfg, root: root, self: self}
	p.publish(a)
	return p
}

// publish runs on the job actor, after each message.
func (p *plantedFastSettle) publish(a *jobActor) {
	c := a.core.Clone()
	p.pub.Store(&c)
}

// deliver runs on the delivering goroutine, in place of the plain forward.
func (p *plantedFastSettle) deliver(o Outcome, ok bool) {
	if c := p.pub.Load(); c != nil && c.Live() { // check
		fault.Yield("job.settle.before-decide")
		core := *c
		checked, _ := CheckOutcome(o, ok)
		d, _ := core.Settle(checked)
		d.Waiters = nil // the job actor answers its own waits when it settles
		now := max(p.cfg.Now(), p.cfg.StartedAt)
		p.root.Send(p.cfg.Registry, &Settled{ID: p.cfg.ID, Decision: d, FinishedAt: now, // act
			ReadOutput: p.cfg.Hooks.ReadOutput})
	}
	p.root.Send(p.self, &doneMsg{o: o, ok: ok})
}

// planted holds the planted bug's state per job actor, outside the actor struct so
// that production job actors carry nothing for it. Only tests that plant the bug
// ever store here; plantedAny keeps the per-message check at one atomic load.
var (
	planted           sync.Map // *jobActor → *plantedFastSettle
	plantedDeliveries sync.Map // *jobActor → its planted delivery, func(Outcome, bool)
	plantedAny        atomic.Bool
)

func setPlanted(a *jobActor, p *plantedFastSettle) {
	plantedAny.Store(true)
	planted.Store(a, p)
}

func plantedOf(a *jobActor) *plantedFastSettle {
	if !plantedAny.Load() {
		return nil
	}
	if p, ok := planted.Load(a); ok {
		return p.(*plantedFastSettle)
	}
	return nil
}

// PlantedNoticeBeforeCommit names a planted bug (TESTING.md's mutation check): the
// completion is announced before it is committed. A "lower notice latency" change
// has the delivering goroutine (Done watcher or OnSettle), as soon as the producer's
// outcome arrives, ask
// the registry to announce it (onJobDone, hence the model's notice) from that
// outcome and the record as it stands; the job actor then settles and the registry
// commits as usual, without announcing again. The notice can precede the commit (a
// read right after it still shows the job running) and can disagree with it: the
// outcome did not go through the job's core, so a kill's reason is missing from the
// detail, a claim that landed first or lapsed is not applied, and an outcome that
// lost to a teardown's force-failure is announced anyway. test/notices catches it.
const PlantedNoticeBeforeCommit = "notice-before-commit"

// PlantedEarlyOutcome is the planted bug's message to the registry: the producer's
// outcome (already checked), as the delivery received it, at At (Unix ms).
type PlantedEarlyOutcome struct {
	ID      string
	Outcome Outcome
	At      int64
}

// plantedNoticeFirst wraps the Done delivery of a job actor started while
// PlantedNoticeBeforeCommit is planted: the registry hears of the outcome first.
func plantedNoticeFirst(cfg *Config, root *actor.RootContext, deliver func(Outcome, bool)) func(Outcome, bool) {
	return func(o Outcome, ok bool) {
		checked, _ := CheckOutcome(o, ok)
		root.Send(cfg.Registry, &PlantedEarlyOutcome{ID: cfg.ID, Outcome: checked, At: max(cfg.Now(), cfg.StartedAt)})
		deliver(o, ok)
	}
}
