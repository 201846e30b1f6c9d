package spec

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/scope"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/tools/jobtools"
	"github.com/troupe-rt/troupe/troupetest"
)

// Helpers of the model-tool cases (SPEC §3, §8.2). The tools run through the
// mount's own Pipeline, so every result passes §3.6's finalize step as an
// embedder's tool runtime would apply it.

// note is one call an owner actor made on its agent's delivery surface.
type note struct {
	verb string // "inject", "steer" or "followup"
	msg  owner.Message
}

// surface is a recording owner.Surface: every verb records the message and returns
// fail (nil: success). It never blocks, as the Surface contract requires.
type surface struct {
	calls chan note
	fail  error
}

func newSurface() *surface { return &surface{calls: make(chan note, 256)} }

func (s *surface) record(verb string, m owner.Message) error {
	select {
	case s.calls <- note{verb: verb, msg: m}:
	default:
		panic("test surface: more than 256 calls recorded")
	}
	return s.fail
}

func (s *surface) Inject(m owner.Message) error   { return s.record("inject", m) }
func (s *surface) Steer(m owner.Message) error    { return s.record("steer", m) }
func (s *surface) Followup(m owner.Message) error { return s.record("followup", m) }

// drain returns the calls recorded so far without waiting. Call it after a
// positive barrier (quiesce, a probe), never to wait for a call.
func (s *surface) drain() []note {
	var out []note
	for {
		select {
		case n := <-s.calls:
			out = append(out, n)
		default:
			return out
		}
	}
}

// verbs returns the verbs of notes.
func verbs(notes []note) []string {
	out := []string{}
	for _, n := range notes {
		out = append(out, n.verb)
	}
	return out
}

// toolEnv is a System with the agent registry mounted in the global scope and the
// job tools mounted in one scope.
type toolEnv struct {
	sys    *troupe.System
	logs   *troupetest.Logs
	mount  *jobtools.Mount
	agents *scope.Effect // the agent-registry mount
	calls  atomic.Uint64
	mu     sync.Mutex
	made   map[string]*owner.Agent // the last incarnation agent made per session
}

// serveTools mounts the job tools with cfg in the global scope, so they serve every
// owner and unowned jobs too.
func serveTools(t *testing.T, cfg jobtools.Config) *toolEnv {
	t.Helper()
	sys, logs := troupetest.NewSystem(t)
	e := &toolEnv{sys: sys, logs: logs}
	var err error
	e.agents, err = sys.Jobs().MountAgents(context.Background(), sys.Scope())
	require.NoError(t, err)
	e.mount, err = jobtools.MountIn(t.Context(), sys.Jobs(), sys.Scope(), cfg)
	require.NoError(t, err)
	return e
}

// agent spawns and registers an incarnation of session composed under parent
// (nil: the global scope), with a recording surface.
func (e *toolEnv) agent(t *testing.T, parent *scope.Scope, session string) (*owner.Agent, *surface) {
	t.Helper()
	s := newSurface()
	a, err := e.sys.NewAgent(parent, session, owner.Options{Surface: s})
	require.NoError(t, err)
	require.NoError(t, e.sys.Jobs().RegisterAgent(context.Background(), a))
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.made == nil {
		e.made = map[string]*owner.Agent{}
	}
	e.made[session] = a
	return a, s
}

// call runs tool name with the JSON args as session's agent — the last one
// e.agent or troupetest.Agent made for it — through the mount's pipeline.
func (e *toolEnv) call(c context.Context, session, name, args string) tools.Result {
	var caller tools.Caller
	if session != "" {
		e.mu.Lock()
		a := e.made[session]
		e.mu.Unlock()
		if a == nil {
			a = troupetest.AgentOf(e.sys, session)
		}
		if a == nil {
			panic("toolEnv.call: no agent made for session " + session)
		}
		caller = tools.AsAgent(a)
	}
	return callTool(c, e.mount, e.calls.Add(1), caller, name, args)
}

func callTool(c context.Context, m *jobtools.Mount, seq uint64, caller tools.Caller, name, args string) tools.Result {
	var tool tools.Tool
	for _, tl := range m.All() {
		if tl.Name == name {
			tool = tl
		}
	}
	call := tools.Call{ID: fmt.Sprintf("call-%d", seq), Name: name, Args: json.RawMessage(args), Caller: caller}
	return m.Pipeline().Run(c, tool, call)
}

// text returns a result's single text block.
func text(t *testing.T, res tools.Result) string {
	t.Helper()
	s, ok := res.SingleText()
	require.True(t, ok, "result is not one text block: %#v", res.Content)
	return s
}

// okText requires a successful result and returns its text.
func okText(t *testing.T, res tools.Result) string {
	t.Helper()
	require.False(t, res.IsError, "errored result: %#v", res.Content)
	return text(t, res)
}

// errText requires an errored result and returns its text.
func errText(t *testing.T, res tools.Result) string {
	t.Helper()
	require.True(t, res.IsError, "successful result: %#v", res.Content)
	return text(t, res)
}

// quiesce waits until job id has settled and its observers ran — the tool-jobs
// listener has then sent any notice to the owner actor — and then asks a's owner
// actor for its stats. The stats request is enqueued after that notice, so when it
// returns every surface call for the job has been made (or never will be).
func quiesce(t *testing.T, e *toolEnv, a *owner.Agent, id string) owner.Stats {
	t.Helper()
	// As the user: a's incarnation may have left the agent registry (or the
	// registry itself been unmounted) by now.
	troupetest.Settled(t, e.sys, id, asSession(a.Session()))
	return stats(t, a)
}

// stats asks a's owner actor for its delivery state.
func stats(t *testing.T, a *owner.Agent) owner.Stats {
	t.Helper()
	st, err := a.Stats(ctx(t))
	require.NoError(t, err)
	return st
}

// nextNote waits for the next surface call, failing after replyBudget.
func nextNote(t *testing.T, s *surface) note {
	t.Helper()
	select {
	case n := <-s.calls:
		return n
	case <-time.After(replyBudget):
		t.Fatal("no notice arrived")
		return note{}
	}
}

// probeBeforeStop adds an effect to a's scope that, when the scope is disposed,
// asks the owner actor for its stats. Added before a's first job starts, it is older
// than the `jobs.ownerCleanup()` effect and younger than the owner's stop, so it
// runs after the owner's jobs were torn down (their settlements and observers
// done) and before the owner actor stops: a positive barrier for "no notice".
func probeBeforeStop(t *testing.T, a *owner.Agent) <-chan owner.Stats {
	t.Helper()
	out := make(chan owner.Stats, 1)
	_, err := a.Scope().Add("test.probe", func(context.Context) error {
		c, cancel := context.WithTimeout(context.Background(), replyBudget)
		defer cancel()
		st, err := a.Stats(c)
		if err == nil {
			out <- st
		}
		return err
	})
	require.NoError(t, err)
	return out
}

func i64(v int64) *int64 { return &v }
