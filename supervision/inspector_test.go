package supervision_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/supervision"
)

// budget bounds every wait; nothing waits for it to pass.
const budget = 10 * time.Second

func startInspector(t *testing.T) (*actor.ActorSystem, *supervision.Inspector) {
	t.Helper()
	system := actor.NewActorSystem(
		actor.WithDeadLetterThrottleInterval(time.Millisecond),
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }),
	)
	in, err := supervision.StartInspector(system, supervision.InspectorConfig{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), budget)
		defer cancel()
		require.NoError(t, in.Stop(ctx))
		system.Shutdown()
	})
	return system, in
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	t.Cleanup(cancel)
	return ctx
}

func jobRef(i int) supervision.Ref {
	return supervision.Ref{Kind: supervision.KindJob, ID: fmt.Sprintf("bash-%d", i)}
}

// next receives one event, failing after the budget.
func next(t *testing.T, sub *supervision.Subscription) supervision.Event {
	t.Helper()
	select {
	case e, ok := <-sub.Events():
		require.True(t, ok, "the subscription ended early")
		return e
	case <-time.After(budget):
		t.Fatal("no event")
		return supervision.Event{}
	}
}

func TestInspectorNumbersAppliesAndRefuses(t *testing.T) {
	system, in := startInspector(t)
	root := system.Root
	supervision.Emit(root, in.PID(), spawned(registry, supervision.Root))
	supervision.Emit(root, in.PID(), spawned(job1, registry))
	supervision.Emit(root, in.PID(), spawned(job1, registry))                // a duplicate: refused
	supervision.Emit(root, in.PID(), stopped(owner1, supervision.CauseNone)) // unknown: refused
	supervision.Emit(root, in.PID(), settled(job1, "completed", supervision.CauseProducer))
	supervision.Emit(root, nil, spawned(owner1, supervision.Root)) // no inspector: nothing sent

	snap, err := in.Snapshot(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, uint64(3), snap.Seq, "refused events are not numbered")
	require.Equal(t, []string{"registry/registry", "job/bash-1"}, refs(snap))
	n, _ := snap.Node(job1)
	require.Equal(t, "completed", n.Status)

	st, err := in.Stats(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, uint64(3), st.Applied)
	require.Equal(t, uint64(2), st.Rejected)
	require.Len(t, st.Rejections, 2)
	require.Equal(t, supervision.CodeDuplicate, messages.CodeOf(st.Rejections[0].Err))
	require.Equal(t, supervision.CodeUnknownNode, messages.CodeOf(st.Rejections[1].Err))
}

// Subscribers see the events after their snapshot, in order, none lost: several
// senders emit concurrently (each node's events from one sender) while several
// subscriptions open at different points; folding each subscription's events into
// its snapshot gives the final snapshot. One subscriber does not read until every
// event was sent: it blocks nothing.
func TestInspectorSubscriptionsAgreeWithSnapshots(t *testing.T) {
	system, in := startInspector(t)
	root := system.Root
	supervision.Emit(root, in.PID(), spawned(registry, supervision.Root))
	const senders, perSender = 4, 200

	type follower struct {
		sub  *supervision.Subscription
		snap supervision.Snapshot
	}
	var followers []follower
	subscribe := func() {
		sub, snap, err := in.Subscribe(ctxT(t))
		require.NoError(t, err)
		t.Cleanup(sub.Cancel)
		followers = append(followers, follower{sub, snap})
	}
	subscribe() // the slow one: read only at the end
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for i := range perSender {
				j := jobRef(s*perSender + i)
				supervision.Emit(root, in.PID(), spawned(j, registry))
				supervision.Emit(root, in.PID(), settled(j, "completed", supervision.CauseProducer))
				if i%2 == 0 {
					supervision.Emit(root, in.PID(), stopped(j, supervision.CauseNone))
				}
			}
		})
	}
	for range 3 {
		subscribe()
	}
	wg.Wait()
	final, err := in.Snapshot(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, uint64(1+senders*perSender*5/2), final.Seq)
	require.Len(t, final.Nodes, 1+senders*perSender/2)

	for i, f := range followers {
		tree, err := supervision.TreeOf(f.snap)
		require.NoError(t, err)
		for tree.Seq() < final.Seq {
			e := next(t, f.sub)
			require.NoError(t, tree.Apply(e), "follower %d", i)
		}
		require.Equal(t, final, tree.Snapshot(), "follower %d", i)
	}
	st, err := in.Stats(ctxT(t))
	require.NoError(t, err)
	require.Zero(t, st.Rejected)
	require.Equal(t, 4, st.Subscribers)
}

// Cancel drops what was not read and closes the channel; the inspector forgets it.
func TestSubscriptionCancel(t *testing.T) {
	system, in := startInspector(t)
	sub, snap, err := in.Subscribe(ctxT(t))
	require.NoError(t, err)
	require.Zero(t, snap.Seq)
	supervision.Emit(system.Root, in.PID(), spawned(registry, supervision.Root))
	supervision.Emit(system.Root, in.PID(), spawned(job1, registry))
	require.Equal(t, uint64(1), next(t, sub).Seq)
	sub.Cancel()
	sub.Cancel() // idempotent
	for range sub.Events() {
	}
	st, err := in.Stats(ctxT(t))
	require.NoError(t, err)
	require.Zero(t, st.Subscribers)
}

// Stopping the inspector ends every subscription after the events queued before
// the stop; later calls fail with troupe/stopped.
func TestInspectorStop(t *testing.T) {
	system, in := startInspector(t)
	sub, _, err := in.Subscribe(ctxT(t))
	require.NoError(t, err)
	for i := range 50 {
		supervision.Emit(system.Root, in.PID(), spawned(jobRef(i), supervision.Root))
	}
	require.NoError(t, in.Stop(ctxT(t)))
	require.NoError(t, in.Stop(ctxT(t)), "idempotent")
	var got []uint64
	for e := range sub.Events() {
		got = append(got, e.Seq)
	}
	require.Len(t, got, 50)
	for i, s := range got {
		require.Equal(t, uint64(i+1), s)
	}
	sub.Cancel()
	_, err = in.Snapshot(ctxT(t))
	require.ErrorIs(t, err, messages.ErrStopped)
	_, _, err = in.Subscribe(ctxT(t))
	require.ErrorIs(t, err, messages.ErrStopped)
}

// The wire forms: TreeSnapshotRequest answers a TreeSnapshot; TreeSubscribe sends
// the sender a TreeSnapshot, then LifecycleEvents, until TreeUnsubscribe.
func TestInspectorWire(t *testing.T) {
	system, in := startInspector(t)
	root := system.Root
	supervision.Emit(root, in.PID(), spawned(registry, supervision.Root))

	reply, err := root.RequestFuture(in.PID(), &messages.TreeSnapshotRequest{}, budget).Result()
	require.NoError(t, err)
	snap, err := supervision.SnapshotFromProto(reply.(*messages.TreeSnapshot))
	require.NoError(t, err)
	require.Equal(t, []string{"registry/registry"}, refs(snap))

	got := make(chan any, 16)
	client := root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case string:
			switch m {
			case "subscribe":
				c.Request(in.PID(), &messages.TreeSubscribe{})
			case "unsubscribe":
				c.Request(in.PID(), &messages.TreeUnsubscribe{})
			}
			// A snapshot asked after the message above: it comes back after every
			// event the inspector sent this client before answering.
			c.Request(in.PID(), &messages.TreeSnapshotRequest{})
		case *messages.TreeSnapshot, *messages.LifecycleEvent:
			got <- m
		}
	}))
	defer func() { _ = root.StopFuture(client).Wait() }()
	receive := func() any {
		select {
		case m := <-got:
			return m
		case <-time.After(budget):
			t.Fatal("the client received nothing")
			return nil
		}
	}
	root.Send(client, "subscribe")
	first := receive().(*messages.TreeSnapshot) // the subscription's snapshot
	require.Equal(t, uint64(1), first.GetSeq())
	require.Equal(t, uint64(1), receive().(*messages.TreeSnapshot).GetSeq()) // the asked one

	supervision.Emit(root, in.PID(), spawned(job1, registry))
	e, err := supervision.EventFromProto(receive().(*messages.LifecycleEvent))
	require.NoError(t, err)
	require.Equal(t, uint64(2), e.Seq)
	require.Equal(t, job1, e.Node)

	root.Send(client, "unsubscribe")
	require.Equal(t, uint64(2), receive().(*messages.TreeSnapshot).GetSeq())
	supervision.Emit(root, in.PID(), stopped(job1, supervision.CauseNone))
	root.Send(client, "probe")
	require.Equal(t, uint64(3), receive().(*messages.TreeSnapshot).GetSeq(), "no event after TreeUnsubscribe")
	st, err := in.Stats(ctxT(t))
	require.NoError(t, err)
	require.Zero(t, st.Subscribers)
}

// A job's compact events (EmitJob) are applied as the Events they stand for: the
// same tree, numbering and refusals, and a subscriber receives those Events.
func TestInspectorAppliesCompactJobEventsAsTheirEvents(t *testing.T) {
	system, in := startInspector(t)
	root := system.Root
	supervision.Emit(root, in.PID(), spawned(registry, supervision.Root))
	sub, _, err := in.Subscribe(ctxT(t))
	require.NoError(t, err)
	defer sub.Cancel()
	spawn := supervision.JobSpawned{Registry: registry.ID, ID: job1.ID, Actor: registry.ID + "/" + job1.ID, Session: "alice"}
	settle := supervision.JobSettled{ID: job1.ID, Status: "failed", Detail: "Error: boom", Cause: supervision.CauseKill}
	stop := supervision.JobStopped{ID: job1.ID, Cause: supervision.CauseNone}
	supervision.EmitJob(root, in.PID(), spawn)
	supervision.EmitJob(root, in.PID(), spawn) // a duplicate: refused
	supervision.EmitJob(root, in.PID(), settle)
	supervision.EmitJob(root, nil, stop) // no inspector: nothing sent

	snap, err := in.Snapshot(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, uint64(3), snap.Seq)
	n, ok := snap.Node(job1)
	require.True(t, ok)
	require.Equal(t, supervision.Node{Ref: job1, Parent: registry, Actor: "registry/bash-1", Session: "alice",
		Status: "failed", Cause: supervision.CauseKill, Detail: "Error: boom", Spawned: n.Spawned}, n)
	st, err := in.Stats(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, uint64(1), st.Rejected)
	require.Equal(t, supervision.CodeDuplicate, messages.CodeOf(st.Rejections[0].Err))

	supervision.EmitJob(root, in.PID(), stop)
	for i, want := range []supervision.Event{spawn.Event(), settle.Event(), stop.Event()} {
		got := next(t, sub)
		require.Equal(t, uint64(i+2), got.Seq)
		require.False(t, got.At.IsZero())
		got.Seq, got.At = 0, time.Time{}
		require.Equal(t, want, got)
	}
	snap, err = in.Snapshot(ctxT(t))
	require.NoError(t, err)
	_, ok = snap.Node(job1)
	require.False(t, ok, "the stopped job is gone from the tree")
}

// A job's JobEnded is its Settled and Stopped events, applied in that order as if
// each were sent on its own: numbered one after the other, forwarded as those two
// Events, and the node gone from the tree.
func TestInspectorAppliesJobEndedAsSettledThenStopped(t *testing.T) {
	system, in := startInspector(t)
	root := system.Root
	supervision.Emit(root, in.PID(), spawned(registry, supervision.Root))
	spawn := supervision.JobSpawned{Registry: registry.ID, ID: job1.ID, Actor: registry.ID + "/" + job1.ID, Session: "alice"}
	supervision.EmitJob(root, in.PID(), spawn)
	sub, _, err := in.Subscribe(ctxT(t))
	require.NoError(t, err)
	defer sub.Cancel()
	ended := supervision.JobEnded{
		Settled: supervision.JobSettled{ID: job1.ID, Status: "completed", Cause: supervision.CauseProducer},
		Stopped: supervision.JobStopped{ID: job1.ID, Cause: supervision.CauseNone},
	}
	supervision.EmitJob(root, in.PID(), ended)
	for i, want := range []supervision.Event{ended.Settled.Event(), ended.Stopped.Event()} {
		got := next(t, sub)
		require.Equal(t, uint64(i+3), got.Seq)
		got.Seq, got.At = 0, time.Time{}
		require.Equal(t, want, got)
	}
	snap, err := in.Snapshot(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, uint64(4), snap.Seq)
	_, ok := snap.Node(job1)
	require.False(t, ok, "the stopped job is gone from the tree")
	st, err := in.Stats(ctxT(t))
	require.NoError(t, err)
	require.Zero(t, st.Rejected)

	// Out of order (a Stopped of a node never spawned): both are refused, as alone.
	supervision.EmitJob(root, in.PID(), ended)
	st, err = in.Stats(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, uint64(2), st.Rejected)
}

// countingDispatcher runs each run on the goroutine that schedules it, before
// Schedule returns (so an inspector is idle once a send to it returns), and counts
// them.
type countingDispatcher struct{ runs atomic.Int64 }

func (d *countingDispatcher) Schedule(fn func()) { d.runs.Add(1); fn() }
func (d *countingDispatcher) Throughput() int    { return 300 }

// While nobody subscribes, lifecycle events wake no run of the inspector until a
// query comes (which sees them all) or EventBatch of them wait; a subscriber gets
// each event without any query.
func TestInspectorEventsWaitForAQueryWhileNobodySubscribes(t *testing.T) {
	system := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	d := &countingDispatcher{}
	in, err := supervision.StartInspector(system, supervision.InspectorConfig{Logger: slog.New(slog.DiscardHandler), Dispatcher: d})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, in.Stop(ctxT(t))); system.Shutdown() })
	root := system.Root
	supervision.Emit(root, in.PID(), spawned(registry, supervision.Root))
	_, err = in.Snapshot(ctxT(t))
	require.NoError(t, err)

	before := d.runs.Load()
	for i := range 10 {
		supervision.Emit(root, in.PID(), spawned(jobRef(i), registry))
	}
	require.Equal(t, before, d.runs.Load(), "an event to an idle inspector nobody follows schedules no run")
	snap, err := in.Snapshot(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, uint64(11), snap.Seq, "the query's run applied every event sent before it")
	require.Equal(t, before+1, d.runs.Load(), "one run: the query's")

	// EventBatch events wake it once, by themselves.
	before = d.runs.Load()
	for i := range supervision.EventBatch - 1 {
		supervision.Emit(root, in.PID(), spawned(jobRef(100+i), registry))
	}
	require.Equal(t, before, d.runs.Load())
	supervision.Emit(root, in.PID(), spawned(jobRef(99), registry))
	require.Equal(t, before+1, d.runs.Load(), "the batch's last event schedules the run")

	sub, _, err := in.Subscribe(ctxT(t))
	require.NoError(t, err)
	defer sub.Cancel()
	before = d.runs.Load()
	supervision.Emit(root, in.PID(), spawned(jobRef(1<<20), registry))
	require.Equal(t, before+1, d.runs.Load(), "a subscriber makes each event schedule a run")
	e := next(t, sub)
	require.Equal(t, jobRef(1<<20), e.Node)
}
