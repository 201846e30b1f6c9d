package jobtools_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/tools/jobtools"
	"github.com/troupe-rt/troupe/troupetest"
)

// stackSurface records, for each notice, the call stack its verb ran on.
type stackSurface chan string

func (s stackSurface) record() error {
	s <- stack()
	return nil
}

// stack is the caller's call stack, a function name a line.
func stack() string {
	pc := make([]uintptr, 64)
	frames := runtime.CallersFrames(pc[:runtime.Callers(2, pc)])
	var b strings.Builder
	for {
		f, more := frames.Next()
		b.WriteString(f.Function + "\n")
		if !more {
			break
		}
	}
	return b.String()
}

func (s stackSurface) EnqueuesOnly() {} // an owner.InlineSurface

func (s stackSurface) Inject(owner.Message) error   { return s.record() }
func (s stackSurface) Steer(owner.Message) error    { return s.record() }
func (s stackSurface) Followup(owner.Message) error { return s.record() }

func mountNotices(t *testing.T) *troupe.System {
	t.Helper()
	sys, _ := troupetest.NewSystem(t)
	_, err := jobtools.MountIn(context.Background(), sys.Jobs(), sys.Scope(), jobtools.DefaultConfig())
	require.NoError(t, err)
	_, err = sys.Jobs().MountAgents(context.Background(), sys.Scope())
	require.NoError(t, err)
	return sys
}

// inlineRuns is how many rounds TestNoticeReachesTheSurfaceWithinTheSettlementCommit
// and TestOwnerCrashInAnInlineNoticeLosesNothingElse try: an owner (or registry)
// still finishing an earlier run when the message arrives takes it in that run, on
// the pool, so under load one round may miss the inline path; every round checks
// the delivery itself.
const inlineRuns = 20

// inlineChain reports whether stack is the inline notice path: the surface called
// from the owner's lane choice, inside the registry's settlement commit, run by the
// job actor's run that decided the settlement.
func inlineChain(stack string) bool {
	return strings.Contains(stack, "registry.(*registryActor).commitSettlement") &&
		strings.Contains(stack, "job.(*jobActor).settleWith")
}

// TestNoticeReachesTheSurfaceWithinTheSettlementCommit: a job notice to an idle
// owner is delivered by the registry's own run, inside the commit of the
// settlement, and that run is made by the job actor's run that decided the
// settlement (no worker woken for the registry or the owner actor), busy or idle
// agent alike. Fails on a build where either hop goes through the pool.
func TestNoticeReachesTheSurfaceWithinTheSettlementCommit(t *testing.T) {
	stacks := make(stackSurface, 1)
	inline := map[bool]int{}
	noticeRounds(t, stacks, stacks, func(_ int, busy bool, stack string) {
		if inlineChain(stack) {
			inline[busy]++
		}
	})
	t.Logf("inline deliveries of %d: busy %d, idle %d", inlineRuns, inline[true], inline[false])
	require.Positive(t, inline[true], "no busy owner's notice ran within the job's and the registry's run")
	require.Positive(t, inline[false], "no idle owner's notice ran within the job's and the registry's run")
}

// noticeRounds delivers inlineRuns job notices to a new agent on surface, busy and
// idle in turn, and hands each the call stack its verb ran on (recorded into
// stacks); every notice must come through the owner actor's lane choice, and the
// agent must have delivered them all.
func noticeRounds(t *testing.T, surface owner.Surface, stacks stackSurface, each func(round int, busy bool, stack string)) {
	t.Helper()
	sys := mountNotices(t)
	ctx := context.Background()
	a, err := sys.NewAgent(nil, "alice", owner.Options{Surface: surface})
	require.NoError(t, err)
	require.NoError(t, sys.Jobs().RegisterAgent(ctx, a))
	for i := range inlineRuns {
		busy := i%2 == 0
		a.SetBusy(busy)
		_, err := a.Stats(ctx) // the owner has taken SetBusy
		require.NoError(t, err)
		p := troupetest.NewProducer()
		_, err = sys.Jobs().Start(ctx, p.Spec(a))
		require.NoError(t, err)
		p.Settle(job.Outcome{Status: job.Completed})
		select {
		case stack := <-stacks:
			require.Contains(t, stack, "owner.(*ownerActor).deliver", "through the owner actor's lane choice")
			each(i, busy, stack)
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d, busy=%v: no notice", i, busy)
		}
	}
	s, err := a.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, inlineRuns, s.Delivered)
}

// queuedSurface is stackSurface without the owner.InlineSurface declaration.
type queuedSurface struct{ s stackSurface }

func (q queuedSurface) Inject(owner.Message) error   { return q.s.record() }
func (q queuedSurface) Steer(owner.Message) error    { return q.s.record() }
func (q queuedSurface) Followup(owner.Message) error { return q.s.record() }

// TestNoticeToASurfaceThatMayBlockRunsOnAWorker: a surface that has not declared
// itself an owner.InlineSurface may block, so its notices never run on the
// registry's goroutine — every one reaches it from a worker's run of the owner
// actor, not from within the settlement commit. Fails when the owner actors'
// mailbox runs a notice inline whatever the surface.
func TestNoticeToASurfaceThatMayBlockRunsOnAWorker(t *testing.T) {
	stacks := make(stackSurface, 1)
	noticeRounds(t, queuedSurface{stacks}, stacks, func(round int, _ bool, stack string) {
		require.NotContains(t, stack, "registry.(*registryActor).commitSettlement", "round %d: run within the registry's commit", round)
	})
}

// panicHandler is a slog handler that panics: an owner whose delivery failure is
// logged through it crashes in its Receive. It records the stack it panics on.
type panicHandler struct {
	slog.Handler
	at stackSurface
}

func (panicHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h panicHandler) Handle(context.Context, slog.Record) error {
	select {
	case h.at <- stack():
	default: // only the first is checked; never block the owner
	}
	panic("logger bug")
}

type failSurface struct{}

func (failSurface) EnqueuesOnly() {} // an owner.InlineSurface

func (failSurface) Inject(owner.Message) error   { return errors.New("inbox closed") }
func (failSurface) Steer(owner.Message) error    { return errors.New("inbox closed") }
func (failSurface) Followup(owner.Message) error { return errors.New("inbox closed") }

// TestOwnerCrashInAnInlineNoticeLosesNothingElse: an owner actor that panics while
// the registry's run delivers its notice (its failure log panics) crashes alone: the
// registry commits the rest of that settlement and goes on serving, the crashed
// incarnation's other job is torn down and its registration removed, and another
// agent's notice is still delivered.
func TestOwnerCrashInAnInlineNoticeLosesNothingElse(t *testing.T) {
	sys := mountNotices(t)
	ctx := context.Background()
	surface := make(stackSurface, 1)
	good, err := sys.NewAgent(nil, "bob", owner.Options{Surface: surface})
	require.NoError(t, err)
	require.NoError(t, sys.Jobs().RegisterAgent(ctx, good))
	settled := make(chan *messages.JobSnapshot, 4)
	_, err = sys.Jobs().OnJobDone(ctx, sys.Scope(), func(s *messages.JobSnapshot, _ registry.Owner) { settled <- s })
	require.NoError(t, err)
	inline := 0
	for round := range inlineRuns {
		session := fmt.Sprintf("carol-%d", round)
		crashed := make(stackSurface, 1)
		bad, err := sys.NewAgent(nil, session, owner.Options{Surface: failSurface{},
			Logger: slog.New(panicHandler{at: crashed})})
		require.NoError(t, err)
		require.NoError(t, sys.Jobs().RegisterAgent(ctx, bad))
		other := troupetest.NewProducer()
		other.OnCancel = &job.Outcome{Status: job.Killed}
		otherID, err := sys.Jobs().Start(ctx, other.Spec(bad))
		require.NoError(t, err)
		p := troupetest.NewProducer()
		id, err := sys.Jobs().Start(ctx, p.Spec(bad))
		require.NoError(t, err)
		_, err = bad.Stats(ctx) // the owner has taken its earlier messages
		require.NoError(t, err)
		p.Settle(job.Outcome{Status: job.Completed})

		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		got := map[string]string{}
		for len(got) < 2 {
			select {
			case s := <-settled:
				if s.Id == id || s.Id == otherID { // not bob's of the round before
					got[s.Id] = s.Status.Name()
				}
			case <-wctx.Done():
				t.Fatalf("round %d: settlements seen: %v", round, got)
			}
		}
		if inlineChain(<-crashed) {
			inline++
		}
		require.Equal(t, map[string]string{id: "completed", otherID: "killed"}, got,
			"the settlement whose notice crashed the owner is committed; the incarnation's other job is torn down")
		require.Eventually(t, func() bool { return sys.Jobs().RegisteredAgent(ctx, session) == nil }, 10*time.Second, time.Millisecond,
			"the crashed incarnation left the agent registry")

		q := troupetest.NewProducer()
		_, err = sys.Jobs().Start(ctx, q.Spec(good))
		require.NoError(t, err)
		q.Settle(job.Outcome{Status: job.Completed})
		select {
		case <-surface:
		case <-wctx.Done():
			t.Fatalf("round %d: another agent's notice was not delivered after the crash", round)
		}
		cancel()
	}
	t.Logf("owner crashes within the registry's run: %d of %d", inline, inlineRuns)
	require.Positive(t, inline, "no owner crashed within the job's and the registry's run")
	s, err := good.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, inlineRuns, s.Delivered)
}
