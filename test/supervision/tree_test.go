package supervisionsuite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/actors/controller"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/harness"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/supervision"
)

// A job actor's panic: its job settles failed with cause panic, then its actor
// stops (cause panic), and its admission slot is free — an 11th start is admitted
// after 10 of which one panicked, and the 12th is refused.
func TestJobPanicSettlesFailedAndFreesTheSlot(t *testing.T) {
	seed := harness.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	w := newWorld(t, seed)
	a := w.agent("alice")
	ids := make([]string, 10)
	for i := range ids {
		ids[i] = w.start(killable(), a)
	}
	_, err := w.sys.Jobs().Start(context.Background(), killable().Spec(a))
	require.ErrorIs(t, err, messages.ErrCapacity, "10 live jobs fill alice's bucket")

	victim := ids[rng.IntN(len(ids))]
	t.Logf("crashing %s", victim)
	w.crashJob(victim, a)
	node := jobRef(victim)
	spawn := w.f.nth(node, 0)
	require.Equal(t, supervision.Spawned, spawn.Kind)
	require.Equal(t, "alice", spawn.Session)
	require.Equal(t, supervision.Ref{Kind: supervision.KindRegistry, ID: "registry"}, spawn.Parent)
	settle := w.f.nth(node, 1)
	require.Equal(t, supervision.Settled, settle.Kind, "%s", settle)
	require.Equal(t, "failed", settle.Status)
	require.Equal(t, supervision.CausePanic, settle.Cause)
	stop := w.f.nth(node, 2)
	require.Equal(t, supervision.Stopped, stop.Kind, "%s", stop)
	require.Equal(t, supervision.CausePanic, stop.Cause)

	_, err = w.sys.Jobs().Start(context.Background(), killable().Spec(a))
	require.NoError(t, err, "the panicked job's slot is free")
	_, err = w.sys.Jobs().Start(context.Background(), killable().Spec(a))
	require.ErrorIs(t, err, messages.ErrCapacity, "and only that one")

	snap, err := w.sys.Jobs().Get(context.Background(), victim, registry.AsAgent(a))
	require.NoError(t, err)
	require.Equal(t, "failed", snap.Status.Name())
	w.agree()
	w.gone()
	w.noRejections()
}

// An owner's crash: its actor stops (cause panic) and every job it owned is torn
// down — settled killed with cause teardown, then stopped.
func TestOwnerCrashTearsItsJobsDown(t *testing.T) {
	w := newWorld(t, harness.Seed(t))
	bystander := w.agent("bob")
	keep := w.start(killable(), bystander)
	// An owner reports its spawn from its own first run (its ownerInit is queued,
	// not handled within NewAgent): wait for it, or the snapshot may predate it.
	require.Equal(t, supervision.Spawned, w.f.nth(ownerRef(bystander), 0).Kind)
	a := w.agent("carol")
	var jobs []supervision.Ref
	for range 3 {
		jobs = append(jobs, jobRef(w.start(killable(), a)))
	}
	require.Equal(t, supervision.Spawned, w.f.nth(ownerRef(a), 0).Kind)

	w.crashOwner(a)
	stop := w.f.nth(ownerRef(a), 1)
	require.Equal(t, supervision.Stopped, stop.Kind)
	require.Equal(t, supervision.CausePanic, stop.Cause)
	for node, e := range w.f.all(supervision.Settled, jobs...) {
		require.Equal(t, "killed", e.Status, "%s", node)
		require.Equal(t, supervision.CauseTeardown, e.Cause, "%s", node)
	}
	w.f.all(supervision.Stopped, jobs...)

	snap := w.agree()
	_, ok := snap.Node(jobRef(keep))
	require.True(t, ok, "another owner's job is untouched")
	_, ok = snap.Node(ownerRef(bystander))
	require.True(t, ok, "and so is its owner")
	for _, e := range w.f.events {
		if e.Node == ownerRef(bystander) || e.Node == jobRef(keep) {
			require.NotEqual(t, supervision.Stopped, e.Kind, "%s", e)
			require.NotEqual(t, supervision.Settled, e.Kind, "%s", e)
		}
	}
	require.Nil(t, w.sys.Jobs().RegisteredAgent(context.Background(), "carol"), "the crashed incarnation left the agent registry")
	w.gone()
	w.noRejections()
}

// An Activation's crash: the message it was handling is answered ACTIVATION_FAILED,
// its node restarts (cause panic) in place, the turn in flight is logged aborted,
// and the parked messages run afterwards, once each; the child then settles and its
// Activation stops normally.
func TestActivationCrashRestarts(t *testing.T) {
	w := newWorld(t, harness.Seed(t))
	c := w.continuations()
	ctx := ctxT(t)
	_, first, err := c.m.Start(ctx, c.parent, "spawn", "research", "c", subagent.Request{Prompt: "task"})
	require.NoError(t, err)
	waitEntry(t, c.store.appended, session.EntryTurnStart) // the first turn is in flight (held)
	for _, text := range []string{"B", "C"} {
		_, err := c.m.Followup(ctx, c.parent, "c", text, session.Source{Kind: "coordinator"})
		require.NoError(t, err)
	}
	_, err = c.m.Followup(ctx, c.parent, "c", "boom", session.Source{Kind: "coordinator"})
	require.Equal(t, activation.CodeActivationFailed, messages.CodeOf(err), "%v", err)

	spawn := w.f.event("the activation spawned", func(e supervision.Event) bool {
		return e.Kind == supervision.Spawned && e.Node.Kind == supervision.KindActivation && e.Session == "c"
	})
	require.Equal(t, supervision.KindDirectory, spawn.Parent.Kind)
	restart := w.f.nth(spawn.Node, 1)
	require.Equal(t, supervision.Restarted, restart.Kind, "%s", restart)
	require.Equal(t, supervision.CausePanic, restart.Cause)
	require.Contains(t, restart.Detail, "store exploded")

	aborted := waitEntry(t, c.store.appended, session.EntryTurnAborted)
	require.Equal(t, first, aborted.InboxID, "the turn in flight failed")
	select {
	case n := <-c.inbox.msgs:
		require.Equal(t, []string{"Its closing message:", "c done"}, n.More)
	case <-time.After(budget):
		t.Fatal("no settlement notice")
	}
	var ran []string
	for _, turn := range c.runner.Turns() {
		if in := turn.Input.Text(); in != "task" {
			ran = append(ran, in)
		}
	}
	require.Equal(t, []string{"B", "C"}, ran, "the parked messages ran, once each, in order")

	stop := w.f.nth(spawn.Node, 2)
	require.Equal(t, supervision.Stopped, stop.Kind, "%s", stop)
	require.Equal(t, supervision.CauseNone, stop.Cause, "released after settling")
	require.Len(t, w.f.history(spawn.Node), 3, "spawned, restarted, stopped: %v", w.f.history(spawn.Node))
	w.agree()
	w.gone()
	w.noRejections()
	// The crash and the restart went through every fault point of the directory
	// and the Activation, and the notice through the parent's owner actor.
	w.reached(activation.PointDirectoryMaterialize, activation.PointDirectoryRoute, activation.PointDirectorySettle,
		activation.PointDirectoryRelease, activation.PointActivationAccept, activation.PointActivationTurnStart,
		activation.PointActivationTurnEnd, activation.PointActivationDispose, owner.PointChildNoticeDeliver)
}

// The snapshot and the event stream agree: a subscription opened at the start of a
// mixed workload (seeded order) — owned and unowned jobs settled by their
// producers, by a model kill and a human kill, by an owner's dispose, by a job
// panic, by an owner crash; continuable children that settle, and one whose
// Activation crashes and restarts — folded from its snapshot equals a final
// snapshot at the same seq. Each event's cause is the one its operation implies.
func TestSnapshotAndEventsAgree(t *testing.T) {
	seed := harness.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 2))
	w := newWorld(t, seed)
	ctl, err := w.sys.StartController(controller.Config{})
	require.NoError(t, err)
	c := w.continuations()
	a := w.agent("alice")
	ctx := ctxT(t)
	want := map[supervision.Ref]supervision.Cause{} // settlement cause per job

	n := 0
	fresh := func(prefix string) string { n++; return fmt.Sprintf("%s-%d", prefix, n) }
	ops := map[string]func(){
		"unowned, producer": func() {
			p := killable()
			want[jobRef(w.start(p, nil))] = supervision.CauseProducer
			p.Settle(job.Outcome{Status: job.Completed, Detail: "exit code: 0"})
		},
		"owned, producer": func() {
			p := killable()
			want[jobRef(w.start(p, a))] = supervision.CauseProducer
			p.Settle(job.Outcome{Status: job.Failed, Detail: "exit code: 127"})
		},
		"model kill": func() {
			id := w.start(killable(), a)
			want[jobRef(id)] = supervision.CauseKill
			_, _, err := w.sys.Jobs().Kill(ctx, id, registry.AsAgent(a), registry.KillOptions{})
			require.NoError(t, err)
		},
		"human kill": func() {
			id := w.start(killable(), a)
			want[jobRef(id)] = supervision.CauseKill
			_, err := ctl.Kill(ctx, "alice", id)
			require.NoError(t, err)
		},
		"owner dispose": func() {
			b := w.agent(fresh("bob"))
			for range 2 {
				want[jobRef(w.start(killable(), b))] = supervision.CauseTeardown
			}
			require.NoError(t, b.Dispose(ctx))
		},
		"job panic": func() {
			id := w.start(killable(), a)
			want[jobRef(id)] = supervision.CausePanic
			w.crashJob(id, a)
		},
		"owner crash": func() {
			o := w.agent(fresh("carol"))
			for range 2 {
				want[jobRef(w.start(killable(), o))] = supervision.CauseTeardown
			}
			w.crashOwner(o)
		},
		"continuable child": func() {
			_, _, err := c.m.Start(ctx, c.parent, "spawn", "quick", fresh("q"), subagent.Request{Prompt: "hello"})
			require.NoError(t, err)
		},
	}
	var plan []string
	for name := range ops {
		for range 1 + rng.IntN(3) {
			plan = append(plan, name)
		}
	}
	plan = append(plan, "activation crash")
	ops["activation crash"] = func() {
		_, _, err := c.m.Start(ctx, c.parent, "spawn", "research", "crashy", subagent.Request{Prompt: "task"})
		require.NoError(t, err)
		_, err = c.m.Followup(ctx, c.parent, "crashy", "B", session.Source{Kind: "coordinator"})
		require.NoError(t, err)
		_, err = c.m.Followup(ctx, c.parent, "crashy", "boom", session.Source{Kind: "coordinator"})
		require.Equal(t, activation.CodeActivationFailed, messages.CodeOf(err), "%v", err)
	}
	rng.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })
	t.Logf("plan: %s", strings.Join(plan, ", "))
	for _, name := range plan {
		ops[name]()
	}

	// Every job settles with its cause and stops; then the stream and a snapshot agree.
	var jobs []supervision.Ref
	for r := range want {
		jobs = append(jobs, r)
	}
	for node, e := range w.f.all(supervision.Settled, jobs...) {
		require.Equal(t, want[node], e.Cause, "%s", e)
	}
	w.f.all(supervision.Stopped, jobs...)
	restart := w.f.event("the crashing activation's restart", func(e supervision.Event) bool {
		return e.Kind == supervision.Restarted
	})
	require.Equal(t, supervision.CausePanic, restart.Cause)
	final := w.agree()
	for _, node := range final.Nodes {
		require.NotEqual(t, supervision.KindJob, node.Kind, "every job stopped: %s", final)
	}
	for _, kind := range []supervision.Kind{supervision.KindRegistry, supervision.KindDirectory,
		supervision.KindController, supervision.KindSubagentRuntime} {
		require.Len(t, filter(final.Nodes, kind), 1, "one %s: %s", kind, final)
	}
	w.gone()
	w.noRejections()
	// "activation crash" always runs: a start, two followups routed to it, its turn.
	w.reached(activation.PointDirectoryMaterialize, activation.PointDirectoryRoute,
		activation.PointActivationAccept, activation.PointActivationTurnStart)
}

func filter(nodes []supervision.Node, kind supervision.Kind) []supervision.Node {
	var out []supervision.Node
	for _, n := range nodes {
		if n.Kind == kind {
			out = append(out, n)
		}
	}
	return out
}

// No actor outlives its parent: after an owner's stop, a directory drain and the
// System's shutdown, every node the stream saw stop is out of protoactor's process
// registry, no parent was reported stopped before its children (the inspector
// refused nothing), and after shutdown the folded tree is empty and no troupe actor
// is left in the process registry.
func TestNoOrphanAfterParentStops(t *testing.T) {
	w := newWorld(t, harness.Seed(t))
	c := w.continuations()
	ctx := ctxT(t)
	_, err := w.sys.StartController(controller.Config{})
	require.NoError(t, err)

	// An owner stops with running jobs.
	b := w.agent("bob")
	var bobs []supervision.Ref
	for range 3 {
		bobs = append(bobs, jobRef(w.start(killable(), b)))
	}
	require.NoError(t, b.Dispose(ctx))
	require.Equal(t, supervision.CauseTeardown, w.f.nth(ownerRef(b), 1).Cause)
	w.f.all(supervision.Stopped, bobs...)
	snap := w.agree()
	_, ok := snap.Node(ownerRef(b))
	require.False(t, ok)
	w.gone()

	// The directory drains resident Activations (first turns held).
	for i := range 3 {
		_, _, err := c.m.Start(ctx, c.parent, "spawn", "research", fmt.Sprintf("held-%d", i), subagent.Request{Prompt: "task"})
		require.NoError(t, err)
	}
	require.Equal(t, 3, c.m.Live(ctx))
	require.NoError(t, c.m.Drain(ctx))
	// Drain returns once no Activation is resident; their actors stop just after.
	var held []supervision.Ref
	for i := range 3 {
		held = append(held, w.f.event("held activation spawned", func(e supervision.Event) bool {
			return e.Kind == supervision.Spawned && e.Node.Kind == supervision.KindActivation && e.Session == fmt.Sprintf("held-%d", i)
		}).Node)
	}
	for n, e := range w.f.all(supervision.Stopped, held...) {
		require.Equal(t, supervision.CauseTeardown, e.Cause, "%s", n)
	}
	snap = w.agree()
	require.Empty(t, filter(snap.Nodes, supervision.KindActivation))
	// Their child agents are disposed in the background: wait for their stops.
	var children []supervision.Ref
	for i := range 3 {
		children = append(children, w.f.event("held child agent spawned", func(e supervision.Event) bool {
			return e.Kind == supervision.Spawned && e.Node.Kind == supervision.KindOwner && e.Session == fmt.Sprintf("held-%d", i)
		}).Node)
	}
	w.f.all(supervision.Stopped, children...)
	w.gone()
	w.noRejections()

	// Shutdown: the stream ends with every node stopped.
	a := w.agent("alice")
	w.start(killable(), a)
	w.start(killable(), nil)
	require.NoError(t, w.sys.Shutdown(ctx))
	w.f.toEnd()
	require.Zero(t, w.f.tree.Len(), "nodes left after shutdown: %s", w.f.tree.Snapshot())
	w.gone()
	for _, id := range localProcesses(w.sys.Actors()) {
		require.False(t, troupeActor(id), "troupe actor %s is still registered after shutdown", id)
	}
}

// troupeActor reports whether a process id names one of troupe's actors.
func troupeActor(id string) bool {
	for _, prefix := range []string{"registry", "owner-", "directory", "job-controller", "subagent-runtime", supervision.InspectorName} {
		if strings.HasPrefix(id, prefix) {
			return true
		}
	}
	return false
}

// Owner incarnations come and go without growing protoactor's process registry:
// each registers its actor and removes it when it stops (and all share one guardian).
func TestOwnersLeaveNoProcesses(t *testing.T) {
	w := newWorld(t, harness.Seed(t))
	ctx := ctxT(t)
	churn := func(n int) {
		for i := range n {
			a := w.agent(fmt.Sprintf("s-%d", i))
			id := w.start(killable(), a)
			require.NoError(t, a.Dispose(ctx))
			require.Equal(t, supervision.Stopped, w.f.nth(ownerRef(a), 1).Kind)
			require.Equal(t, supervision.Stopped, w.f.nth(jobRef(id), 2).Kind)
		}
	}
	churn(2)
	w.agree()
	before := lasting(localProcesses(w.sys.Actors()))
	churn(20)
	w.agree()
	w.gone()
	require.Equal(t, before, lasting(localProcesses(w.sys.Actors())))
	w.noRejections()
}

func waitEntry(t *testing.T, ch <-chan session.Entry, kind string) session.Entry {
	t.Helper()
	deadline := time.After(budget)
	for {
		select {
		case e := <-ch:
			if e.Kind == kind {
				return e
			}
		case <-deadline:
			t.Fatalf("no %s entry", kind)
			return session.Entry{}
		}
	}
}

// lasting drops the futures (which remove themselves once answered) from a list of
// process ids.
func lasting(ids []string) []string {
	var out []string
	for _, id := range ids {
		if !strings.HasPrefix(id, "future") {
			out = append(out, id)
		}
	}
	return out
}
