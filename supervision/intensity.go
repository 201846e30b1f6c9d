package supervision

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Restart intensity defaults: a child may restart DefaultMaxRestarts times within
// DefaultWithin; its next failure in that window escalates.
const (
	DefaultMaxRestarts = 3
	DefaultWithin      = 10 * time.Second
)

// Intensity bounds how often a child may restart: at most MaxRestarts restarts within
// any window of length Within (a failure counts while it is younger than Within). The
// failure past that escalates to the supervisor's own supervisor instead of restarting.
//
// Each field's zero (or negative) value means its default (3 within 10s), so the zero
// Intensity is the default one. "Never restart" is not an Intensity: it is a decider
// returning Stop or Escalate.
type Intensity struct {
	MaxRestarts int
	Within      time.Duration
}

// withDefaults fills the zero fields with the defaults.
func (in Intensity) withDefaults() Intensity {
	if in.MaxRestarts <= 0 {
		in.MaxRestarts = DefaultMaxRestarts
	}
	if in.Within <= 0 {
		in.Within = DefaultWithin
	}
	return in
}

// Decide is the restart-window model: a child failed at now, having failed before at
// the times in history. It returns whether the child may restart and the history to
// keep: the failures still inside the window (now - t < Within), now included. The
// child may restart while that count is at most MaxRestarts; the failure that makes it
// exceed MaxRestarts escalates (and the caller forgets the child's history).
//
// Decide is pure: it does not modify history (pruned is a new slice, in history's
// order with now last). A failure time after now (a clock stepped back) counts as
// inside the window.
func Decide(history []time.Time, now time.Time, in Intensity) (restart bool, pruned []time.Time) {
	in = in.withDefaults()
	pruned = make([]time.Time, 0, min(len(history), in.MaxRestarts)+1)
	for _, t := range history {
		if now.Sub(t) < in.Within {
			pruned = append(pruned, t)
		}
	}
	pruned = append(pruned, now)
	return len(pruned) <= in.MaxRestarts, pruned
}

// Restarting is the "N restarts in a window, then escalate" strategy, which
// protoactor's own strategies lack (past their limit they stop the child and never
// escalate). For each failure it asks decider:
//
//   - Restart: the failure is recorded for that child and [Decide] says whether it may
//     restart; if not, the failure escalates (supervisor.EscalateFailure) with the
//     original reason and message, and the child's history is forgotten. The failed
//     child stays suspended until the escalation's outcome reaches it: a restart or a
//     stop of the supervisor stops it (a Resume up there would leave it suspended, so
//     the strategy above should restart or stop).
//   - Resume, Stop, Escalate: done as said; they record nothing (Stop forgets the
//     child's history).
//
// Used as a guardian (actor.WithGuardian), there is nothing to escalate to (a guardian
// panics on EscalateFailure, and that panic, raised on the failing actor's goroutine
// inside protoactor's recover, would crash the process): the top-level actor is
// stopped instead.
//
// A nil decider means actor.DefaultDecider (always Restart).
//
// clock reads the time of each failure; nil means time.Now. Tests pass a fake clock
// (under testing/synctest, time.Now is already fake). It is called from HandleFailure,
// possibly on several goroutines at once (see below), so it must be safe for that.
//
// The history is the strategy's own, not protoactor's RestartStatistics (whose
// NumberOfFailures reads time.Now itself and whose list only ever grows): it is keyed
// by the child's *actor.RestartStatistics, which protoactor creates once per child
// incarnation, so a child respawned under the same name starts afresh. Entries older
// than the window are swept as failures come, so the strategy holds at most the
// children that failed within the last window, plus those that have left it since the
// last sweep (a sweep runs whenever the map has doubled: O(1) per failure amortized).
//
// One strategy value may be called concurrently: as a WithSupervisor strategy it is
// called on each supervising parent's goroutine (a Props value, and its strategy, is
// shared by every actor spawned from it), and as a guardian strategy protoactor calls
// it synchronously on the goroutine of whichever top-level actor failed. A mutex guards
// the history; it is a leaf lock (nothing else is called while holding it).
func Restarting(decider actor.DeciderFunc, in Intensity, clock func() time.Time) actor.SupervisorStrategy {
	if clock == nil {
		clock = time.Now
	}
	if decider == nil {
		decider = actor.DefaultDecider
	}
	return &restarting{decider: decider, in: in.withDefaults(), clock: clock, history: map[any][]time.Time{}}
}

// minSweep is the history size below which no sweep runs.
const minSweep = 64

type restarting struct {
	decider actor.DeciderFunc
	in      Intensity
	clock   func() time.Time

	mu      sync.Mutex
	history map[any][]time.Time // per child incarnation: failures inside the window
	// sweepAt is the history size at which the next sweep runs: twice the size left
	// by the last one, so sweeping costs O(1) per failure amortized.
	sweepAt int
}

var _ actor.SupervisorStrategy = (*restarting)(nil)

// HandleFailure implements actor.SupervisorStrategy.
func (s *restarting) HandleFailure(system *actor.ActorSystem, sup actor.Supervisor, child *actor.PID,
	rs *actor.RestartStatistics, reason any, message any) {
	switch directive := s.decider(reason); directive {
	case actor.RestartDirective:
		if s.mayRestart(childKey(child, rs)) {
			publish(system, child, reason, actor.RestartDirective)
			sup.RestartChildren(child)
			return
		}
		s.escalate(system, sup, child, reason, message)
	case actor.ResumeDirective:
		publish(system, child, reason, directive)
		sup.ResumeChildren(child)
	case actor.StopDirective:
		s.forget(childKey(child, rs))
		publish(system, child, reason, directive)
		sup.StopChildren(child)
	case actor.EscalateDirective:
		s.forget(childKey(child, rs))
		s.escalate(system, sup, child, reason, message)
	}
}

// mayRestart records a failure of the child now and says whether it may restart; if
// not, the child's history is forgotten (like protoactor's Reset past the limit).
func (s *restarting) mayRestart(key any) bool {
	now := s.clock()
	s.mu.Lock()
	defer s.mu.Unlock()
	restart, pruned := Decide(s.history[key], now, s.in)
	if restart {
		s.history[key] = pruned
	} else {
		delete(s.history, key)
	}
	s.sweep(now)
	return restart
}

// sweep drops the children whose failures have all left the window, once the
// history has doubled since the last sweep. s.mu is held.
func (s *restarting) sweep(now time.Time) {
	if len(s.history) < max(s.sweepAt, minSweep) {
		return
	}
	for key, times := range s.history {
		if len(times) == 0 || now.Sub(times[len(times)-1]) >= s.in.Within {
			delete(s.history, key)
		}
	}
	s.sweepAt = 2 * len(s.history)
}

func (s *restarting) forget(key any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.history, key)
}

// escalate hands the failure to the supervisor's own supervisor; a guardian has none
// (it panics), and then the child stops.
func (s *restarting) escalate(system *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, reason, message any) {
	if tryEscalate(sup, reason, message) {
		return
	}
	publish(system, child, reason, actor.StopDirective)
	sup.StopChildren(child)
}

func tryEscalate(sup actor.Supervisor, reason, message any) (escalated bool) {
	defer func() {
		if recover() != nil {
			escalated = false
		}
	}()
	sup.EscalateFailure(reason, message)
	return true
}

// childKey identifies a child incarnation: protoactor hands every Failure of one
// actor context the same *RestartStatistics. Without one (a direct call), the PID.
func childKey(child *actor.PID, rs *actor.RestartStatistics) any {
	if rs != nil {
		return rs
	}
	return child.String()
}

// publish reports the decision on the event stream, as protoactor's strategies do.
func publish(system *actor.ActorSystem, child *actor.PID, reason any, directive actor.Directive) {
	if system == nil {
		return
	}
	system.EventStream.Publish(&actor.SupervisorEvent{Child: child, Reason: reason, Directive: directive})
}
