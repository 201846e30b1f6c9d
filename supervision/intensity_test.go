package supervision_test

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/troupe-rt/troupe/supervision"
)

// The restart-window model.

func TestDecide(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	in := supervision.Intensity{MaxRestarts: 2, Within: 10 * time.Second}
	cases := []struct {
		name        string
		history     []time.Time
		now         time.Time
		in          supervision.Intensity
		wantRestart bool
		wantPruned  []time.Time
	}{
		{"first failure", nil, at(0), in, true, []time.Time{at(0)}},
		{"second within the window", []time.Time{at(0)}, at(time.Second), in, true,
			[]time.Time{at(0), at(time.Second)}},
		{"third within the window escalates", []time.Time{at(0), at(time.Second)}, at(2 * time.Second), in, false,
			[]time.Time{at(0), at(time.Second), at(2 * time.Second)}},
		{"three at the same instant", []time.Time{at(0), at(0)}, at(0), in, false,
			[]time.Time{at(0), at(0), at(0)}},
		{"the oldest just inside the window counts", []time.Time{at(0), at(time.Second)}, at(10*time.Second - 1), in, false,
			[]time.Time{at(0), at(time.Second), at(10*time.Second - 1)}},
		{"the oldest exactly Within old has left the window", []time.Time{at(0), at(time.Second)}, at(10 * time.Second), in, true,
			[]time.Time{at(time.Second), at(10 * time.Second)}},
		{"all old failures pruned", []time.Time{at(0), at(time.Second)}, at(time.Hour), in, true,
			[]time.Time{at(time.Hour)}},
		{"a failure after now (clock stepped back) counts", []time.Time{at(time.Minute), at(time.Minute)}, at(0), in, false,
			[]time.Time{at(time.Minute), at(time.Minute), at(0)}},
		{"zero Intensity: the third restart within 10s is allowed",
			[]time.Time{at(0), at(time.Second)}, at(9 * time.Second), supervision.Intensity{}, true,
			[]time.Time{at(0), at(time.Second), at(9 * time.Second)}},
		{"zero Intensity: the fourth within 10s escalates",
			[]time.Time{at(0), at(time.Second), at(2 * time.Second)}, at(9 * time.Second), supervision.Intensity{}, false,
			[]time.Time{at(0), at(time.Second), at(2 * time.Second), at(9 * time.Second)}},
		{"zero Within means 10s", []time.Time{at(0)}, at(10 * time.Second), supervision.Intensity{MaxRestarts: 1}, true,
			[]time.Time{at(10 * time.Second)}},
		{"negative fields mean the defaults",
			[]time.Time{at(0), at(time.Second), at(2 * time.Second)}, at(3 * time.Second),
			supervision.Intensity{MaxRestarts: -1, Within: -time.Second}, false,
			[]time.Time{at(0), at(time.Second), at(2 * time.Second), at(3 * time.Second)}},
		{"max one", []time.Time{at(0)}, at(time.Millisecond), supervision.Intensity{MaxRestarts: 1, Within: time.Second}, false,
			[]time.Time{at(0), at(time.Millisecond)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := slices.Clone(c.history)
			restart, pruned := supervision.Decide(c.history, c.now, c.in)
			require.Equal(t, c.wantRestart, restart)
			require.Equal(t, c.wantPruned, pruned)
			require.Equal(t, before, c.history, "Decide does not modify its input")
		})
	}
}

// Feeding Decide its own pruned history failure after failure (forgetting it on an
// escalation, as the strategy does) decides like counting from scratch over every
// failure since the last escalation: pruning loses nothing that matters.
func TestDecideIteratedMatchesCountingFromScratch(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := supervision.Intensity{
			MaxRestarts: rapid.IntRange(1, 5).Draw(t, "max"),
			Within:      time.Duration(rapid.IntRange(1, 20).Draw(t, "within")) * time.Second,
		}
		gaps := rapid.SliceOfN(rapid.IntRange(0, 25), 1, 60).Draw(t, "gaps (s)")

		now := time.Unix(1_700_000_000, 0)
		var history []time.Time
		var sinceEscalation []time.Time // every failure since the last escalation
		for i, g := range gaps {
			now = now.Add(time.Duration(g) * time.Second)
			sinceEscalation = append(sinceEscalation, now)
			inWindow := 0
			for _, f := range sinceEscalation {
				if now.Sub(f) < in.Within {
					inWindow++
				}
			}
			want := inWindow <= in.MaxRestarts

			restart, pruned := supervision.Decide(history, now, in)
			if restart != want {
				t.Fatalf("failure %d at +%v: Decide says restart=%v, counting says %v (%d in window)",
					i, now.Sub(time.Unix(1_700_000_000, 0)), restart, want, inWindow)
			}
			if len(pruned) > in.MaxRestarts+1 {
				t.Fatalf("history grew to %d > MaxRestarts+1", len(pruned))
			}
			if restart {
				history = pruned
			} else {
				history, sinceEscalation = nil, nil
			}
		}
	})
}

// The strategy against a fake supervisor.

type fakeSupervisor struct {
	mu             sync.Mutex
	calls          []string
	escalatePanics bool // like a guardian
}

func (s *fakeSupervisor) record(op string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, op)
}

func (s *fakeSupervisor) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	calls := s.calls
	s.calls = nil
	return calls
}

func (s *fakeSupervisor) Children() []*actor.PID { return nil }
func (s *fakeSupervisor) EscalateFailure(reason, message any) {
	if s.escalatePanics {
		panic(errors.New("guardian cannot escalate failure"))
	}
	s.record(fmt.Sprintf("escalate %v %v", reason, message))
}
func (s *fakeSupervisor) RestartChildren(pids ...*actor.PID) { s.record("restart " + ids(pids)) }
func (s *fakeSupervisor) StopChildren(pids ...*actor.PID)    { s.record("stop " + ids(pids)) }
func (s *fakeSupervisor) ResumeChildren(pids ...*actor.PID)  { s.record("resume " + ids(pids)) }

func ids(pids []*actor.PID) string {
	out := ""
	for _, p := range pids {
		out += p.Id
	}
	return out
}

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// crash is a panic value; the decider below reads the directive from it.
type crash struct{ d actor.Directive }

func decideCrash(reason any) actor.Directive {
	if c, ok := reason.(crash); ok {
		return c.d
	}
	return actor.RestartDirective
}

func escalated(d actor.Directive) string { return fmt.Sprintf("escalate %v msg", crash{d}) }

func TestRestartingDirectives(t *testing.T) {
	clock := newFakeClock()
	s := supervision.Restarting(decideCrash, supervision.Intensity{MaxRestarts: 2, Within: 10 * time.Second}, clock.Now)
	sup := &fakeSupervisor{}
	a, b := actor.NewPID("local", "a"), actor.NewPID("local", "b")
	rsA, rsB := actor.NewRestartStatistics(), actor.NewRestartStatistics()
	fail := func(pid *actor.PID, rs *actor.RestartStatistics, d actor.Directive) []string {
		s.HandleFailure(nil, sup, pid, rs, crash{d}, "msg")
		return sup.take()
	}
	restart, resume, stop, escalate := actor.RestartDirective, actor.ResumeDirective, actor.StopDirective, actor.EscalateDirective

	require.Equal(t, []string{"restart a"}, fail(a, rsA, restart))
	require.Equal(t, []string{"resume a"}, fail(a, rsA, resume), "resume records nothing")
	require.Equal(t, []string{"restart a"}, fail(a, rsA, restart))
	require.Equal(t, []string{"restart b"}, fail(b, rsB, restart), "each child has its own history")
	require.Equal(t, []string{escalated(actor.RestartDirective)}, fail(a, rsA, restart), "a's third restart in the window escalates")
	require.Equal(t, []string{"restart a"}, fail(a, rsA, restart), "an escalation forgets the history")

	clock.Advance(10 * time.Second)
	require.Equal(t, []string{"restart b"}, fail(b, rsB, restart), "b's first failure has left the window")
	require.Equal(t, []string{"restart b"}, fail(b, rsB, restart))
	require.Equal(t, []string{escalated(actor.RestartDirective)}, fail(b, rsB, restart))

	require.Equal(t, []string{"restart a"}, fail(a, rsA, restart))
	require.Equal(t, []string{"stop a"}, fail(a, rsA, stop))
	require.Equal(t, []string{"restart a"}, fail(a, rsA, restart), "a stop forgets the history")
	require.Equal(t, []string{"restart a"}, fail(a, rsA, restart))
	require.Equal(t, []string{escalated(actor.EscalateDirective)}, fail(a, rsA, escalate), "escalate as decided")
	require.Equal(t, []string{"restart a"}, fail(a, rsA, restart), "and forget the history")

	// A respawned child under the same name is a new incarnation: a new RestartStatistics.
	require.Equal(t, []string{"restart a"}, fail(a, rsA, restart))
	require.Equal(t, []string{"restart a"}, fail(a, actor.NewRestartStatistics(), restart))

	// Without RestartStatistics (a direct call) the PID identifies the child.
	require.Equal(t, []string{"restart b"}, fail(b, nil, restart))
	require.Equal(t, []string{"restart b"}, fail(b, nil, restart))
	require.Equal(t, []string{escalated(actor.RestartDirective)}, fail(b, nil, restart))
}

func TestRestartingCannotEscalateFromAGuardianSoItStops(t *testing.T) {
	clock := newFakeClock()
	s := supervision.Restarting(decideCrash, supervision.Intensity{MaxRestarts: 1, Within: time.Minute}, clock.Now)
	sup := &fakeSupervisor{escalatePanics: true}
	a, rs := actor.NewPID("local", "a"), actor.NewRestartStatistics()

	s.HandleFailure(nil, sup, a, rs, crash{actor.RestartDirective}, nil)
	require.Equal(t, []string{"restart a"}, sup.take())
	s.HandleFailure(nil, sup, a, rs, crash{actor.RestartDirective}, nil)
	require.Equal(t, []string{"stop a"}, sup.take())
	s.HandleFailure(nil, sup, a, rs, crash{actor.EscalateDirective}, nil)
	require.Equal(t, []string{"stop a"}, sup.take())
}

func TestRestartingNilDeciderAndClock(t *testing.T) {
	s := supervision.Restarting(nil, supervision.Intensity{MaxRestarts: 1, Within: time.Hour}, nil)
	sup := &fakeSupervisor{}
	a, rs := actor.NewPID("local", "a"), actor.NewRestartStatistics()
	s.HandleFailure(nil, sup, a, rs, "any", nil)
	s.HandleFailure(nil, sup, a, rs, "any", nil)
	require.Equal(t, []string{"restart a", "escalate any <nil>"}, sup.take())
}

// One strategy value is called from many goroutines at once (a shared Props, or a
// guardian): -race checks it, and every child's own count comes out exact.
func TestRestartingConcurrentUse(t *testing.T) {
	const workers, failures = 8, 200
	s := supervision.Restarting(nil, supervision.Intensity{MaxRestarts: 3, Within: time.Hour}, newFakeClock().Now)
	var wg sync.WaitGroup
	sups := make([]*fakeSupervisor, workers)
	for w := range workers {
		sups[w] = &fakeSupervisor{}
		wg.Go(func() {
			pid, rs := actor.NewPID("local", fmt.Sprint(w)), actor.NewRestartStatistics()
			for range failures {
				s.HandleFailure(nil, sups[w], pid, rs, "boom", nil)
			}
		})
	}
	wg.Wait()
	for w, sup := range sups {
		restarts, escalations := 0, 0
		for _, c := range sup.take() {
			switch c {
			case "restart " + fmt.Sprint(w):
				restarts++
			case "escalate boom <nil>":
				escalations++
			default:
				t.Fatalf("unexpected call %q", c)
			}
		}
		// Three restarts, then an escalation that forgets the history, over and over.
		require.Equal(t, failures*3/4, restarts)
		require.Equal(t, failures/4, escalations)
	}
}

// The strategy on real actors: a parent supervising one child with Restarting, under
// a guardian (the grandparent) that records each escalation and restarts the parent.

type (
	bump  struct{}
	probe struct{}
)

type childView struct{ count, incarnation int32 }

type escalation struct {
	who    *actor.PID
	reason any
}

// grandparent is a guardian strategy: it records the escalation, then restarts the
// escalating top-level actor.
type grandparent struct {
	mu  sync.Mutex
	got []escalation
	ch  chan escalation // optional
}

func (g *grandparent) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, who *actor.PID,
	_ *actor.RestartStatistics, reason, _ any) {
	g.mu.Lock()
	g.got = append(g.got, escalation{who, reason})
	g.mu.Unlock()
	if g.ch != nil {
		g.ch <- escalation{who, reason}
	}
	sup.RestartChildren(who)
}

func (g *grandparent) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.got)
}

type family struct {
	system       *actor.ActorSystem
	parent       *actor.PID
	guardian     *grandparent
	child        atomic.Pointer[actor.PID]
	parentStarts atomic.Int32
	childStarts  atomic.Int32    // incarnations of the child, over every parent incarnation
	spawned      chan *actor.PID // optional: each child spawned
}

// crashy counts, reports, and panics with the crash it is sent.
type crashy struct {
	f           *family
	count       int32
	incarnation int32
}

func (c *crashy) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		c.incarnation = c.f.childStarts.Add(1)
	case bump:
		c.count++
	case crash:
		panic(m)
	case probe:
		ctx.Respond(childView{c.count, c.incarnation})
	}
}

// parentActor keeps one child named "child": spawned on Started, and again when the
// child stops (but not while the parent itself restarts or stops).
type parentActor struct {
	f       *family
	leaving bool
}

func (p *parentActor) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		p.f.parentStarts.Add(1)
		p.spawn(ctx)
	case *actor.Restarting, *actor.Stopping:
		p.leaving = true
	case *actor.Terminated:
		if !p.leaving {
			p.spawn(ctx)
		}
	}
}

func (p *parentActor) spawn(ctx actor.Context) {
	pid, err := ctx.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &crashy{f: p.f} }), "child")
	if err != nil {
		panic(err) // seen by the test as an unexpected escalation
	}
	p.f.child.Store(pid)
	if p.f.spawned != nil {
		p.f.spawned <- pid
	}
}

func newSystem() *actor.ActorSystem {
	return actor.NewActorSystem(
		actor.WithDeadLetterThrottleInterval(10*time.Millisecond),
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }),
	)
}

func newFamily(strategy actor.SupervisorStrategy, g *grandparent, spawned chan *actor.PID) *family {
	f := &family{system: newSystem(), guardian: g, spawned: spawned}
	f.parent = f.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &parentActor{f: f} },
		actor.WithSupervisor(strategy), actor.WithGuardian(g)))
	return f
}

func (f *family) close() error {
	err := f.system.Root.StopFuture(f.parent).Wait()
	f.system.Shutdown()
	return err
}

// tb is what both *testing.T and *rapid.T offer.
type tb interface {
	require.TestingT
	Helper()
}

func (f *family) probe(t tb, pid *actor.PID) childView {
	t.Helper()
	v, err := f.probeErr(pid)
	require.NoError(t, err)
	return v
}

func (f *family) probeErr(pid *actor.PID) (childView, error) {
	v, err := f.system.Root.RequestFuture(pid, probe{}, futureTimeout).Result()
	if err != nil {
		return childView{}, err
	}
	return v.(childView), nil
}

func TestRestartingEscalatesTheFailurePastTheWindow(t *testing.T) {
	clock := newFakeClock()
	const window = time.Minute
	g := &grandparent{ch: make(chan escalation, 4)}
	spawned := make(chan *actor.PID, 8)
	f := newFamily(supervision.Restarting(decideCrash, supervision.Intensity{MaxRestarts: 2, Within: window}, clock.Now), g, spawned)
	t.Cleanup(func() { require.NoError(t, f.close()) })
	child := <-spawned
	boom := crash{actor.RestartDirective}

	// The first two panics restart the child: its state is reset.
	for i := range 2 {
		f.system.Root.Send(child, bump{})
		f.system.Root.Send(child, boom)
		// The probe queued behind the panic is handled by the restarted child.
		require.Equal(t, childView{count: 0, incarnation: int32(i + 2)}, f.probe(t, child), "restart %d", i+1)
		clock.Advance(window / 4)
	}
	require.Zero(t, g.count())

	// The third within the window escalates to the parent's own supervisor.
	f.system.Root.Send(child, boom)
	e := <-g.ch
	require.True(t, e.who.Equal(f.parent), "the parent escalates its own failure")
	require.Equal(t, boom, e.reason, "with the child's reason")
	// The grandparent restarted the parent, which stopped its child and spawned another.
	child = <-spawned
	require.Equal(t, childView{count: 0, incarnation: 4}, f.probe(t, child))
	require.EqualValues(t, 2, f.parentStarts.Load())

	// The new child has a fresh history; failures spaced wider than the window never
	// escalate.
	for i := range 5 {
		f.system.Root.Send(child, bump{})
		f.system.Root.Send(child, boom)
		require.Equal(t, childView{count: 0, incarnation: int32(5 + i)}, f.probe(t, child))
		clock.Advance(window / 2)
	}
	require.Equal(t, 1, g.count())
	require.Empty(t, spawned)
}

// Used as a guardian, Restarting stops the top-level actor past the limit; built-in
// escalation from a guardian would panic on the actor's goroutine and crash the process.
func TestRestartingAsGuardianStopsPastTheLimit(t *testing.T) {
	system := newSystem()
	t.Cleanup(system.Shutdown)
	clock := newFakeClock()
	starts := atomic.Int32{}
	pid := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *actor.Started:
			starts.Add(1)
		case crash:
			panic(m)
		case probe:
			ctx.Respond(starts.Load())
		}
	}, actor.WithGuardian(supervision.Restarting(decideCrash, supervision.Intensity{MaxRestarts: 1, Within: time.Hour}, clock.Now))))

	system.Root.Send(pid, crash{actor.RestartDirective})
	v, err := system.Root.RequestFuture(pid, probe{}, futureTimeout).Result()
	require.NoError(t, err)
	require.EqualValues(t, 2, v, "the first failure restarts it")

	system.Root.Send(pid, crash{actor.RestartDirective})
	require.NoError(t, system.Root.StopFuture(pid).Wait(), "the second stops it (Wait returns once it is gone)")
	_, err = system.Root.RequestFuture(pid, probe{}, futureTimeout).Result()
	require.ErrorIs(t, err, actor.ErrDeadLetter)
}

// Rapid schedules of failures and time advances, on real actors under fake time: each
// outcome (restart, resume, stop, escalation) is the one the restart-window model says.

type stepKind int

const (
	stepRestart stepKind = iota // a panic the decider restarts
	stepResume
	stepStop
	stepEscalate
	stepAdvance
)

func (k stepKind) String() string {
	return [...]string{"restart", "resume", "stop", "escalate", "advance"}[k]
}

type step struct {
	kind stepKind
	d    time.Duration // for stepAdvance
}

func (s step) String() string {
	if s.kind == stepAdvance {
		return "advance " + s.d.String()
	}
	return s.kind.String()
}

func TestRestartingScheduleProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		const unit = 100 * time.Millisecond
		in := supervision.Intensity{
			MaxRestarts: rapid.IntRange(1, 4).Draw(rt, "max"),
			Within:      time.Duration(rapid.IntRange(1, 20).Draw(rt, "within (units)")) * unit,
		}
		kind := rapid.SampledFrom([]stepKind{
			stepRestart, stepRestart, stepRestart, stepRestart, stepResume, stepStop, stepEscalate,
			stepAdvance, stepAdvance, stepAdvance,
		})
		steps := rapid.SliceOfN(rapid.Custom(func(rt *rapid.T) step {
			s := step{kind: kind.Draw(rt, "kind")}
			if s.kind == stepAdvance {
				// Multiples of unit up to 1.5 windows: failures land exactly on the
				// window's edge too.
				s.d = time.Duration(rapid.IntRange(0, int(3*in.Within/unit/2)).Draw(rt, "advance")) * unit
			}
			return s
		}), 1, 40).Draw(rt, "steps")

		// One bubble per schedule (rapid itself must run outside: it reads the test's
		// deadline and real time). The bubble reports a mismatch as an error, so that
		// rapid sees the failure and shrinks the schedule.
		var failure error
		synctest.Test(t, func(*testing.T) { failure = runSchedule(in, steps) })
		if failure != nil {
			rt.Fatal(failure)
		}
	})
}

// runSchedule runs steps on a fresh family inside a synctest bubble and checks each
// outcome against the model.
func runSchedule(in supervision.Intensity, steps []step) (failure error) {
	g := &grandparent{}
	f := newFamily(supervision.Restarting(decideCrash, in, nil), g, nil)
	defer func() {
		if err := f.close(); err != nil && failure == nil {
			failure = fmt.Errorf("stopping the parent: %w", err)
		}
	}()
	synctest.Wait()

	var history []time.Time // the model: the current child's failures inside the window
	replaced, escalations := 0, 0
	for i, s := range steps {
		if s.kind == stepAdvance {
			time.Sleep(s.d)
			continue
		}
		child := f.child.Load()
		f.system.Root.Send(child, bump{})
		before, err := f.probeErr(child)
		if err != nil {
			return fmt.Errorf("step %d (%v): probe before: %w", i, s, err)
		}
		parentsBefore, escalationsBefore := f.parentStarts.Load(), g.count()

		now := time.Now() // the failure's time: fake time stands still until all block
		f.system.Root.Send(child, crash{directive(s.kind)})
		synctest.Wait() // the failure has been handled through

		escalate, newChild := false, true
		switch s.kind {
		case stepRestart:
			restart, pruned := supervision.Decide(history, now, in)
			if restart {
				history = pruned
			} else {
				history, escalate = nil, true
			}
		case stepResume:
			newChild = false
		case stepStop, stepEscalate:
			history, escalate = nil, s.kind == stepEscalate
		}

		after, err := f.probeErr(f.child.Load())
		if err != nil {
			return fmt.Errorf("step %d (%v): probe after: %w", i, s, err)
		}
		want := childView{count: before.count, incarnation: before.incarnation} // resumed: state kept
		if newChild {
			want = childView{count: 0, incarnation: before.incarnation + 1} // a fresh child
			replaced++
		}
		wantParents, wantEscalations := parentsBefore, escalationsBefore
		if escalate {
			wantParents++
			wantEscalations++
			escalations++
		}
		if after != want || f.parentStarts.Load() != wantParents || g.count() != wantEscalations {
			return fmt.Errorf("step %d (%v) at history %v: child %+v, want %+v; parent starts %d, want %d; escalations %d, want %d",
				i, s, history, after, want, f.parentStarts.Load(), wantParents, g.count(), wantEscalations)
		}
	}
	if g.count() != escalations || int(f.childStarts.Load()) != 1+replaced {
		return fmt.Errorf("totals: %d escalations, want %d; %d child starts, want %d",
			g.count(), escalations, f.childStarts.Load(), 1+replaced)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, e := range g.got {
		if !e.who.Equal(f.parent) {
			return fmt.Errorf("escalation from %v, want the parent %v", e.who, f.parent)
		}
	}
	return nil
}

func directive(k stepKind) actor.Directive {
	return map[stepKind]actor.Directive{
		stepRestart:  actor.RestartDirective,
		stepResume:   actor.ResumeDirective,
		stepStop:     actor.StopDirective,
		stepEscalate: actor.EscalateDirective,
	}[k]
}
