package activation_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/troupetest"
)

// verbSurface records which verb delivered each message.
type verbSurface struct{ calls chan string }

func (s *verbSurface) Inject(m owner.Message) error   { s.calls <- "inject " + m.Text; return nil }
func (s *verbSurface) Steer(m owner.Message) error    { s.calls <- "steer " + m.Text; return nil }
func (s *verbSurface) Followup(m owner.Message) error { s.calls <- "followup " + m.Text; return nil }

func (s *verbSurface) next(t *testing.T) string {
	t.Helper()
	select {
	case c := <-s.calls:
		return c
	case <-time.After(budget):
		t.Fatal("no surface call")
		return ""
	}
}

type drainEnv struct {
	sys    *troupe.System
	m      *activation.Manager
	ends   chan string
	held   chan string // inputs of held turns, as they start
	runner *subagent.Scripted
}

// newDrainEnv: turns whose input starts with "hold" block until cancelled; a turn
// of "C" with input "spawn G" starts G below C first.
func newDrainEnv(t *testing.T) *drainEnv {
	sys, logs := troupetest.Served(t)
	rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), nil)
	require.NoError(t, err)
	e := &drainEnv{sys: sys, ends: make(chan string, 16), held: make(chan string, 16), runner: subagent.NewScripted()}
	e.runner.Match = func(turn subagent.Turn) (subagent.Reply, bool) {
		if turn.Input.Text() == "spawn G" {
			_, _, err := e.m.Start(context.Background(), e.m.ResidentAgent(turn.Session), "spawn", "g", "G", subagent.Request{Prompt: "hold g"})
			if err != nil {
				return subagent.Reply{Err: err}, true
			}
			return subagent.Reply{Block: true}, true
		}
		if len(turn.Input.Text()) >= 4 && turn.Input.Text()[:4] == "hold" {
			e.held <- turn.Input.Text()
			return subagent.Reply{Block: true}, true
		}
		return subagent.Reply{Text: "ok"}, true
	}
	_, err = rt.RegisterProvider(t.Context(), sys.Scope(), subagent.NewSpawn(sys.Actors(), e.runner))
	require.NoError(t, err)
	_, err = rt.Listen(t.Context(), sys.Scope(), func(ev subagent.Event) {
		if ev.Type == subagent.EventEnd {
			e.ends <- ev.ID
		}
	})
	require.NoError(t, err)
	e.m, err = sys.StartContinuations(session.NewMemory(), rt, e.runner, nil, activation.WithLogger(slog.New(logs)))
	require.NoError(t, err)
	return e
}

func (e *drainEnv) parent(t *testing.T, id string) (*owner.Agent, *verbSurface) {
	return e.replace(t, nil, id)
}

// replace registers a new instance of session id in place of old (nil: none).
func (e *drainEnv) replace(t *testing.T, old *owner.Agent, id string) (*owner.Agent, *verbSurface) {
	s := &verbSurface{calls: make(chan string, 16)}
	p, err := e.sys.NewAgent(nil, id, owner.Options{Surface: s})
	require.NoError(t, err)
	if old == nil {
		require.NoError(t, e.sys.Jobs().RegisterAgent(context.Background(), p))
	} else {
		require.NoError(t, e.sys.Jobs().ReplaceAgent(context.Background(), old, p))
	}
	return p, s
}

func (e *drainEnv) end(t *testing.T) string {
	t.Helper()
	select {
	case id := <-e.ends:
		return id
	case <-time.After(budget):
		t.Fatal("no subagent/end")
		return ""
	}
}

// While the manager drains, a parent's lineage is tearing down: the settlement
// notice of a child stopped by the drain is injected, never a new turn.
func TestDrainInjectsTheNotice(t *testing.T) {
	e := newDrainEnv(t)
	p, s := e.parent(t, "P")
	_, _, err := e.m.Start(context.Background(), p, "spawn", "held", "c", subagent.Request{Prompt: "hold"})
	require.NoError(t, err)
	require.NoError(t, e.m.Drain(context.Background()))
	require.Equal(t, "inject Background subagent c was stopped before it finished.", s.next(t))
	require.Zero(t, e.m.Live(context.Background()))
}

// drainContinuableDescendants disposes the strict descendants child-first, closes
// admission below that exact parent instance, and leaves a same-session
// replacement free.
func TestDrainDescendantsChildFirstAndScopedAdmission(t *testing.T) {
	e := newDrainEnv(t)
	p, s := e.parent(t, "P")
	_, _, err := e.m.Start(context.Background(), p, "spawn", "c", "C", subagent.Request{Prompt: "spawn G"})
	require.NoError(t, err)
	select {
	case in := <-e.held:
		require.Equal(t, "hold g", in, "G runs under C")
	case <-time.After(budget):
		t.Fatal("G never ran")
	}
	require.Equal(t, 2, e.m.Live(context.Background()))

	require.NoError(t, e.m.DrainContinuableDescendants(context.Background(), []*owner.Agent{p}))
	require.Equal(t, []string{"G", "C"}, []string{e.end(t), e.end(t)}, "child-first")
	require.Zero(t, e.m.Live(context.Background()))
	require.Equal(t, "inject Background subagent C was stopped before it finished.", s.next(t))

	_, _, err = e.m.Start(context.Background(), p, "spawn", "d", "D", subagent.Request{Prompt: "x"})
	require.Equal(t, subagent.CodeDraining, messages.CodeOf(err))
	require.EqualError(t, err, `continuable subagents below parent "P" are draining; the operation was not admitted`)

	replacement, s2 := e.replace(t, p, "P")
	_, _, err = e.m.Start(context.Background(), replacement, "spawn", "d", "D", subagent.Request{Prompt: "x"})
	require.NoError(t, err, "a same-session replacement is not poisoned")
	require.Equal(t, "followup Background subagent D finished and will do no further work unless you send it more.", s2.next(t))
}
