package supervisionsuite

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/harness"
	"github.com/troupe-rt/troupe/internal/deliver"
	"github.com/troupe-rt/troupe/internal/fault"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/supervision"
	"github.com/troupe-rt/troupe/troupetest"
)

// budget bounds every wait; nothing waits for it to pass.
const budget = 10 * time.Second

// world is a served System whose tree is followed from the start.
type world struct {
	t    *testing.T
	sys  *troupe.System
	logs *troupetest.Logs
	f    *follower
	hits func(point string) int // hits of troupe's fault points under the world's Chaos
	seed uint64
}

// chaosPct is how often troupe's fault points yield in this suite's worlds.
const chaosPct = 10

// newWorld starts a served System for t, with troupe's fault points yielding at
// chaosPct percent (harness.Chaos, seeded with seed) until t ends.
func newWorld(t *testing.T, seed uint64) *world {
	t.Helper()
	hits := harness.Chaos(t, seed, chaosPct)
	sys, logs := troupetest.Served(t)
	w := &world{t: t, sys: sys, logs: logs, hits: hits, seed: seed}
	w.f = follow(t, sys.Tree())
	return w
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	t.Cleanup(cancel)
	return ctx
}

func (w *world) agent(session string) *owner.Agent {
	w.t.Helper()
	return troupetest.Agent(w.t, w.sys, session)
}

// start starts p's job owned by a (nil: unowned).
func (w *world) start(p *troupetest.Producer, a *owner.Agent) string {
	w.t.Helper()
	id, err := w.sys.Jobs().Start(context.Background(), p.Spec(a))
	require.NoError(w.t, err)
	return id
}

// killable is a producer whose Cancel settles it killed.
func killable() *troupetest.Producer {
	p := troupetest.NewProducer()
	p.OnCancel = &job.Outcome{Status: job.Killed, Detail: "signal: SIGTERM"}
	return p
}

// crashJob makes the job actor of id panic: for one Wait by its owner a, the
// fault point job.PointCrash fires (the world's chaos goes on around it, from an
// injector seeded alike). The wait was pending when the actor crashed, so the
// settlement the actor's Stopping handler makes answers it: failed. A job actor
// cannot be crashed from outside troupe (a bare job message is refused unless its
// registry routed it, test/authz).
func (w *world) crashJob(id string, a *owner.Agent) {
	w.t.Helper()
	restore := fault.Install(fault.New(w.seed, fault.YieldPercent(chaosPct), fault.PointPercent(job.PointCrash, 100)))
	defer restore()
	snap, err := w.sys.Jobs().Wait(ctxT(w.t), id, time.Minute, registry.AsAgent(a))
	require.NoError(w.t, err)
	require.Equal(w.t, "failed", snap.GetStatus().Name(), "the crashed job's pending wait")
}

// crashOwner makes a's owner actor panic: a nil notice (a sender's bug).
func (w *world) crashOwner(a *owner.Agent) {
	w.sys.Actors().Root.Send(a.PID(), (*deliver.Notice)(nil))
}

// reached requires each of troupe's named fault points to have been reached (so
// the world's Chaos yielded there with its probability).
func (w *world) reached(points ...string) {
	w.t.Helper()
	for _, p := range points {
		require.Positive(w.t, w.hits(p), "fault point %s was never reached", p)
	}
}

// noRejections asserts that the inspector refused no event: no sender reported an
// event out of order, of an unknown node, or the stop of a node with live children.
func (w *world) noRejections() {
	w.t.Helper()
	st, err := w.sys.Tree().Stats(ctxT(w.t))
	require.NoError(w.t, err)
	require.Zero(w.t, st.Rejected, "refused events: %v", st.Rejections)
}

// agree reads the stream up to a fresh snapshot and requires the folded tree to
// equal it.
func (w *world) agree() supervision.Snapshot {
	w.t.Helper()
	final, err := w.sys.Tree().Snapshot(ctxT(w.t))
	require.NoError(w.t, err)
	w.f.upTo(final.Seq)
	require.Equal(w.t, final, w.f.tree.Snapshot(), "the snapshot and the folded event stream disagree")
	return final
}

// gone requires the actor of every node the stream saw stop to be out of
// protoactor's process registry.
func (w *world) gone() {
	w.t.Helper()
	for _, e := range w.f.events {
		if e.Kind != supervision.Stopped {
			continue
		}
		actorID := w.f.actors[e.Node]
		require.NotEmpty(w.t, actorID, "%s stopped without a spawn the stream saw", e.Node)
		_, live := w.sys.Actors().ProcessRegistry.GetLocal(actorID)
		require.False(w.t, live, "%s stopped (%s) but its actor %s is registered", e.Node, e, actorID)
	}
}

func jobRef(id string) supervision.Ref { return supervision.Ref{Kind: supervision.KindJob, ID: id} }

func ownerRef(a *owner.Agent) supervision.Ref {
	return supervision.Ref{Kind: supervision.KindOwner, ID: a.PID().Id}
}

// follower reads a subscription on the test's goroutine and folds every event it
// reads into the subscription's snapshot: each must be the next in sequence and
// accepted by the tree.
type follower struct {
	t      *testing.T
	sub    *supervision.Subscription
	first  supervision.Snapshot
	tree   *supervision.Tree
	events []supervision.Event
	actors map[supervision.Ref]string // each node's actor, from the snapshot or its last spawn
}

func follow(t *testing.T, in *supervision.Inspector) *follower {
	t.Helper()
	sub, snap, err := in.Subscribe(ctxT(t))
	require.NoError(t, err)
	t.Cleanup(sub.Cancel)
	tree, err := supervision.TreeOf(snap)
	require.NoError(t, err)
	f := &follower{t: t, sub: sub, first: snap, tree: tree, actors: map[supervision.Ref]string{}}
	for _, n := range snap.Nodes {
		f.actors[n.Ref] = n.Actor
	}
	return f
}

// next reads one event and folds it; ok is false once the subscription ended.
func (f *follower) next() (supervision.Event, bool) {
	f.t.Helper()
	select {
	case e, ok := <-f.sub.Events():
		if !ok {
			return supervision.Event{}, false
		}
		require.NoError(f.t, f.tree.Apply(e), "event %s after %d read", e, len(f.events))
		f.events = append(f.events, e)
		if e.Kind == supervision.Spawned {
			f.actors[e.Node] = e.Actor
		}
		return e, true
	case <-time.After(budget):
		f.t.Fatalf("no lifecycle event within %v; read so far: %v", budget, f.events)
		return supervision.Event{}, false
	}
}

// event returns the first event read — already, or now — that satisfies pred.
func (f *follower) event(what string, pred func(supervision.Event) bool) supervision.Event {
	f.t.Helper()
	for _, e := range f.events {
		if pred(e) {
			return e
		}
	}
	for {
		e, ok := f.next()
		require.True(f.t, ok, "the stream ended before %s", what)
		if pred(e) {
			return e
		}
	}
}

// nth returns the k-th event (from 0) of a node spawned after the subscription.
func (f *follower) nth(node supervision.Ref, k int) supervision.Event {
	f.t.Helper()
	seen := 0
	return f.event(fmt.Sprintf("event %d of %s", k, node), func(e supervision.Event) bool {
		if e.Node != node {
			return false
		}
		seen++
		return seen == k+1
	})
}

// all returns, for each node, its first event of kind.
func (f *follower) all(kind supervision.EventKind, nodes ...supervision.Ref) map[supervision.Ref]supervision.Event {
	f.t.Helper()
	got := map[supervision.Ref]supervision.Event{}
	for _, n := range nodes {
		got[n] = f.event(kind.String()+" of "+n.String(), func(e supervision.Event) bool {
			return e.Kind == kind && e.Node == n
		})
	}
	return got
}

// upTo reads until the folded tree is at seq.
func (f *follower) upTo(seq uint64) {
	f.t.Helper()
	for f.tree.Seq() < seq {
		_, ok := f.next()
		require.True(f.t, ok, "the stream ended at seq %d, before %d", f.tree.Seq(), seq)
	}
}

// toEnd reads until the subscription ends.
func (f *follower) toEnd() {
	f.t.Helper()
	for {
		if _, ok := f.next(); !ok {
			return
		}
	}
}

// history returns the events read for node, in order.
func (f *follower) history(node supervision.Ref) []supervision.Event {
	var out []supervision.Event
	for _, e := range f.events {
		if e.Node == node {
			out = append(out, e)
		}
	}
	return out
}

// continuations is a continuation manager whose store panics (inside the
// Activation's Receive) when a message "boom" is accepted — the crash hook of the
// activation suites — with a scripted runner whose turn "task" blocks until
// cancelled, and a parent agent P whose notices land in inbox.
type continuations struct {
	m      *activation.Manager
	store  *crashingStore
	runner *subagent.Scripted
	parent *owner.Agent
	inbox  *inbox
}

func (w *world) continuations() *continuations {
	w.t.Helper()
	rt, err := subagent.NewRuntime(w.sys.Actors(), w.sys.Scope(), nil)
	require.NoError(w.t, err)
	runner := subagent.NewScripted()
	runner.Match = func(turn subagent.Turn) (subagent.Reply, bool) {
		if in := turn.Input.Text(); in != "task" {
			return subagent.Reply{Text: strings.ToLower(in) + " done"}, true
		}
		return subagent.Reply{Block: true}, true // held until a restart cancels it
	}
	_, err = rt.RegisterProvider(context.Background(), w.sys.Scope(), subagent.NewSpawn(w.sys.Actors(), runner))
	require.NoError(w.t, err)
	store := &crashingStore{Memory: session.NewMemory(), appended: make(chan session.Entry, 1024)}
	m, err := w.sys.StartContinuations(store, rt, runner, nil, activation.WithLogger(slog.New(w.logs)))
	require.NoError(w.t, err)
	in := &inbox{msgs: make(chan owner.Message, 64)}
	parent, err := w.sys.NewAgent(nil, "P", owner.Options{Surface: in})
	require.NoError(w.t, err)
	require.NoError(w.t, w.sys.Jobs().RegisterAgent(context.Background(), parent))
	return &continuations{m: m, store: store, runner: runner, parent: parent, inbox: in}
}

// crashingStore panics, once per session, when a message whose text is "boom" is
// accepted; and reports every appended entry.
type crashingStore struct {
	*session.Memory
	mu struct {
		sync.Mutex
		crashed map[string]bool
	}
	appended chan session.Entry
}

func (s *crashingStore) Accept(ctx context.Context, id string, epoch uint64, m session.InboxMessage) (session.InboxMessage, error) {
	if len(m.Content) > 0 && m.Content[0].Text == "boom" && s.crashOnce(id) {
		panic("store exploded")
	}
	return s.Memory.Accept(ctx, id, epoch, m)
}

func (s *crashingStore) crashOnce(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.crashed[id] {
		return false
	}
	if s.mu.crashed == nil {
		s.mu.crashed = map[string]bool{}
	}
	s.mu.crashed[id] = true
	return true
}

func (s *crashingStore) Append(ctx context.Context, id string, epoch uint64, entries ...session.Entry) error {
	err := s.Memory.Append(ctx, id, epoch, entries...)
	if err == nil {
		for _, e := range entries {
			select {
			case s.appended <- e:
			default: // nobody is watching this many
			}
		}
	}
	return err
}

type inbox struct{ msgs chan owner.Message }

func (i *inbox) Inject(m owner.Message) error   { i.msgs <- m; return nil }
func (i *inbox) Steer(m owner.Message) error    { i.msgs <- m; return nil }
func (i *inbox) Followup(m owner.Message) error { i.msgs <- m; return nil }

// localProcesses returns the ids of every process in the system's registry.
func localProcesses(system *actor.ActorSystem) []string {
	var ids []string
	for _, bucket := range system.ProcessRegistry.LocalPIDs.LocalPIDs {
		ids = append(ids, bucket.Keys()...)
	}
	slices.Sort(ids)
	return ids
}
