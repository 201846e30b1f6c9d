package registry

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/scope"
	"github.com/troupe-rt/troupe/supervision"
)

// chainRig is a registry with an onJobDone listener, and an inspector whose
// dispatcher notes, at each event's schedule (on the sending goroutine), whether
// it was sent from inside a Client.Kill.
type chainRig struct {
	c            *Client
	system       *actor.ActorSystem
	done         chan bool // per settled job: the listener ran inside Client.Kill
	doneInSettle chan bool // per settled job: the listener ran inside settleNow
	eventInKill  atomic.Int32
}

// noteProcess is the inspector's stand-in: a process that counts the events sent
// to it from inside Client.Kill (its send runs on the sending goroutine).
type noteProcess struct{ r *chainRig }

func (p noteProcess) SendUserMessage(_ *actor.PID, m any) {
	if _, ok := m.(*supervision.JobEnded); ok && inCall("Kill") {
		p.r.eventInKill.Add(1)
	}
}
func (noteProcess) SendSystemMessage(*actor.PID, any) {}
func (noteProcess) Stop(*actor.PID)                   {}

func newChainRig(t *testing.T, callerRuns bool) *chainRig {
	t.Helper()
	r := &chainRig{done: make(chan bool, 64), doneInSettle: make(chan bool, 64)}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }),
		actor.WithDeadLetterThrottleInterval(time.Millisecond)) // docs/TESTING.md: goleak and the dead-letter throttle
	r.system = system
	inspector, _ := system.ProcessRegistry.Add(noteProcess{r}, "inspector")
	root := scope.NewRoot("global")
	watch := job.NewWatcher()
	stopped := make(chan struct{})
	c, err := Spawn(system, Config{MaxConcurrentJobsPerOwner: 10, RootScope: root, Logger: quiet, Inspector: inspector,
		Now: func() int64 { return time.Now().UnixMilli() }, Watcher: watch, CallerRuns: callerRuns}, stopped)
	require.NoError(t, err)
	r.c = c
	t.Cleanup(func() {
		bg := context.Background()
		_ = root.Dispose(bg)
		_ = c.Dispose(bg)
		_ = system.Root.PoisonFuture(c.PID()).Wait()
		system.ProcessRegistry.Remove(inspector)
		close(stopped)
		watch.Close()
		system.Shutdown()
	})
	_, err = c.AttachController(context.Background(), root, "test")
	require.NoError(t, err)
	_, err = c.OnJobDone(context.Background(), root, func(*messages.JobSnapshot, Owner) {
		r.done <- inCall("Kill")
		r.doneInSettle <- inFrame("registry.settleNow(")
	})
	require.NoError(t, err)
	return r
}

// start starts a job of hooks and waits for its actor's first run (Waiters is
// answered by it), so that the job actor is idle.
func (r *chainRig) start(t *testing.T, hooks job.Hooks) string {
	t.Helper()
	id, err := r.c.Start(context.Background(), job.Spec{Kind: "bash", Label: "x", Run: func() (job.Hooks, error) { return hooks, nil }})
	require.NoError(t, err)
	_, err = r.c.Waiters(context.Background(), id)
	require.NoError(t, err)
	return id
}

// live reports whether the job actor of id is still registered.
func (r *chainRig) live(id string) bool {
	_, ok := r.system.ProcessRegistry.GetLocal(r.c.PID().Id + "/" + id)
	return ok
}

// onSettleKillable is an OnSettle producer whose non-blocking Cancel settles it
// killed, noting whether it ran inside Client.Kill.
func onSettleKillable(inKill chan<- bool) job.Hooks {
	s := &job.Settler{}
	return job.Hooks{OnSettle: s.OnSettle, CancelNonBlocking: true, Cancel: func(string) error {
		inKill <- inCall("Kill")
		s.Settle(job.Outcome{Status: job.Killed})
		return nil
	}}
}

// TestAKillOfAnIdleJobRunsItsWholeChainOnTheKiller: with CallerRuns, a kill of an
// idle job is run by the killer from the kill to the job actor's stop: the
// producer's Cancel (job.Kill.Handoff), the settlement it made during the call
// and the registry's commit riding with the stop (captured: no message to the
// job actor in between), the onJobDone listener, the poisoned job actor's stop
// (it is gone when Kill returns) and the registry's Terminated (its supervision
// event is sent from inside Kill: mailbox.NewTerminatedBySender). Without
// CallerRuns none of it is on the killer. Fails with the Handoff not offered or
// not taken (Cancel on a worker), with the capture off (the commit on the
// cancel result's run), with the bounded run not taking the PoisonPill (the
// actor still live) and with a plain registry mailbox (no event from Kill).
func TestAKillOfAnIdleJobRunsItsWholeChainOnTheKiller(t *testing.T) {
	for _, callerRuns := range []bool{true, false} {
		r := newChainRig(t, callerRuns)
		inKill := make(chan bool, callerRounds)
		onKiller := 0
		for range callerRounds {
			id := r.start(t, onSettleKillable(inKill))
			before := r.eventInKill.Load()
			res, _, err := r.c.Kill(context.Background(), id, NoCaller, KillOptions{})
			require.NoError(t, err)
			require.Equal(t, messages.KillResult_KILL_RESULT_REQUESTED, res)
			cancelOn, doneOn, gone, event := <-inKill, <-r.done, !r.live(id), r.eventInKill.Load() > before
			<-r.doneInSettle
			if !callerRuns {
				require.False(t, cancelOn || doneOn || event, "without CallerRuns nothing runs on the killer")
				continue
			}
			if cancelOn {
				onKiller++
				// Once the killer ran the job actor, it ran the chain to its end.
				require.True(t, doneOn, "the listener ran on the killer")
				require.True(t, gone, "the job actor stopped on the killer")
				require.True(t, event, "the registry's Terminated ran on the killer")
			}
			snap, err := r.c.AwaitSettled(context.Background(), id, NoCaller)
			require.NoError(t, err)
			require.Equal(t, job.Killed, snap.Status)
		}
		if callerRuns {
			require.Greater(t, onKiller, callerRounds/2, "most kills of an idle job run on the killer")
		}
	}
}

// settleNow settles s with o (its frame marks what ran on the settling goroutine).
//
//go:noinline
func settleNow(s *job.Settler, o job.Outcome) { s.Settle(o) }

// TestASettleInlineProducerRunsTheSettlementOnItsGoroutine: with CallerRuns, a
// producer that declares Hooks.SettleInline and settles an idle job runs its
// settlement on its own goroutine: the registry's commit and the onJobDone
// listener ran inside its settle call, and the job actor has stopped when it
// returns. Undeclared (or without CallerRuns) the settlement is sent, and runs on
// a worker. Fails with doneMsg's BySender ignored.
func TestASettleInlineProducerRunsTheSettlementOnItsGoroutine(t *testing.T) {
	for _, tc := range []struct {
		callerRuns, declared bool
	}{{true, true}, {true, false}, {false, true}} {
		r := newChainRig(t, tc.callerRuns)
		onSettler := 0
		for range callerRounds {
			s := &job.Settler{}
			id := r.start(t, job.Hooks{OnSettle: s.OnSettle, SettleInline: tc.declared, Cancel: func(string) error { return nil }})
			settleNow(s, job.Outcome{Status: job.Completed})
			gone := !r.live(id)
			<-r.done
			in := <-r.doneInSettle
			if !(tc.callerRuns && tc.declared) {
				require.False(t, in, "callerRuns %v declared %v: the settlement is a worker's", tc.callerRuns, tc.declared)
				continue
			}
			if in {
				onSettler++
				require.True(t, gone, "the job actor stopped on the settler")
			}
		}
		if tc.callerRuns && tc.declared {
			require.Greater(t, onSettler, callerRounds/2, "most settlements of an idle job run on the settler")
		}
	}
}

// TestASettlementRightAfterItsStartRunsOnTheSettler: with CallerRuns, a job
// started with a ctx that can never end is idle when Start returns (its Started
// ran on the caller), so a SettleInline producer that settles at once runs the
// settlement on its own goroutine — the case of BenchmarkNoticeLatency, with no
// wait for the job actor's first run in between (chainRig.start waits). Fails
// with the Started left to a worker: the settle finds it queued or not yet
// subscribed, and the settlement is a worker's.
func TestASettlementRightAfterItsStartRunsOnTheSettler(t *testing.T) {
	r := newChainRig(t, true)
	onSettler := 0
	for range callerRounds {
		s := &job.Settler{}
		_, err := r.c.Start(context.Background(), job.Spec{Kind: "bash", Label: "x", Run: func() (job.Hooks, error) {
			return job.Hooks{OnSettle: s.OnSettle, SettleInline: true, Cancel: func(string) error { return nil }}, nil
		}})
		require.NoError(t, err)
		settleNow(s, job.Outcome{Status: job.Completed})
		<-r.done
		if <-r.doneInSettle {
			onSettler++
		}
	}
	require.Greater(t, onSettler, callerRounds/2, "most settlements right after their start run on the settler")
}

// killAllocsBound is the allocations a kill of an idle job may make in chainRig,
// with its AwaitSettled, when the killer runs its chain (CallerRuns): the
// Kill's stopping snapshot, the listener's and AwaitSettled's settled ones, the
// producer's outcome (doneMsg), the job actor's jobMore made with the
// StopRequested and the Settled riding on it (job's killMore), the supervision
// JobEnded event, protoactor's stop (its Terminated), and the rig's own (its
// listener's frame checks, the Settler): 13.3 measured. It was 18.3 while the
// jobMore and the stop were two allocations (14.3 without only that), the
// captured outcome was appended to the held messages (a 16-B slice; 17.3 without
// only that) and each message to a job actor allocated its queue node
// (internal/mailbox qnodes: the Kill, the PoisonPill, the Stop; 15.3 without
// only that).
const killAllocsBound = 13.5

// TestAKillOfAnIdleJobAllocatesLittle: a kill → settled of an idle job whose
// non-blocking Cancel settles it allocates at most killAllocsBound per kill
// (README "Performance": each allocation is a share of the kill's span refills
// and sweeps, what its p99 is made of). Fails with the captured outcome appended
// to the held messages, with a queue node allocated per message, or with the
// kill's jobMore and StopRequested allocated apart.
func TestAKillOfAnIdleJobAllocatesLittle(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops queue nodes under the race detector")
	}
	r := newChainRig(t, true)
	ctx := context.Background()
	var mallocs, kills uint64
	for round := range 33 { // 8 jobs at a time (the owner's limit is 10)
		ids := make([]string, 0, 8)
		for range 8 {
			s := &job.Settler{}
			ids = append(ids, r.start(t, job.Hooks{OnSettle: s.OnSettle, CancelNonBlocking: true, Cancel: func(string) error {
				s.Settle(job.Outcome{Status: job.Killed})
				return nil
			}}))
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for _, id := range ids {
			if _, _, err := r.c.Kill(ctx, id, NoCaller, KillOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := r.c.AwaitSettled(ctx, id, NoCaller); err != nil {
				t.Fatal(err)
			}
		}
		runtime.ReadMemStats(&after)
		for range ids {
			<-r.done
			<-r.doneInSettle
		}
		if round > 0 { // the first round warms the pools
			mallocs += after.Mallocs - before.Mallocs
			kills += uint64(len(ids))
		}
	}
	per := float64(mallocs) / float64(kills)
	t.Logf("%.2f allocations per kill", per)
	require.LessOrEqual(t, per, killAllocsBound, "allocations per kill → settled")
}
