// Package authz is troupe's authorization suite: every way a caller that lies —
// about its session, its incarnation, its child id, or its sender — tries to reach
// another agent's jobs, children or surface, refused with a coded error and without
// one producer or runner call. docs/THREAT-MODEL.md names the rule each test pins.
package authz

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/troupetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const requestTimeout = 5 * time.Second

// counting is a producer that counts every hook call troupe makes on it. Cancel
// settles the job killed (once), so a teardown ends it.
type counting struct {
	cancels, reads atomic.Int64
	once           sync.Once
	done           chan job.Outcome
}

func newCounting() *counting { return &counting{done: make(chan job.Outcome, 1)} }

func (p *counting) spec(a *owner.Agent) job.Spec {
	return job.Spec{Kind: "bash", Label: "secret job", Owner: a, Run: func() (job.Hooks, error) {
		return job.Hooks{
			Cancel: func(string) error {
				p.cancels.Add(1)
				p.once.Do(func() { p.done <- job.Outcome{Status: job.Killed, Detail: "killed"} })
				return nil
			},
			ReadOutput: func() (string, error) { p.reads.Add(1); return "secret output", nil },
			Done:       p.done,
		}, nil
	}}
}

// calls is the number of hook calls after Run.
func (p *counting) calls() int64 { return p.cancels.Load() + p.reads.Load() }

// recSurface records what reaches an agent's surface.
type recSurface struct {
	mu   sync.Mutex
	msgs []owner.Message
}

func (s *recSurface) add(m owner.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgs = append(s.msgs, m)
	return nil
}
func (s *recSurface) Inject(m owner.Message) error   { return s.add(m) }
func (s *recSurface) Steer(m owner.Message) error    { return s.add(m) }
func (s *recSurface) Followup(m owner.Message) error { return s.add(m) }
func (s *recSurface) all() []owner.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]owner.Message(nil), s.msgs...)
}

// recRunner is the continuable children's turn runner: it records every turn's
// input text, and holds turns whose text is in hold until released.
type recRunner struct {
	mu      sync.Mutex
	texts   []string
	hold    chan struct{} // closed to release the turns whose text starts with "hold:"
	started chan string   // the text of every turn, as it starts
}

func newRecRunner() *recRunner {
	return &recRunner{hold: make(chan struct{}), started: make(chan string, 256)}
}

func (r *recRunner) release() {
	select {
	case <-r.hold:
	default:
		close(r.hold)
	}
}

func (r *recRunner) RunTurn(ctx context.Context, turn subagent.Turn) (subagent.TurnResult, error) {
	text := ""
	if len(turn.Input.Content) > 0 {
		text = turn.Input.Content[0].Text
	}
	r.mu.Lock()
	r.texts = append(r.texts, text)
	r.mu.Unlock()
	r.started <- text
	if strings.HasPrefix(text, "hold:") {
		select {
		case <-r.hold:
		case <-ctx.Done():
			return subagent.TurnResult{}, context.Cause(ctx)
		}
	}
	return subagent.TurnResult{Messages: []subagent.Message{{Role: "assistant",
		Content: []subagent.Block{{Type: "text", Text: "done: " + text}}}}}, nil
}

func (r *recRunner) saw(text string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, t := range r.texts {
		if t == text {
			n++
		}
	}
	return n
}

// env is a served System with a continuation manager whose child agents are
// recorded as the composer makes them (the composer holds every credential it mints).
type env struct {
	sys    *troupe.System
	m      *activation.Manager
	store  session.Store
	runner *recRunner
	mu     sync.Mutex
	kids   map[string]*owner.Agent
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{runner: newRecRunner(), kids: map[string]*owner.Agent{}, store: session.NewMemory()}
	var logs *troupetest.Logs
	e.sys, logs = troupetest.Served(t)
	t.Cleanup(e.runner.release) // before the System's shutdown (cleanups run last-in first-out)
	rt, err := subagent.NewRuntime(e.sys.Actors(), e.sys.Scope(), nil)
	require.NoError(t, err)
	_, err = rt.RegisterProvider(t.Context(), e.sys.Scope(), subagent.NewSpawn(e.sys.Actors(), e.runner))
	require.NoError(t, err)
	e.m, err = activation.NewManager(e.sys.Actors(), activation.Deps{
		Store: e.store, Runtime: rt, Runner: e.runner, Jobs: e.sys.Jobs(), Logger: slog.New(logs),
		NewAgent: func(id string, inbox owner.Surface) (*owner.Agent, error) {
			a, err := e.sys.NewAgent(nil, id, owner.Options{Surface: inbox})
			if err != nil {
				return nil, err
			}
			if err := e.sys.Jobs().RegisterAgent(context.Background(), a); err != nil {
				_ = a.Dispose(context.Background())
				return nil, err
			}
			e.mu.Lock()
			e.kids[id] = a
			e.mu.Unlock()
			return a, nil
		},
	})
	require.NoError(t, err)
	root := e.sys.Actors().Root
	_, err = e.sys.Scope().Add("continuations.drain()", func(ctx context.Context) error {
		err := e.m.Drain(ctx)
		_ = root.StopFuture(e.m.PID()).Wait()
		return err
	})
	require.NoError(t, err)
	return e
}

func (e *env) kid(id string) *owner.Agent {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.kids[id]
}

// settled waits until no Activation is resident.
func (e *env) settled(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool { return e.m.Live(context.Background()) == 0 }, 10*time.Second, time.Millisecond)
}

// parent spawns and registers a top-level agent with a recording surface.
func (e *env) parent(t *testing.T, session string) (*owner.Agent, *recSurface) {
	t.Helper()
	s := &recSurface{}
	a, err := e.sys.NewAgent(nil, session, owner.Options{Surface: s})
	require.NoError(t, err)
	require.NoError(t, e.sys.Jobs().RegisterAgent(context.Background(), a))
	return a, s
}

// awaitStarted waits for the turn whose text is text to start.
func (r *recRunner) awaitStarted(t *testing.T, text string) {
	t.Helper()
	for {
		select {
		case s := <-r.started:
			if s == text {
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("turn %q never started", text)
		}
	}
}
