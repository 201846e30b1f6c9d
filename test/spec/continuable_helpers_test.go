package spec

import (
	"context"
	"log/slog"
	"sync"
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

// Helpers of the continuable-subagent cases (SPEC §6, §8.5). Nothing here sleeps:
// a test waits on a recorded surface call, a store write it watches for, a runtime
// event, or a reply.

// contNote is one call an owner actor made on a parent's delivery surface.
type contNote struct {
	verb string // inject | steer | followup
	msg  owner.Message
}

// contSurface records every verb into a channel and never blocks.
type contSurface struct{ calls chan contNote }

func newContSurface() *contSurface { return &contSurface{calls: make(chan contNote, 64)} }

func (s *contSurface) record(verb string, m owner.Message) error {
	select {
	case s.calls <- contNote{verb: verb, msg: m}:
	default:
		panic("continuable test surface: more than 64 calls")
	}
	return nil
}

func (s *contSurface) Inject(m owner.Message) error   { return s.record("inject", m) }
func (s *contSurface) Steer(m owner.Message) error    { return s.record("steer", m) }
func (s *contSurface) Followup(m owner.Message) error { return s.record("followup", m) }

// next waits for the next call.
func (s *contSurface) next(t *testing.T) contNote {
	t.Helper()
	return recv(t, s.calls)
}

// none requires that no call is recorded now (call it after a positive barrier).
func (s *contSurface) none(t *testing.T) {
	t.Helper()
	select {
	case n := <-s.calls:
		t.Fatalf("unexpected %s of %q", n.verb, n.msg.Text)
	default:
	}
}

// contStore wraps the in-memory store with test hooks: a function run when a
// session is activated or a message accepted, gates that hold a child's turn
// start, and watches that fire when a matching log entry has been appended.
type contStore struct {
	*session.Memory
	mu struct {
		sync.Mutex
		onActivate func(id string)
		onAccept   func(id string, m session.InboxMessage)
		holds      map[string]chan struct{} // child id → closed to let its turns start
		watches    []*contWatch
	}
}

type contWatch struct {
	match func(id string, e session.Entry) bool
	fired chan session.Entry
}

func newContStore() *contStore { return &contStore{Memory: session.NewMemory()} }

func (s *contStore) Activate(ctx context.Context, id string) (session.Snapshot, error) {
	s.mu.Lock()
	hook := s.mu.onActivate
	s.mu.Unlock()
	snap, err := s.Memory.Activate(ctx, id)
	if hook != nil {
		hook(id)
	}
	return snap, err
}

func (s *contStore) Resume(ctx context.Context, id string) (session.Resumed, error) {
	s.mu.Lock()
	hook := s.mu.onActivate
	s.mu.Unlock()
	r, err := s.Memory.Resume(ctx, id)
	if hook != nil {
		hook(id)
	}
	return r, err
}

// ResumeAccept runs both hooks: the accept's before the call (whose check may
// still refuse the write), the activation's after it.
func (s *contStore) ResumeAccept(ctx context.Context, id string, m session.InboxMessage, start []session.Entry,
	check func(session.Head) error) (session.Resumed, session.InboxMessage, bool, error) {
	s.mu.Lock()
	onActivate, onAccept := s.mu.onActivate, s.mu.onAccept
	s.mu.Unlock()
	if onAccept != nil {
		onAccept(id, m)
	}
	r, out, started, err := s.Memory.ResumeAccept(ctx, id, m, start, check)
	if onActivate != nil {
		onActivate(id)
	}
	return r, out, started, err
}

func (s *contStore) Accept(ctx context.Context, id string, epoch uint64, m session.InboxMessage) (session.InboxMessage, error) {
	s.mu.Lock()
	hook := s.mu.onAccept
	s.mu.Unlock()
	if hook != nil {
		hook(id, m)
	}
	return s.Memory.Accept(ctx, id, epoch, m)
}

func (s *contStore) Append(ctx context.Context, id string, epoch uint64, entries ...session.Entry) error {
	s.mu.Lock()
	hold := s.mu.holds[id]
	s.mu.Unlock()
	if hold != nil && len(entries) > 0 && entries[0].Kind == session.EntryTurnStart {
		<-hold
	}
	if err := s.Memory.Append(ctx, id, epoch, entries...); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.mu.watches[:0]
	for _, w := range s.mu.watches {
		fired := false
		for _, e := range entries {
			if w.match(id, e) {
				w.fired <- e
				fired = true
				break
			}
		}
		if !fired {
			kept = append(kept, w)
		}
	}
	s.mu.watches = kept
	return nil
}

// holdTurns holds every turn start of child id until the returned release is called.
func (s *contStore) holdTurns(id string) (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	if s.mu.holds == nil {
		s.mu.holds = map[string]chan struct{}{}
	}
	s.mu.holds[id] = ch
	s.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

// watch returns a channel that receives the first entry appended to a session that
// matches.
func (s *contStore) watch(match func(id string, e session.Entry) bool) <-chan session.Entry {
	w := &contWatch{match: match, fired: make(chan session.Entry, 1)}
	s.mu.Lock()
	s.mu.watches = append(s.mu.watches, w)
	s.mu.Unlock()
	return w.fired
}

// turnEnd watches for the end of the turn of inbox message msgID in child id.
func (s *contStore) turnEnd(id, msgID string) <-chan session.Entry {
	return s.watch(func(sid string, e session.Entry) bool {
		return sid == id && e.InboxID == msgID && (e.Kind == session.EntryTurnEnd || e.Kind == session.EntryTurnAborted)
	})
}

func (s *contStore) setOnActivate(f func(string)) {
	s.mu.Lock()
	s.mu.onActivate = f
	s.mu.Unlock()
}

func (s *contStore) setOnAccept(f func(string, session.InboxMessage)) {
	s.mu.Lock()
	s.mu.onAccept = f
	s.mu.Unlock()
}

// userTexts and turnEnds read a child's Session log: the user messages its turns
// recorded, and the stop reason of each turn's end, in order.
func userTexts(t *testing.T, s session.Store, id string) []string {
	t.Helper()
	snap, err := s.Load(context.Background(), id)
	require.NoError(t, err)
	out := []string{}
	for _, e := range snap.Log {
		if e.Kind == session.EntryMessage && e.Role == "user" {
			out = append(out, e.Content[0].Text)
		}
	}
	return out
}

func turnEnds(t *testing.T, s session.Store, id string) []string {
	t.Helper()
	snap, err := s.Load(context.Background(), id)
	require.NoError(t, err)
	out := []string{}
	for _, e := range snap.Log {
		if e.Kind == session.EntryTurnEnd || e.Kind == session.EntryTurnAborted {
			out = append(out, e.StopReason)
		}
	}
	return out
}

// gateRunner is a TurnRunner whose turns answer "re: <input>" (or answers[input]);
// a turn whose input has a gate waits for it to be released or for its context to
// end (then it returns the cause, so the turn is aborted). It records every turn
// and the cancel cause of each cancelled one.
type gateRunner struct {
	before  func(ctx context.Context, turn subagent.Turn) // runs first, in the turn
	answers map[string]string
	mu      struct {
		sync.Mutex
		gates  map[string]chan struct{}
		inputs []string
		causes map[string]error
		agents map[string]*owner.Agent  // each child's agent, from its latest turn (TurnAgent)
		seen   map[string]chan struct{} // closed once a child's first turn has started
	}
	started chan string
}

func newGateRunner() *gateRunner {
	r := &gateRunner{answers: map[string]string{}, started: make(chan string, 256)}
	r.mu.gates = map[string]chan struct{}{}
	r.mu.causes = map[string]error{}
	r.mu.agents = map[string]*owner.Agent{}
	r.mu.seen = map[string]chan struct{}{}
	return r
}

// seenLocked returns the channel closed once session's first turn has started.
func (r *gateRunner) seenLocked(session string) chan struct{} {
	ch := r.mu.seen[session]
	if ch == nil {
		ch = make(chan struct{})
		r.mu.seen[session] = ch
	}
	return ch
}

// agent waits for a turn of child id to start and returns the agent its turn ran
// as (activation.TurnAgent): how a child's own tools get their credential.
func (r *gateRunner) agent(t *testing.T, id string) *owner.Agent {
	t.Helper()
	r.mu.Lock()
	ch := r.seenLocked(id)
	r.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("no turn of %s started", id)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.agents[id]
}

// hold makes turns whose input is text wait; the returned func releases them.
func (r *gateRunner) hold(text string) (release func()) {
	ch := make(chan struct{})
	r.mu.Lock()
	r.mu.gates[text] = ch
	r.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

func (r *gateRunner) RunTurn(ctx context.Context, turn subagent.Turn) (subagent.TurnResult, error) {
	in := turn.Input.Text()
	r.mu.Lock()
	r.mu.inputs = append(r.mu.inputs, in)
	_, again := r.mu.agents[turn.Session]
	r.mu.agents[turn.Session] = activation.TurnAgent(ctx)
	if !again {
		close(r.seenLocked(turn.Session))
	}
	gate := r.mu.gates[in]
	answer, ok := r.answers[in]
	r.mu.Unlock()
	select {
	case r.started <- in:
	default: // nobody is watching this many turns
	}
	if r.before != nil {
		r.before(ctx, turn)
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			r.mu.Lock()
			r.mu.causes[in] = context.Cause(ctx)
			r.mu.Unlock()
			return subagent.TurnResult{}, context.Cause(ctx)
		}
	}
	if !ok {
		answer = "re: " + in
	}
	return subagent.TurnResult{Messages: []subagent.Message{{Role: "assistant",
		Content: []subagent.Block{{Type: "text", Text: answer}}}}}, nil
}

func (r *gateRunner) inputs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string{}, r.mu.inputs...)
}

// cause returns the cancel cause of the turn whose input was text (nil: never cancelled).
func (r *gateRunner) cause(text string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.causes[text]
}

// waitStarted waits until a turn with input text has started.
func (r *gateRunner) waitStarted(t *testing.T, text string) {
	t.Helper()
	for {
		if recv(t, r.started) == text {
			return
		}
	}
}

// contEvents records the runtime's subagent/start and subagent/end events.
type contEvents struct{ ch chan subagent.Event }

func (e *contEvents) next(t *testing.T) subagent.Event {
	t.Helper()
	return recv(t, e.ch)
}

// nextEnd waits for the subagent/end of child id.
func (e *contEvents) nextEnd(t *testing.T, id string) subagent.Event {
	t.Helper()
	for {
		if ev := e.next(t); ev.Type == subagent.EventEnd && ev.ID == id {
			return ev
		}
	}
}

// contEnv is a served System with a subagent runtime (the spawn provider over the
// gate runner), a watched store and the continuation manager.
type contEnv struct {
	sys    *troupe.System
	logs   *troupetest.Logs
	rt     *subagent.Runtime
	store  *contStore
	runner *gateRunner
	m      *activation.Manager
	events *contEvents
	// parents is the last top-level agent made per session (test goroutine only).
	parents map[string]*owner.Agent
}

func newContEnv(t *testing.T, opts ...activation.Option) *contEnv {
	t.Helper()
	sys, logs := troupetest.Served(t)
	e := &contEnv{sys: sys, logs: logs, store: newContStore(), runner: newGateRunner(),
		events: &contEvents{ch: make(chan subagent.Event, 256)}, parents: map[string]*owner.Agent{}}
	var err error
	e.rt, err = subagent.NewRuntime(sys.Actors(), sys.Scope(), nil)
	require.NoError(t, err)
	_, err = e.rt.RegisterProvider(t.Context(), sys.Scope(), subagent.NewSpawn(sys.Actors(), e.runner))
	require.NoError(t, err)
	_, err = e.rt.Listen(t.Context(), sys.Scope(), func(ev subagent.Event) {
		if ev.Type == subagent.EventStart || ev.Type == subagent.EventEnd {
			e.events.ch <- ev
		}
	})
	require.NoError(t, err)
	opts = append([]activation.Option{activation.WithLogger(slog.New(logs))}, opts...)
	e.m, err = sys.StartContinuations(e.store, e.rt, e.runner, nil, opts...)
	require.NoError(t, err)
	return e
}

// parent spawns and registers a top-level agent with a recording surface.
func (e *contEnv) parent(t *testing.T, session string) (*owner.Agent, *contSurface) {
	t.Helper()
	s := newContSurface()
	a, err := e.sys.NewAgent(nil, session, owner.Options{Surface: s})
	require.NoError(t, err)
	// A second parent of one session replaces the first with its handle (the
	// registration rule); the first stays live, stale.
	if old := e.parents[session]; old != nil {
		require.NoError(t, e.sys.Jobs().ReplaceAgent(context.Background(), old, a))
	} else {
		require.NoError(t, e.sys.Jobs().RegisterAgent(context.Background(), a))
	}
	e.parents[session] = a
	return a, s
}

// start starts child id of parent with prompt and requires acceptance.
func (e *contEnv) start(t *testing.T, parent *owner.Agent, id, prompt string) string {
	t.Helper()
	got, msgID, err := e.m.Start(ctx(t), parent, "spawn", "label "+id, id, subagent.Request{Prompt: prompt})
	require.NoError(t, err)
	require.Equal(t, id, got)
	require.NotEmpty(t, msgID)
	return msgID
}

// followup sends a followup from parent and requires acceptance.
func (e *contEnv) followup(t *testing.T, parent *owner.Agent, id, content string) string {
	t.Helper()
	msgID, err := e.m.Followup(ctx(t), parent, id, content, session.Source{Kind: "coordinator", Form: "relay", SenderSessionID: parent.Session()})
	require.NoError(t, err)
	return msgID
}

// registered returns the PID registered for a session (nil: none).
func (e *contEnv) registered(session string) string {
	if pid := e.sys.Jobs().RegisteredAgent(context.Background(), session); pid != nil {
		return pid.Id
	}
	return ""
}

// requireSubagentError requires a coded error with exactly msg ("" skips the text).
func requireSubagentError(t *testing.T, err error, code messages.Code, msg string) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, code, messages.CodeOf(err), "error %q", err)
	if msg != "" {
		require.Equal(t, msg, err.Error())
	}
}

// notice waits for the next surface call and requires it to be child id's
// settlement notice, returning it.
func requireSettlementNotice(t *testing.T, s *contSurface, id string) contNote {
	t.Helper()
	n := s.next(t)
	require.Equal(t, "subagent-settled", n.msg.Source.Kind, "call %s %q", n.verb, n.msg.Text)
	require.Equal(t, id, n.msg.Source.SenderSessionID)
	return n
}
