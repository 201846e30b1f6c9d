package activation_test

import (
	"context"
	"fmt"
	"runtime"
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
	"github.com/troupe-rt/troupe/supervision"
	"github.com/troupe-rt/troupe/troupetest"
)

// gatedRunner holds each child's turns until its gate is opened, and reports each
// turn's start.
type gatedRunner struct {
	*subagent.Scripted
	mu      sync.Mutex
	gates   map[string]chan struct{}
	allOpen bool // openAll was called: every gate is open, later ones too
	started chan string
}

func newGatedRunner(t *testing.T) *gatedRunner {
	r := &gatedRunner{Scripted: subagent.NewScripted(), gates: map[string]chan struct{}{}, started: make(chan string, 64)}
	r.Match = func(turn subagent.Turn) (subagent.Reply, bool) {
		r.started <- turn.Session
		<-r.gate(turn.Session)
		return subagent.Reply{Text: turn.Input.Text() + " done"}, true
	}
	t.Cleanup(r.openAll) // before the System's shutdown (cleanups run last-in first-out)
	return r
}

func (r *gatedRunner) gate(id string) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gates[id] == nil {
		r.gates[id] = make(chan struct{})
		if r.allOpen {
			close(r.gates[id])
		}
	}
	return r.gates[id]
}

func (r *gatedRunner) open(id string) { close(r.gate(id)) }

func (r *gatedRunner) openAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.allOpen = true
	for _, g := range r.gates {
		select {
		case <-g:
		default:
			close(g)
		}
	}
}

func (r *gatedRunner) awaitStart(t *testing.T, id string) {
	t.Helper()
	select {
	case got := <-r.started:
		require.Equal(t, id, got)
	case <-time.After(budget):
		t.Fatalf("no turn of %s started", id)
	}
}

type indexRig struct {
	sys    *troupe.System
	m      *activation.Manager
	runner *gatedRunner
	parent *owner.Agent
	in     *inbox
}

func newIndexRig(t *testing.T, store session.Store, opts ...activation.Option) *indexRig {
	sys, _ := troupetest.Served(t)
	rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), nil)
	require.NoError(t, err)
	runner := newGatedRunner(t)
	_, err = rt.RegisterProvider(t.Context(), sys.Scope(), subagent.NewSpawn(sys.Actors(), runner))
	require.NoError(t, err)
	m, err := sys.StartContinuations(store, rt, runner, nil, opts...)
	require.NoError(t, err)
	in := &inbox{msgs: make(chan owner.Message, 16)}
	parent, err := sys.NewAgent(nil, "P", owner.Options{Surface: in})
	require.NoError(t, err)
	require.NoError(t, sys.Jobs().RegisterAgent(context.Background(), parent))
	return &indexRig{sys: sys, m: m, runner: runner, parent: parent, in: in}
}

// start starts child id of parent and waits until its first turn runs (held).
func (r *indexRig) start(t *testing.T, parent *owner.Agent, id string) {
	t.Helper()
	_, _, err := r.m.Start(context.Background(), parent, "spawn", "label-"+id, id, subagent.Request{Prompt: "task " + id})
	require.NoError(t, err)
	r.runner.awaitStart(t, id)
}

func (r *indexRig) awaitNotice(t *testing.T, id string) {
	t.Helper()
	want := fmt.Sprintf("Background subagent %s finished and will do no further work unless you send it more.", id)
	select {
	case n := <-r.in.msgs:
		require.Equal(t, want, n.Text)
	case <-time.After(budget):
		t.Fatalf("no settlement notice of %s; %d live", id, r.m.Live(context.Background()))
	}
}

// awaitLive waits until n Activations are resident.
func (r *indexRig) awaitLive(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(budget)
	for r.m.Live(context.Background()) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d Activations live, want %d", r.m.Live(context.Background()), n)
		}
		runtime.Gosched()
	}
}

// A parent Activation disposes itself only once the directory's children index
// says it has no resident child: with a child left in the index after its release,
// c1 would stay resident forever. Status, Agent and List (with descendants) look
// the children up by id.
func TestDirectoryIndexesFollowReleaseOfNestedChildren(t *testing.T) {
	r := newIndexRig(t, session.NewMemory())
	r.start(t, r.parent, "c1")
	c1 := r.m.ResidentAgent("c1")
	require.NotNil(t, c1)
	r.start(t, c1, "g1")
	r.start(t, r.parent, "c2")
	require.Empty(t, r.m.IndexProblems())
	require.Equal(t, 3, r.m.Live(context.Background()))
	st, ok := r.m.Status(context.Background(), "g1")
	require.True(t, ok)
	require.Equal(t, activation.Running, st.Residency)
	_, ok = r.m.Status(context.Background(), "nope")
	require.False(t, ok)
	require.Nil(t, r.m.ResidentAgent("nope"))

	listed, err := r.m.List(context.Background(), r.parent, true)
	require.NoError(t, err)
	got := map[string]string{}
	for _, l := range listed {
		got[l.ID] = fmt.Sprintf("%s %s %d %s", l.Parent, l.Status, l.Depth, l.Label)
	}
	require.Equal(t, map[string]string{"c1": "P running 1 label-c1", "c2": "P running 1 label-c2",
		"g1": "c1 running 2 label-g1"}, got)
	direct, err := r.m.List(context.Background(), r.parent, false)
	require.NoError(t, err)
	require.Len(t, direct, 2)

	r.runner.open("c1") // c1's turn ends while g1 is resident: c1 stays (proposals refused)
	r.runner.open("g1") // g1 settles, is released, and its notice wakes c1
	r.awaitNotice(t, "c1")
	r.awaitLive(t, 1)
	require.Empty(t, r.m.IndexProblems())
	r.runner.open("c2")
	r.awaitNotice(t, "c2")
	r.awaitLive(t, 0)
	require.Empty(t, r.m.IndexProblems())
	require.Nil(t, r.m.ResidentAgent("c1"))
}

// A parent's children are a list with each entry's index (directory.kids): a child
// released from the front or the middle has the last one moved into its place, and
// the index still lists exactly the resident children, each at its own index, as
// the siblings settle in an order unlike their starts.
func TestDirectoryChildrenListFollowsReleasesInAnyOrder(t *testing.T) {
	r := newIndexRig(t, session.NewMemory())
	for _, id := range []string{"c1", "c2", "c3", "c4"} {
		r.start(t, r.parent, id)
	}
	require.Empty(t, r.m.IndexProblems())
	resident := map[string]bool{"c1": true, "c2": true, "c3": true, "c4": true}
	for _, id := range []string{"c1", "c3", "c4", "c2"} { // front, middle, last, only
		r.runner.open(id)
		r.awaitNotice(t, id)
		delete(resident, id)
		r.awaitLive(t, len(resident))
		require.Empty(t, r.m.IndexProblems(), "after %s", id)
		listed, err := r.m.List(context.Background(), r.parent, false)
		require.NoError(t, err)
		running := map[string]bool{}
		for _, l := range listed {
			if l.Status == "running" {
				running[l.ID] = true
			}
		}
		require.Equal(t, resident, running, "after %s", id)
	}
}

// A drain disposes a nested tree child-first through the children index and
// leaves every index empty.
func TestDirectoryIndexesEmptyAfterDrain(t *testing.T) {
	r := newIndexRig(t, session.NewMemory())
	r.start(t, r.parent, "c1")
	r.start(t, r.m.ResidentAgent("c1"), "g1")
	r.start(t, r.m.ResidentAgent("g1"), "gg1")
	require.Empty(t, r.m.IndexProblems())
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	drained := make(chan error, 1)
	go func() { drained <- r.m.DrainContinuableDescendants(ctx, []*owner.Agent{r.parent}) }()
	r.runner.openAll() // the held turns return (cancelled or not)
	require.NoError(t, <-drained)
	require.Equal(t, 0, r.m.Live(ctx))
	require.Empty(t, r.m.IndexProblems())
}

// boomStore panics inside the Activation's Receive on every accept of "boom".
type boomStore struct{ *session.Memory }

func (s boomStore) Accept(ctx context.Context, id string, epoch uint64, m session.InboxMessage) (session.InboxMessage, error) {
	if len(m.Content) > 0 && m.Content[0].Text == "boom" {
		panic("store exploded")
	}
	return s.Memory.Accept(ctx, id, epoch, m)
}

// An Activation that fails past its restart intensity stops; the directory finds
// its entry by the stopped PID (a stale or missing PID index would keep it
// resident), names the child in each failure, and a later followup cold-resumes
// it under a new PID.
func TestDirectoryIndexesFollowAnActivationThatStops(t *testing.T) {
	r := newIndexRig(t, boomStore{session.NewMemory()})
	r.start(t, r.parent, "c")
	ctx := context.Background()
	for range 4 {
		_, err := r.m.Followup(ctx, r.parent, "c", "boom", session.Source{Kind: "coordinator"})
		require.Equal(t, activation.CodeActivationFailed, messages.CodeOf(err), "%v", err)
		require.Contains(t, err.Error(), `subagent "c" activation failed while handling the message`)
	}
	r.awaitLive(t, 0)
	require.Empty(t, r.m.IndexProblems())
	require.Nil(t, r.sys.Jobs().RegisteredAgent(ctx, "c"))

	_, err := r.m.Followup(ctx, r.parent, "c", "again", session.Source{Kind: "coordinator"})
	require.NoError(t, err)
	require.Equal(t, 1, r.m.Live(ctx))
	require.Empty(t, r.m.IndexProblems())
	require.NotNil(t, r.m.ResidentAgent("c"))
}

// WithRestartIntensity bounds the restarts: allowed one restart per hour, the
// second failure stops the Activation (the default would restart it three times).
func TestRestartIntensityIsConfigurable(t *testing.T) {
	r := newIndexRig(t, boomStore{session.NewMemory()},
		activation.WithRestartIntensity(supervision.Intensity{MaxRestarts: 1, Within: time.Hour}))
	r.start(t, r.parent, "c")
	ctx := context.Background()
	_, err := r.m.Followup(ctx, r.parent, "c", "boom", session.Source{Kind: "coordinator"})
	require.Equal(t, activation.CodeActivationFailed, messages.CodeOf(err), "%v", err)
	require.Equal(t, 1, r.m.Live(ctx), "the first failure restarts it")
	_, err = r.m.Followup(ctx, r.parent, "c", "boom", session.Source{Kind: "coordinator"})
	require.Equal(t, activation.CodeActivationFailed, messages.CodeOf(err), "%v", err)
	r.awaitLive(t, 0) // the second, within the hour, stops it
	require.Empty(t, r.m.IndexProblems())
}
