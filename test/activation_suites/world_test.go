package activationsuites

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/harness"
	"github.com/troupe-rt/troupe/internal/fault"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/troupetest"
)

// budget bounds every wait for the runtime; nothing waits for it to pass.
const budget = 20 * time.Second

const (
	schedulesEnv = "TROUPE_CHAOS_SCHEDULES"
)

// mode is how a world schedules its activations.
type mode int

const (
	deterministic mode = iota // activations on harness.Dispatcher
	stress                    // troupe's default dispatcher plus seeded noise
)

func (m mode) String() string { return [...]string{"deterministic", "stress"}[m] }

// schedules returns how many schedules a test runs per mode: TROUPE_CHAOS_SCHEDULES
// if set, else def (or defRace under -race).
func schedules(t *testing.T, def, defRace int) int {
	t.Helper()
	if s := os.Getenv(schedulesEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive integer", schedulesEnv, s)
		}
		return n
	}
	if raceEnabled {
		return defRace
	}
	return def
}

// forSchedules runs n schedules of each mode as subtests, each with its own seed
// derived from the run's seed (logged first). A failing subtest logs its rerun
// command (harness.Seed's cleanup, with the subtest's anchored name).
func forSchedules(t *testing.T, n int, run func(t testing.TB, m mode, seed uint64, rng *rand.Rand)) {
	seed := harness.Seed(t)
	for _, m := range []mode{deterministic, stress} {
		for i := range n {
			t.Run(fmt.Sprintf("%s-%d", m, i), func(t *testing.T) {
				s := fault.Mix(seed, uint64(m)<<32|uint64(i))
				t.Cleanup(func() {
					if t.Failed() {
						t.Logf("schedule seed %d; reproduce with: %s", s, harness.RerunCommand(t, seed))
					}
				})
				run(t, m, s, rand.New(rand.NewPCG(s, s^0x5eed)))
			})
		}
	}
}

// world is one System with a continuation manager whose store, runner and child
// agents are instrumented.
type world struct {
	t      testing.TB
	seed   uint64
	sys    *troupe.System
	logs   *troupetest.Logs
	store  *recStore
	runner *recRunner
	m      *activation.Manager
	disp   *harness.Dispatcher
	noise  func()
	hits   func(point string) int // hits of troupe's fault points under this world's Chaos
	hist   *history               // shared by the worlds of one test that use one store

	mu struct {
		sync.Mutex
		children map[string]*owner.Agent    // the live (latest) agent of each child session
		agents   []*owner.Agent             // every child agent ever made, in order
		notices  map[string][]owner.Message // delivered to each parent session
		noticeCh chan struct{}
	}
}

type worldOpts struct {
	mode  mode
	seed  uint64
	noise int // percent of the test's race points that yield (stress mode)
	inner session.Store
	hist  *history // nil: a history of its own
}

func newWorld(t testing.TB, o worldOpts) *world {
	t.Helper()
	w := &world{t: t, seed: o.seed, hist: o.hist}
	if w.hist == nil {
		w.hist = &history{}
	}
	w.mu.children = map[string]*owner.Agent{}
	w.mu.notices = map[string][]owner.Message{}
	w.mu.noticeCh = make(chan struct{}, 1<<14)
	pct := o.noise
	if pct == 0 {
		pct = 10
	}
	w.noise = harness.Noise(o.seed, pct)
	w.hits = harness.Chaos(t, o.seed, pct)
	if o.mode == deterministic {
		w.disp = harness.NewDispatcher(o.seed)
		t.Cleanup(func() {
			w.disp.Close() // after the System's shutdown (cleanups run last-in first-out)
			require.NoError(t, w.disp.Err())
		})
	}
	w.sys, w.logs = troupetest.Served(t)
	inner := o.inner
	if inner == nil {
		inner = session.NewMemory()
	}
	w.store = &recStore{Store: inner, w: w, last: map[string]uint64{}, turnEpoch: map[string]uint64{}}
	w.runner = newRecRunner(w)
	rt, err := subagent.NewRuntime(w.sys.Actors(), w.sys.Scope(), nil)
	require.NoError(t, err)
	_, err = rt.RegisterProvider(context.Background(), w.sys.Scope(), subagent.NewSpawn(w.sys.Actors(), w.runner))
	require.NoError(t, err)
	deps := activation.Deps{
		Store:    w.store,
		Runtime:  rt,
		Runner:   w.runner,
		Jobs:     w.sys.Jobs(),
		NewAgent: w.newChildAgent,
		Logger:   slog.New(w.logs),
		Now:      func() int64 { return time.Now().UnixMilli() },
	}
	if w.disp != nil {
		deps.Dispatcher = w.disp
	}
	w.m, err = activation.NewManager(w.sys.Actors(), deps)
	require.NoError(t, err)
	// As activation.Start does: the System's shutdown drains the manager first.
	root := w.sys.Actors().Root
	_, err = w.sys.Scope().Add("continuations.drain()", func(ctx context.Context) error {
		err := w.m.Drain(ctx)
		_ = root.StopFuture(w.m.PID()).Wait()
		return err
	})
	require.NoError(t, err)
	return w
}

// history is the observed operations of a test, on one logical clock.
type history struct {
	clock atomic.Int64
	mu    sync.Mutex
	ops   []opRec
}

func (w *world) tick() int64 { return w.hist.clock.Add(1) }

// newChildAgent is Deps.NewAgent: the child's agent, registered under its session,
// delivering into the child's own inbox (the default) through a recording surface,
// with an effect on its scope that records the activation's release. The directory
// calls it right after the store's Activate of a materialization, so the epoch it
// reads is the one this activation was materialized at (a restart re-activates
// without a new agent: see opSpawn).
func (w *world) newChildAgent(id string, inbox owner.Surface) (*owner.Agent, error) {
	a, err := w.sys.NewAgent(nil, id, owner.Options{Surface: &surface{w: w, session: id, next: inbox}})
	if err != nil {
		return nil, err
	}
	err = w.sys.Jobs().RegisterAgent(context.Background(), a)
	if messages.CodeOf(err) == messages.CodeAgentRegistered {
		// Only a directory that materializes a session twice (the planted
		// activation-without-claim) gets here: as the composer, the world holds the
		// previous child agent's handle and displaces it, so the bug goes on to two
		// live Activations for the suites' oracles to catch.
		w.mu.Lock()
		prev := w.mu.children[id]
		w.mu.Unlock()
		err = w.sys.Jobs().ReplaceAgent(context.Background(), prev, a)
	}
	if err != nil {
		_ = a.Dispose(context.Background())
		return nil, err
	}
	epoch := w.store.lastEpoch(id)
	t := w.tick()
	w.record(opRec{session: id, kind: opSpawn, epoch: epoch, call: t, ret: t})
	if _, err := a.Scope().Add("test.release()", func(context.Context) error {
		t := w.tick()
		w.record(opRec{session: id, kind: opRelease, epoch: epoch, call: t, ret: t})
		return nil
	}); err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.mu.children[id] = a
	w.mu.agents = append(w.mu.agents, a)
	w.mu.Unlock()
	return a, nil
}

// child returns the current agent of child session id (nil if none was made).
func (w *world) child(id string) *owner.Agent {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.children[id]
}

// parent registers a top-level agent of session whose surface records notices.
func (w *world) parent(session string) *owner.Agent { return w.replaceParent(nil, session) }

// replaceParent registers a new top-level agent of session in place of old (nil:
// none registered), with the old one's handle (Jobs.ReplaceAgent).
func (w *world) replaceParent(old *owner.Agent, session string) *owner.Agent {
	w.t.Helper()
	a, err := w.sys.NewAgent(nil, session, owner.Options{Surface: &surface{w: w, session: session}})
	require.NoError(w.t, err)
	if old == nil {
		require.NoError(w.t, w.sys.Jobs().RegisterAgent(context.Background(), a))
	} else {
		require.NoError(w.t, w.sys.Jobs().ReplaceAgent(context.Background(), old, a))
	}
	return a
}

// unregistered makes an agent instance of session that is not registered.
func (w *world) unregistered(session string) *owner.Agent {
	w.t.Helper()
	a, err := w.sys.NewAgent(nil, session, owner.Options{Surface: &surface{w: w, session: session}})
	require.NoError(w.t, err)
	return a
}

func (w *world) record(o opRec) {
	w.hist.mu.Lock()
	w.hist.ops = append(w.hist.ops, o)
	w.hist.mu.Unlock()
}

func (w *world) ops() []opRec {
	w.hist.mu.Lock()
	defer w.hist.mu.Unlock()
	return append([]opRec(nil), w.hist.ops...)
}

// notices returns the messages delivered to session's surface.
func (w *world) notices(session string) []owner.Message {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]owner.Message(nil), w.mu.notices[session]...)
}

// awaitNotices waits until session has received n notices.
func (w *world) awaitNotices(session string, n int) {
	w.t.Helper()
	deadline := time.After(budget)
	for len(w.notices(session)) < n {
		select {
		case <-w.mu.noticeCh:
		case <-deadline:
			w.t.Fatalf("%s: %d notices, want %d", session, len(w.notices(session)), n)
		}
	}
}

// awaitLive polls the directory's gauge (each poll a round trip through its
// mailbox) until n activations are resident.
func (w *world) awaitLive(n int) {
	w.t.Helper()
	eventually(w.t, func() bool { return w.m.Live(context.Background()) == n }, func() string {
		return fmt.Sprintf("%d activations live, want %d", w.m.Live(context.Background()), n)
	})
}

// drain closes the manager and waits for every activation to be disposed.
func (w *world) drain() {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	require.NoError(w.t, w.m.Drain(ctx), "drain")
	require.Equal(w.t, 0, w.m.Live(ctx), "activations live after the drain")
}

// eventually re-checks cond (yielding between checks) until it holds.
func eventually(t testing.TB, cond func() bool, what func() string) {
	t.Helper()
	deadline := time.Now().Add(budget)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(what())
		}
		runtime.Gosched()
	}
}

// surface records the notices delivered to an agent, then hands them to next (a
// child's own inbox), if any.
type surface struct {
	w       *world
	session string
	next    owner.Surface
}

func (s *surface) add(m owner.Message) {
	s.w.mu.Lock()
	s.w.mu.notices[s.session] = append(s.w.mu.notices[s.session], m)
	s.w.mu.Unlock()
	select {
	case s.w.mu.noticeCh <- struct{}{}:
	default:
	}
}

func (s *surface) Inject(m owner.Message) error {
	s.add(m)
	if s.next != nil {
		return s.next.Inject(m)
	}
	return nil
}

func (s *surface) Steer(m owner.Message) error {
	s.add(m)
	if s.next != nil {
		return s.next.Steer(m)
	}
	return nil
}

func (s *surface) Followup(m owner.Message) error {
	s.add(m)
	if s.next != nil {
		return s.next.Followup(m)
	}
	return nil
}

// --- the store ---

// recStore records Activate (the acquire of an epoch), which epoch started each
// turn, and every write refused for a stale epoch; fault, if set, can fail an Append.
type recStore struct {
	session.Store
	w *world

	stale atomic.Int64 // writes refused with ErrStaleEpoch

	mu        sync.Mutex
	last      map[string]uint64 // the last epoch Activate handed out, per session
	turnEpoch map[string]uint64 // a turn's input text → the epoch of its turn/start append
	// fault, if set, is called before (written false) and after (written true) the
	// inner store's Accept (op "accept") and Append (op: the kind of the write —
	// session.EntryTurnStart, session.EntryTurnEnd, or its first entry's kind); an
	// error it returns is the call's, and it may panic (an Activation crashing
	// mid-write, inside its Receive).
	fault func(op, id string, written bool) error
}

func (s *recStore) Activate(ctx context.Context, id string) (session.Snapshot, error) {
	call := s.w.tick()
	snap, err := s.Store.Activate(ctx, id)
	ret := s.w.tick()
	if err == nil {
		s.mu.Lock()
		s.last[id] = snap.Header.Epoch
		s.mu.Unlock()
		s.w.record(opRec{session: id, kind: opAcquire, epoch: snap.Header.Epoch, call: call, ret: ret})
	}
	return snap, err
}

// Resume is how an Activation acquires its epoch: recorded as Activate is.
func (s *recStore) Resume(ctx context.Context, id string) (session.Resumed, error) {
	call := s.w.tick()
	r, err := s.Store.Resume(ctx, id)
	ret := s.w.tick()
	if err == nil {
		s.mu.Lock()
		s.last[id] = r.Header.Epoch
		s.mu.Unlock()
		s.w.record(opRec{session: id, kind: opAcquire, epoch: r.Header.Epoch, call: call, ret: ret})
	}
	return r, err
}

// ResumeAccept is how the directory takes the epoch of a cold restore and accepts
// its followup, in one commit: recorded as Resume is. It is not faulted: it runs
// on the directory, which the suites do not crash (the Activation's own accepts,
// turn starts and ends are).
func (s *recStore) ResumeAccept(ctx context.Context, id string, m session.InboxMessage, start []session.Entry,
	check func(session.Head) error) (session.Resumed, session.InboxMessage, bool, error) {
	call := s.w.tick()
	r, out, started, err := s.Store.ResumeAccept(ctx, id, m, start, check)
	ret := s.w.tick()
	if err == nil {
		s.mu.Lock()
		s.last[id] = r.Header.Epoch
		if started && len(start) > 1 && len(start[1].Content) > 0 { // as recStore.Append records a turn start
			s.turnEpoch[start[1].Content[0].Text] = r.Header.Epoch
		}
		s.mu.Unlock()
		s.w.record(opRec{session: id, kind: opAcquire, epoch: r.Header.Epoch, call: call, ret: ret})
	}
	return r, out, started, err
}

func (s *recStore) Accept(ctx context.Context, id string, epoch uint64, m session.InboxMessage) (session.InboxMessage, error) {
	f := s.getFault()
	if f != nil {
		if err := f("accept", id, false); err != nil {
			return session.InboxMessage{}, err
		}
	}
	out, err := s.Store.Accept(ctx, id, epoch, m)
	if errors.Is(err, session.ErrStaleEpoch) {
		s.stale.Add(1)
	}
	if err == nil && f != nil {
		if err := f("accept", id, true); err != nil {
			return session.InboxMessage{}, err
		}
	}
	return out, err
}

func (s *recStore) getFault() func(op, id string, written bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fault
}

// writeKind names an Append for faults: a turn's start or end, else its first entry's kind.
func writeKind(entries []session.Entry) string {
	for _, e := range entries {
		if e.Kind == session.EntryTurnStart || e.Kind == session.EntryTurnEnd {
			return e.Kind
		}
	}
	if len(entries) == 0 {
		return ""
	}
	return entries[0].Kind
}

func (s *recStore) Append(ctx context.Context, id string, epoch uint64, entries ...session.Entry) error {
	f := s.getFault()
	op := writeKind(entries)
	if f != nil {
		if err := f(op, id, false); err != nil {
			return err
		}
	}
	err := s.Store.Append(ctx, id, epoch, entries...)
	if errors.Is(err, session.ErrStaleEpoch) {
		s.stale.Add(1)
	}
	if err == nil {
		s.mu.Lock()
		for i, e := range entries {
			if e.Kind == session.EntryTurnStart && i+1 < len(entries) && len(entries[i+1].Content) > 0 {
				s.turnEpoch[entries[i+1].Content[0].Text] = epoch
			}
		}
		s.mu.Unlock()
		if f != nil {
			if err := f(op, id, true); err != nil {
				return err
			}
		}
	}
	return err
}

func (s *recStore) setFault(f func(op, id string, written bool) error) {
	s.mu.Lock()
	s.fault = f
	s.mu.Unlock()
}

func (s *recStore) lastEpoch(id string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last[id]
}

func (s *recStore) epochOf(text string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.turnEpoch[text]
}

// load reads a session as stored.
func (w *world) load(id string) session.Snapshot {
	w.t.Helper()
	snap, err := w.store.Load(context.Background(), id)
	require.NoError(w.t, err)
	return snap
}

// inboxTexts returns a session's accepted messages' texts in Seq order.
func inboxTexts(s session.Snapshot) []string {
	out := make([]string, len(s.Inbox))
	for i, m := range s.Inbox {
		out[i] = m.Content[0].Text
	}
	return out
}

// stopReasons maps a session's inbox message texts to their turns' end reasons
// ("" if the turn never ended).
func stopReasons(s session.Snapshot) map[string]string {
	text := map[string]string{}
	for _, m := range s.Inbox {
		text[m.ID] = m.Content[0].Text
	}
	out := map[string]string{}
	for _, e := range s.Log {
		if e.Kind == session.EntryTurnEnd || e.Kind == session.EntryTurnAborted {
			out[text[e.InboxID]] = e.StopReason
		}
	}
	return out
}

// --- the runner ---

// turnRec is one RunTurn call.
type turnRec struct {
	session, text string
	epoch         uint64
	call, ret     int64
	cancelled     bool // it returned because its ctx ended
}

// recRunner records every turn; a turn whose text has a gate blocks until the gate
// closes or its ctx ends, after signalling started.
type recRunner struct {
	w       *world
	started chan string // texts of gated turns that began (buffered)

	mu      sync.Mutex
	turns   []turnRec
	gates   map[string]chan struct{}
	linger  map[string]chan struct{} // a gated turn cancelled by its ctx returns only once this closes
	gateAll chan struct{}            // if set, every turn whose text has the prefix holdPrefix waits on it
	changed chan struct{}
}

const holdPrefix = "hold "

func newRecRunner(w *world) *recRunner {
	return &recRunner{w: w, started: make(chan string, 1<<14), gates: map[string]chan struct{}{},
		linger: map[string]chan struct{}{}, changed: make(chan struct{}, 1)}
}

// gate makes text's turn wait for the returned channel to close.
func (r *recRunner) gate(text string) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := make(chan struct{})
	r.gates[text] = g
	return g
}

// lingerOnCancel makes text's gated turn, once cancelled, return only when the
// returned channel closes.
func (r *recRunner) lingerOnCancel(text string) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := make(chan struct{})
	r.linger[text] = l
	return l
}

// holdAll makes every turn whose text starts with holdPrefix wait for the
// returned channel to close.
func (r *recRunner) holdAll() chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gateAll = make(chan struct{})
	return r.gateAll
}

func (r *recRunner) RunTurn(ctx context.Context, turn subagent.Turn) (subagent.TurnResult, error) {
	text := turn.Input.Content[0].Text
	rec := turnRec{session: turn.Session, text: text, epoch: r.w.store.epochOf(text), call: r.w.tick()}
	r.w.noise()
	r.mu.Lock()
	g, linger := r.gates[text], r.linger[text]
	if g == nil && r.gateAll != nil && len(text) >= len(holdPrefix) && text[:len(holdPrefix)] == holdPrefix {
		g = r.gateAll
	}
	r.mu.Unlock()
	var err error
	if g != nil {
		r.started <- text
		select {
		case <-g:
		case <-ctx.Done():
			err, rec.cancelled = context.Cause(ctx), true
			if linger != nil {
				<-linger // a runner slow to honour its cancellation (a model call being aborted)
			}
		}
	}
	r.w.noise()
	rec.ret = r.w.tick()
	r.mu.Lock()
	r.turns = append(r.turns, rec)
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
	r.w.record(opRec{session: turn.Session, kind: opTurn, epoch: rec.epoch, text: text, call: rec.call, ret: rec.ret})
	if err != nil {
		return subagent.TurnResult{}, err
	}
	return subagent.TurnResult{Messages: []subagent.Message{{Role: "assistant",
		Content: []subagent.Block{{Type: "text", Text: "done: " + text}}}}}, nil
}

// all returns the turns that returned so far, in order of return.
func (r *recRunner) all() []turnRec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]turnRec(nil), r.turns...)
}

// bySession returns the turns of session in order of entry.
func (r *recRunner) bySession(session string) []turnRec {
	var out []turnRec
	for _, tr := range r.all() {
		if tr.session == session {
			out = append(out, tr)
		}
	}
	sortByCall(out)
	return out
}

func sortByCall(ts []turnRec) {
	for i := 1; i < len(ts); i++ {
		for j := i; j > 0 && ts[j].call < ts[j-1].call; j-- {
			ts[j], ts[j-1] = ts[j-1], ts[j]
		}
	}
}

// awaitTurns waits until n turns have returned.
func (r *recRunner) awaitTurns(n int) {
	r.w.t.Helper()
	deadline := time.After(budget)
	for {
		r.mu.Lock()
		got := len(r.turns)
		r.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-r.changed:
		case <-deadline:
			r.w.t.Fatalf("%d turns returned, want %d", got, n)
		}
	}
}

// awaitStarted waits until n gated turns have begun and returns their texts.
func (r *recRunner) awaitStarted(n int) []string {
	r.w.t.Helper()
	out := make([]string, 0, n)
	deadline := time.After(budget)
	for len(out) < n {
		select {
		case s := <-r.started:
			out = append(out, s)
		case <-deadline:
			r.w.t.Fatalf("%d gated turns began, want %d (%v)", len(out), n, out)
		}
	}
	return out
}

// start starts child id of parent with prompt and returns the first message's id.
func (w *world) start(parent *owner.Agent, id, prompt string) string {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	call := w.tick()
	got, msgID, err := w.m.Start(ctx, parent, "spawn", "label "+id, id, subagent.Request{Prompt: prompt})
	ret := w.tick()
	require.NoError(w.t, err, "start %s", id)
	require.Equal(w.t, id, got)
	w.record(opRec{session: id, kind: opEnqueue, text: prompt, msgID: msgID, call: call, ret: ret})
	return msgID
}

// followup sends text to id as parent and records the enqueue if it was accepted.
func (w *world) followup(parent *owner.Agent, id, text string, src session.Source) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	call := w.tick()
	msgID, err := w.m.Followup(ctx, parent, id, text, src)
	ret := w.tick()
	if err == nil {
		w.record(opRec{session: id, kind: opEnqueue, text: text, msgID: msgID, call: call, ret: ret})
	}
	return msgID, err
}

// coordinator is the send_message tool's source for a parent.
func coordinator(parent string) session.Source {
	return session.Source{Kind: "coordinator", Form: "relay", SenderSessionID: parent}
}
