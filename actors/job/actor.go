package job

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/internal/fault"
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
}

// Spawner spawns job actors from one shared Props: per-job Props and a per-job
// producer closure were ~400 B of every live job. Spawn stages the job's config
// and protoactor calls the producer synchronously inside the spawn, so a Spawner
// must be used by one goroutine at a time (the registry actor). Job actors are
// never restarted (supervision stops them), so the producer never runs later.
//
// Their mailbox is protoactor's lock-free unbounded one: a job actor gets a handful
// of messages in its life, and the default mailbox's ring buffer (goring: 10 slots,
// ~250 B with its headers) was held by every live job, where the linked queue
// holds one 24-B node.
type Spawner struct {
	props  *actor.Props
	staged *Config
}

// NewSpawner returns a spawner whose actors run on dispatcher (nil: protoactor's).
func NewSpawner(dispatcher actor.Dispatcher) *Spawner {
	s := &Spawner{}
	s.props = actor.PropsFromProducer(func() actor.Actor {
		cfg := s.staged
		s.staged = nil
		return &jobActor{cfg: *cfg, core: NewCore()}
	}, actor.WithMailbox(actor.UnboundedLockfree()))
	if dispatcher != nil {
		s.props = s.props.Configure(actor.WithDispatcher(dispatcher))
	}
	return s
}

// Spawn starts the actor of one live job as a child of c, named name. The actor
// keeps a copy of *cfg (one allocation per job, not two); cfg is not retained.
func (s *Spawner) Spawn(c actor.Context, cfg *Config, name string) (*actor.PID, error) {
	s.staged = cfg
	defer func() { s.staged = nil }()
	return c.SpawnNamed(s.props, name)
}

// jobActor owns one live job: its hooks, its settlement core and its pending waits.
// Once settled it hands the job to the registry (Settled) and forwards anything it
// still receives there; the registry poisons it after committing.
type jobActor struct {
	cfg       Config // by value: a separate Config was another 48 B per live job
	core      Core
	waits     map[uint64]*Wait // allocated on the first wait
	handedOff bool
	watch     *Watch
}

type doneMsg struct {
	o  Outcome
	ok bool
}

func (a *jobActor) Receive(c actor.Context) {
	if after := plantedReceive(a); after != nil {
		defer after()
	}
	switch m := c.Message().(type) {
	case *actor.Started:
		a.watch = a.cfg.Watcher.Add(a.cfg.Hooks.Done, a.deliverer(c))
	case *doneMsg:
		o, violation := CheckOutcome(m.o, m.ok)
		if violation != "" && a.core.Live() {
			a.cfg.Logger.Warn(fmt.Sprintf("jobs: job %s producer done promise rejected (producer contract violation): %s", a.cfg.ID, violation))
		}
		a.settle(c, o, false)
	case *Read:
		if a.handedOff {
			c.Send(a.cfg.Registry, m)
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
		if a.handedOff {
			c.Send(a.cfg.Registry, m)
			return
		}
		if err := a.cancel(m.Reason); err != nil {
			m.Reply <- KillResult{Err: &messages.Error{Code: messages.CodeCancelFailed, Message: ErrorText(err), Cause: err}}
			return
		}
		a.core.KillLanded(!m.NoClaim, m.Reason)
		c.Send(a.cfg.Registry, &StopRequested{ID: a.cfg.ID, Reported: a.core.Reported(), Kill: m})
	case *Wait:
		if a.handedOff {
			c.Send(a.cfg.Registry, m)
			return
		}
		if m.Ctx.Err() != nil {
			a.endWait(m)
			return
		}
		a.core.AddWaiter(m.Token)
		if a.waits == nil {
			a.waits = map[uint64]*Wait{}
		}
		a.waits[m.Token] = m
	case *WaitEnd:
		if a.handedOff {
			c.Send(a.cfg.Registry, m)
			return
		}
		if w := a.waits[m.Token]; w != nil && a.core.RemoveWaiter(m.Token) {
			delete(a.waits, m.Token)
			a.endWait(w)
		}
	case *CountWaiters:
		if a.handedOff {
			c.Send(a.cfg.Registry, m)
			return
		}
		m.Reply <- len(a.core.Waiters())
	case *Teardown:
		if a.handedOff {
			return
		}
		// The teardown's claim (SPEC §2.11 step 1) is recorded once Cancel has returned:
		// nothing observes the job within this step except the waits a forced settlement
		// ends, and those end as their own timeout or abort would — before the claim.
		if err := a.cancel(m.Reason); err != nil {
			a.cfg.Logger.Warn(fmt.Sprintf("jobs: cancel of %s threw during teardown; job record forced failed and work may be orphaned: %s", a.cfg.ID, err.Error()))
			a.watch.Remove()
			a.settle(c, Outcome{Status: Failed, Detail: "cancel threw during teardown; work may be orphaned: Error: " + err.Error()}, true)
			return
		}
		a.core.TeardownBegin()
		a.core.TeardownCancelled()
		c.Send(a.cfg.Registry, &StopRequested{ID: a.cfg.ID, Reported: true})
	case *actor.Stopped:
		plantedStopped(a)
	case *actor.Stopping:
		if !a.handedOff {
			// Stopped before its producer settled (a panic in this actor, or a stop from
			// outside): settle failed so no waiter hangs and the slot is freed.
			a.watch.Remove()
			a.settle(c, Outcome{Status: Failed, Detail: "Error: job actor stopped before the job settled"}, false)
		}
	}
}

// deliverer returns the Done watcher's callback for this job, which forwards the
// producer's outcome to the job actor. It is held while the job lives, so the
// production path is a single closure (of root and self); in a troupe_mutation
// build, the planted bugs wrap it.
func (a *jobActor) deliverer(c actor.Context) func(Outcome, bool) {
	root, self := c.ActorSystem().Root, c.Self()
	if d := plantedDeliverer(a, root, self); d != nil {
		return d
	}
	return func(o Outcome, ok bool) {
		fault.Yield("job.done.deliver")
		root.Send(self, &doneMsg{o: o, ok: ok})
	}
}

// endWait answers a wait that ended before settlement, as its timeout or abort would.
func (a *jobActor) endWait(w *Wait) {
	if errors.Is(context.Cause(w.Ctx), ErrWaitTimeout) {
		w.Reply <- WaitResult{Snapshot: a.snapshot()}
		return
	}
	w.Reply <- WaitResult{Err: WaitAborted()}
}

// settle applies an outcome: first wins. Waits whose context already ended are
// ended first (SPEC §1.3 rule 11), then — with the teardown's claim if teardown —
// the decision is handed to the registry.
func (a *jobActor) settle(c actor.Context, o Outcome, teardown bool) {
	if !a.core.Live() {
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
		replies[i] = a.waits[t].Reply
	}
	a.waits = nil
	a.handedOff = true
	now := max(a.cfg.Now(), a.cfg.StartedAt)
	c.Send(a.cfg.Registry, &Settled{ID: a.cfg.ID, Decision: d, FinishedAt: now, Waiters: replies, ReadOutput: a.cfg.Hooks.ReadOutput})
	fault.Yield("job.settle.after-decide")
}

// endExpiredWaits ends every pending wait whose context is already done, each as
// its own timeout or abort would (SPEC §1.3 rule 11).
func (a *jobActor) endExpiredWaits() {
	for _, t := range append([]uint64(nil), a.core.Waiters()...) {
		if w := a.waits[t]; w.Ctx.Err() != nil {
			a.core.RemoveWaiter(t)
			delete(a.waits, t)
			a.endWait(w)
		}
	}
}

func (a *jobActor) snapshot() *messages.JobSnapshot {
	return a.cfg.Snapshot(a.core.Status(), nil, nil, a.core.Reported())
}

func (a *jobActor) cancel(reason string) error {
	if a.cfg.Hooks.Cancel == nil {
		return nil
	}
	defer fault.Yield("job.cancel.after-hook") // a producer may settle inside Cancel
	return protect(func() error { return a.cfg.Hooks.Cancel(reason) })
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
