// Package troupetest has what tests of troupe, and of code built on it, need: a
// System wired for tests, a controllable producer, and a warning recorder.
package troupetest

import (
	"context"
	"github.com/troupe-rt/troupe/actors/registry"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/messages"
)

// shutdownBudget bounds a test system's shutdown.
const shutdownBudget = 10 * time.Second

// NewSystem starts a System for t with a recording logger and shuts it down when t
// ends. mutate, if given, edits the config first.
func NewSystem(t testing.TB, mutate ...func(*troupe.Config)) (*troupe.System, *Logs) {
	t.Helper()
	logs := &Logs{}
	cfg := troupe.DefaultConfig()
	cfg.Logger = slog.New(logs)
	for _, m := range mutate {
		m(&cfg)
	}
	sys, err := troupe.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownBudget)
		defer cancel()
		require.NoError(t, sys.Shutdown(ctx))
	})
	return sys, logs
}

// Served returns a System with a global job controller and a mounted agent registry.
func Served(t testing.TB, mutate ...func(*troupe.Config)) (*troupe.System, *Logs) {
	t.Helper()
	sys, logs := NewSystem(t, mutate...)
	_, err := sys.Jobs().AttachController(context.Background(), sys.Scope(), "test")
	require.NoError(t, err)
	_, err = sys.Jobs().MountAgents(context.Background(), sys.Scope())
	require.NoError(t, err)
	return sys, logs
}

// Agent spawns and registers an agent incarnation of session under the global scope.
// If an incarnation this helper made for session is still registered, the new one
// replaces it with its handle (Jobs.ReplaceAgent): the old one stays live, stale.
func Agent(t testing.TB, sys *troupe.System, session string) *owner.Agent {
	t.Helper()
	a, err := sys.NewAgent(nil, session)
	require.NoError(t, err)
	k := agentKey{sys, session}
	made.Lock()
	old := made.last[k]
	made.last[k] = a
	made.Unlock()
	if old == nil {
		t.Cleanup(func() {
			made.Lock()
			delete(made.last, k)
			made.Unlock()
		})
		require.NoError(t, sys.Jobs().RegisterAgent(context.Background(), a))
		return a
	}
	require.NoError(t, sys.Jobs().ReplaceAgent(context.Background(), old, a))
	return a
}

// As is the registry caller for session in sys as this helper's composer holds it:
// registry.NoCaller for "", else the last agent incarnation Agent made for
// session (registry.AsAgent: the registry still checks it is the registered one).
// It fails the test if Agent made none: a session string is no authority.
func As(t testing.TB, sys *troupe.System, session string) registry.Caller {
	t.Helper()
	if session == "" {
		return registry.NoCaller
	}
	a := AgentOf(sys, session)
	if a == nil {
		t.Fatalf("troupetest.As: no agent made for session %q", session)
	}
	return registry.AsAgent(a)
}

// AgentOf is the last agent incarnation Agent made for session in sys (nil if none).
func AgentOf(sys *troupe.System, session string) *owner.Agent {
	made.Lock()
	defer made.Unlock()
	return made.last[agentKey{sys, session}]
}

type agentKey struct {
	sys     *troupe.System
	session string
}

// made holds the last incarnation Agent made per system and session (test-side).
var made = struct {
	sync.Mutex
	last map[agentKey]*owner.Agent
}{last: map[agentKey]*owner.Agent{}}

// Logs is a slog.Handler that records messages, for asserting SPEC's warning texts.
type Logs struct {
	mu struct {
		sync.Mutex
		lines []string
	}
}

func (l *Logs) Enabled(context.Context, slog.Level) bool { return true }
func (l *Logs) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.lines = append(l.mu.lines, r.Message)
	return nil
}
func (l *Logs) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *Logs) WithGroup(string) slog.Handler      { return l }

// Lines returns the recorded messages.
func (l *Logs) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.mu.lines...)
}

// Contains reports whether some recorded message contains sub.
func (l *Logs) Contains(sub string) bool {
	for _, line := range l.Lines() {
		if strings.Contains(line, sub) {
			return true
		}
	}
	return false
}

// Producer is a controllable producer. Settle sends its outcome; Cancel records the
// reason and, if OnCancel is set, settles with it; CancelErr makes Cancel fail.
// Outputs queued with Emit are what successive ReadOutput calls return.
type Producer struct {
	Kind, Label string
	// Stream makes the job a stream kind (ReadOutput present).
	Stream bool
	// OnCancel, if set, is the outcome a successful Cancel settles with.
	OnCancel *job.Outcome
	// CancelErr, if set, is returned by Cancel (which then changes nothing).
	CancelErr error
	// Record, if set, is declared as the job's output record.
	Record *job.Record
	// Channel makes the producer settle through a Done channel; by default it
	// settles through OnSettle (a job.Settler). CloseDone needs a channel.
	Channel bool

	done      chan job.Outcome
	settler   *job.Settler
	cancelled chan string
	mu        struct {
		sync.Mutex
		cancels []string
		outputs []string
		runs    int
		settled bool
	}
}

// NewProducer returns a final-output producer of kind "bash".
func NewProducer() *Producer {
	return &Producer{Kind: "bash", Label: "test job", cancelled: make(chan string, 64)}
}

// Spec returns a spec running p, owned by a (nil: unowned).
func (p *Producer) Spec(a *owner.Agent) job.Spec {
	return job.Spec{Kind: p.Kind, Label: p.Label, Owner: a, Run: p.Run, Record: p.Record}
}

// Run is the producer's Run.
func (p *Producer) Run() (job.Hooks, error) {
	p.mu.Lock()
	p.mu.runs++
	h := job.Hooks{Cancel: p.cancel}
	if p.Channel {
		p.done, p.settler = make(chan job.Outcome, 1), nil
		h.Done = p.done
	} else {
		p.done, p.settler = nil, &job.Settler{}
		h.OnSettle = p.settler.OnSettle
		// Settle hands the outcome over outside p's lock: from the test's goroutine,
		// or from Cancel's (a runner's, or the job actor's own, which is not idle).
		h.SettleInline = true
	}
	p.mu.Unlock()
	if p.Stream {
		h.ReadOutput = p.readOutput
		h.ReadNonBlocking = true // readOutput pops a queued string under p's short lock
	}
	return h, nil
}

func (p *Producer) cancel(reason string) error {
	p.mu.Lock()
	p.mu.cancels = append(p.mu.cancels, reason)
	p.mu.Unlock()
	select {
	case p.cancelled <- reason:
	default:
	}
	if p.CancelErr != nil {
		return p.CancelErr
	}
	if p.OnCancel != nil {
		p.Settle(*p.OnCancel)
	}
	return nil
}

func (p *Producer) readOutput() (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.mu.outputs) == 0 {
		return "", nil
	}
	s := p.mu.outputs[0]
	p.mu.outputs = p.mu.outputs[1:]
	return s, nil
}

// Emit queues the value of a later ReadOutput call.
func (p *Producer) Emit(s ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.outputs = append(p.mu.outputs, s...)
}

// Settle sends the outcome; only the first call sends (the Done contract). The
// outcome is handed over outside the producer's lock: with OnSettle, troupe's
// settle runs on this goroutine.
func (p *Producer) Settle(o job.Outcome) {
	p.mu.Lock()
	if p.mu.settled {
		p.mu.Unlock()
		return
	}
	p.mu.settled = true
	settler, done := p.settler, p.done
	p.mu.Unlock()
	if settler != nil {
		settler.Settle(o)
		return
	}
	done <- o // room for one
}

// CloseDone closes Done without an outcome (a contract violation). It needs
// Channel set before the job started.
func (p *Producer) CloseDone() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		panic("troupetest: CloseDone needs Producer.Channel (a Done channel to close)")
	}
	p.mu.settled = true
	close(p.done)
}

// Cancels returns the reasons Cancel was called with.
func (p *Producer) Cancels() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.mu.cancels...)
}

// Runs returns how many times Run was called.
func (p *Producer) Runs() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.runs
}

// Settled waits (without claiming) until job id has settled and its observers ran.
func Settled(t testing.TB, sys *troupe.System, id string, caller registry.Caller) *messages.JobSnapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), shutdownBudget)
	defer cancel()
	snap, err := sys.Jobs().AwaitSettled(ctx, id, caller)
	require.NoError(t, err)
	return snap
}

// Barrier waits until every message already sent to the registry has been processed
// (a round trip through its mailbox). Job actors' own mailboxes are not drained by
// it: wait on Settled, a reply or an observer for those.
func Barrier(t testing.TB, sys *troupe.System) {
	t.Helper()
	_, err := sys.Jobs().List(context.Background(), registry.NoCaller)
	require.NoError(t, err)
}

// NextCancel waits for the next Cancel call and returns its reason.
func (p *Producer) NextCancel(t testing.TB) string {
	t.Helper()
	select {
	case r := <-p.cancelled:
		return r
	case <-time.After(shutdownBudget):
		t.Fatal("producer: no cancel arrived")
		return ""
	}
}

// AwaitWaiters returns once n waits are pending on job id (SPEC §1.3 rule 11's test
// inspection). Registering a wait produces no event an observer could wait on, so
// this re-asks the job — each ask a round trip through the registry and the job
// actor, which orders it after every wait already routed there — until the count
// is n. It fails the test if the count is not reached within the shutdown budget.
func AwaitWaiters(t testing.TB, sys *troupe.System, id string, n int) {
	t.Helper()
	deadline := time.Now().Add(shutdownBudget)
	for {
		got, err := sys.Jobs().Waiters(context.Background(), id)
		require.NoError(t, err)
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: %d waits pending, want %d", id, got, n)
		}
		runtime.Gosched()
	}
}
