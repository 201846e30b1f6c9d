package activation_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/internal/fault"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/troupetest"
)

// budget bounds every wait; nothing waits for it to pass.
const budget = 10 * time.Second

// faultyStore panics (inside the Activation's Receive) when a message whose text is
// "boom" is accepted, once; and reports every appended entry.
type faultyStore struct {
	*session.Memory
	panicked atomic.Bool
	// abortPanics, if set, makes the first append of a turn/aborted-by-crash entry
	// panic too (inside the restarted Activation's restore), once.
	abortPanics atomic.Bool
	mu          sync.Mutex
	appended    chan session.Entry
}

func (s *faultyStore) Accept(ctx context.Context, id string, epoch uint64, m session.InboxMessage) (session.InboxMessage, error) {
	if len(m.Content) > 0 && m.Content[0].Text == "boom" && s.panicked.CompareAndSwap(false, true) {
		panic("store exploded")
	}
	return s.Memory.Accept(ctx, id, epoch, m)
}

func (s *faultyStore) Append(ctx context.Context, id string, epoch uint64, entries ...session.Entry) error {
	if len(entries) > 0 && entries[0].Kind == session.EntryTurnAborted && s.abortPanics.CompareAndSwap(true, false) {
		panic("store exploded while restoring")
	}
	err := s.Memory.Append(ctx, id, epoch, entries...)
	if err == nil {
		for _, e := range entries {
			s.appended <- e
		}
	}
	return err
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
		}
	}
}

// rig is what every test here sets up: a served System, a scripted runner
// answering by match, a faultyStore (restorePanics arms its restore panic), the
// continuation manager (with opts) and a registered parent agent P whose notices
// land in in.
type rig struct {
	sys    *troupe.System
	logs   *troupetest.Logs
	store  *faultyStore
	runner *subagent.Scripted
	m      *activation.Manager
	parent *owner.Agent
	in     *inbox
}

func newRig(t *testing.T, match func(subagent.Turn) (subagent.Reply, bool), restorePanics bool, opts ...activation.Option) *rig {
	t.Helper()
	sys, logs := troupetest.Served(t)
	rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), nil)
	require.NoError(t, err)
	runner := subagent.NewScripted()
	runner.Match = match
	_, err = rt.RegisterProvider(t.Context(), sys.Scope(), subagent.NewSpawn(sys.Actors(), runner))
	require.NoError(t, err)
	store := &faultyStore{Memory: session.NewMemory(), appended: make(chan session.Entry, 256)}
	store.abortPanics.Store(restorePanics)
	m, err := sys.StartContinuations(store, rt, runner, nil, append([]activation.Option{activation.WithLogger(slog.New(logs))}, opts...)...)
	require.NoError(t, err)
	in := &inbox{msgs: make(chan owner.Message, 8)}
	parent, err := sys.NewAgent(nil, "P", owner.Options{Surface: in})
	require.NoError(t, err)
	require.NoError(t, sys.Jobs().RegisterAgent(context.Background(), parent))
	return &rig{sys: sys, logs: logs, store: store, runner: runner, m: m, parent: parent, in: in}
}

// notice waits for P's next settlement notice.
func (r *rig) notice(t *testing.T) owner.Message {
	t.Helper()
	select {
	case n := <-r.in.msgs:
		return n
	case <-time.After(budget):
		t.Fatalf("no settlement notice; logs %v; live %d", r.logs.Lines(), r.m.Live(context.Background()))
		return owner.Message{}
	}
}

// ran is the input of every turn the runner was given, in order.
func (r *rig) ran() []string {
	var out []string
	for _, turn := range r.runner.Turns() {
		out = append(out, turn.Input.Text())
	}
	return out
}

// crashRun is the crash both restart tests drive: a child whose first turn
// ("task") is held, two followups B and C queued behind it, and a followup "boom"
// whose handling panics the Activation; restorePanics makes the restore's first
// append panic as well (the restart crashes too).
type crashRun struct {
	*rig
	aborted session.Entry // the turn/aborted entry of the cut-off turn
}

// crashWhileHeld runs the crash until the child's settlement notice and checks
// what both tests expect of it: "boom" answered ACTIVATION_FAILED, the cut-off
// turn recorded aborted, the notice carrying C's reply.
func crashWhileHeld(t *testing.T, restorePanics bool) *crashRun {
	t.Helper()
	r := newRig(t, func(turn subagent.Turn) (subagent.Reply, bool) {
		if in := turn.Input.Text(); in != "task" {
			return subagent.Reply{Text: strings.ToLower(in) + " done"}, true
		}
		return subagent.Reply{Block: true}, true // held until the restart cancels it
	}, restorePanics)
	ctx := context.Background()

	_, first, err := r.m.Start(ctx, r.parent, "spawn", "research", "c", subagent.Request{Prompt: "task"})
	require.NoError(t, err)
	waitEntry(t, r.store.appended, session.EntryTurnStart) // the first turn is in flight (held)
	for _, text := range []string{"B", "C"} {
		_, err := r.m.Followup(ctx, r.parent, "c", text, session.Source{Kind: "coordinator"})
		require.NoError(t, err)
	}
	_, err = r.m.Followup(ctx, r.parent, "c", "boom", session.Source{Kind: "coordinator"})
	require.Equal(t, activation.CodeActivationFailed, messages.CodeOf(err), "%v", err)

	aborted := waitEntry(t, r.store.appended, session.EntryTurnAborted)
	require.Equal(t, first, aborted.InboxID)
	require.Equal(t, []string{"Its closing message:", "c done"}, r.notice(t).More)
	return &crashRun{rig: r, aborted: aborted}
}

// requireRestored checks the child's log after the crash: the given epoch, the
// cut-off turn recorded aborted and not re-run, B and C each run once.
func (r *crashRun) requireRestored(t *testing.T, epoch uint64, msg string) {
	t.Helper()
	snap, err := r.store.Load(context.Background(), "c")
	require.NoError(t, err)
	require.Equal(t, epoch, snap.Header.Epoch, msg)
	var users, ends []string
	for _, e := range snap.Log {
		switch {
		case e.Kind == session.EntryMessage && e.Role == "user":
			users = append(users, e.Content[0].Text)
		case e.Kind == session.EntryTurnEnd || e.Kind == session.EntryTurnAborted:
			ends = append(ends, e.Kind+":"+e.StopReason)
		}
	}
	require.Equal(t, []string{"task", "B", "C"}, users, "the cut-off turn is not re-run")
	require.Equal(t, []string{"turn/aborted-by-crash:aborted", "turn/end:completed", "turn/end:completed"}, ends)
	var reran []string
	for _, turn := range r.runner.Turns() {
		if in := turn.Input.Text(); in != "task" { // the cut-off turn's runner call may still be on its way
			reran = append(reran, in)
		}
	}
	require.Equal(t, []string{"B", "C"}, reran, "each queued message ran once")
}

// An Activation that panics restarts from its persisted session: the turn in flight
// is recorded aborted (not re-run), the messages queued behind it run in order, the
// message whose handling crashed is answered ACTIVATION_FAILED, and the child stays
// the same session with a new epoch (its predecessor fenced).
func TestActivationPanicRestartsFromTheStore(t *testing.T) {
	r := crashWhileHeld(t, false)
	require.Equal(t, subagent.StopAborted, r.aborted.StopReason)
	require.True(t, r.logs.Contains("panicked and restarts from its persisted session"))
	r.requireRestored(t, 2, "the restart took a new epoch")
	require.Nil(t, r.sys.Jobs().RegisteredAgent(context.Background(), "c"), "the child agent was disposed with its Activation")
}

// An Activation whose restore panics too (its restart crashes before it has
// recorded the cut-off turn) is restarted again, within the restart intensity: the
// second restore records the turn aborted and the queued messages still run, each
// once, and the child settles. (Its reset in place must leave it marked crashed
// while it restores, or the second crash would go unnoticed and the queue would
// never run.)
func TestActivationPanicInItsRestoreRestartsAgain(t *testing.T) {
	r := crashWhileHeld(t, true)
	require.False(t, r.store.abortPanics.Load(), "the restore's append panicked")
	require.True(t, r.logs.Contains("store exploded while restoring"), "the second crash was supervised: %v", r.logs.Lines())
	r.requireRestored(t, 3, "each restart took a new epoch")
}

// A restart whose restore panics consumes none of the messages queued meanwhile:
// the reset runs on a Started of its own, ahead of the mailbox, and the message
// queued while the crashed Activation was suspended still runs once the second
// restore succeeds. (When the reset ran on the first queued message instead, its
// panic took that message with it — here a delivery from the child's surface,
// in the suites a disposal step or agentGone — and the child never ran it, or
// never settled.)
func TestActivationRestoreThatPanicsLosesNoQueuedMessage(t *testing.T) {
	release := make(chan struct{})
	r := newRig(t, func(turn subagent.Turn) (subagent.Reply, bool) {
		if in := turn.Input.Text(); in != "task" {
			return subagent.Reply{Text: strings.ToLower(in) + " done"}, true
		}
		<-release // ignores the cancellation: the restart waits for it (RestartGrace)
		return subagent.Reply{Block: true}, true
	}, true, func(d *activation.Deps) { d.RestartGrace = time.Hour })
	ctx := context.Background()

	_, _, err := r.m.Start(ctx, r.parent, "spawn", "research", "c", subagent.Request{Prompt: "task"})
	require.NoError(t, err)
	waitEntry(t, r.store.appended, session.EntryTurnStart)
	_, err = r.m.Followup(ctx, r.parent, "c", "boom", session.Source{Kind: "coordinator"})
	require.Equal(t, activation.CodeActivationFailed, messages.CodeOf(err), "%v", err)
	// The crashed Activation is suspended until its cut-off turn returns: D waits in
	// its mailbox, and the first restore panics when the turn is released.
	require.True(t, r.m.DeliverToActivation("c", owner.Message{ID: "d-1", Role: "user", Text: "D",
		Source: owner.Source{Kind: "coordinator"}}))
	close(release)

	require.Equal(t, []string{"Its closing message:", "d done"}, r.notice(t).More)
	require.False(t, r.store.abortPanics.Load(), "the first restore panicked")
	require.True(t, r.logs.Contains("store exploded while restoring"), "%v", r.logs.Lines())
	require.Equal(t, []string{"task", "D"}, r.ran(), "D, queued during the crash, ran once after the second restore")
}

// A cold restore records its followup's turn start in the commit that accepts it
// (Store.ResumeAccept); an Activation that crashes after answering the followup,
// before that turn ran, restarts and runs the turn — it is not logged cut off by
// the crash, since it never ran — and the turn start is in the log once. (Logged
// aborted, the accepted message would never run.)
func TestColdRestoreCrashBeforeItsRecordedTurnRunsIt(t *testing.T) {
	r := newRig(t, func(turn subagent.Turn) (subagent.Reply, bool) {
		return subagent.Reply{Text: turn.Input.Text() + " done"}, true
	}, false)
	ctx := context.Background()

	_, _, err := r.m.Start(ctx, r.parent, "spawn", "research", "c", subagent.Request{Prompt: "task"})
	require.NoError(t, err)
	require.Equal(t, []string{"Its closing message:", "task done"}, r.notice(t).More)

	restore := fault.Install(fault.New(1, fault.PointPercent(activation.PointActivationRecordedCrash, 100)))
	msgID, err := r.m.Followup(ctx, r.parent, "c", "again", session.Source{Kind: "coordinator"})
	require.NoError(t, err, "answered before the crash")
	require.Equal(t, []string{"Its closing message:", "again done"}, r.notice(t).More, "the restarted Activation ran the turn")
	restore()
	require.True(t, r.logs.Contains("planted crash after a cold restore's answer"), "%v", r.logs.Lines())

	require.Equal(t, []string{"task", "again"}, r.ran())
	require.Equal(t, 2, r.runner.Turns()[1].History.Len(), "its history is the first turn's, not its own input too")
	snap, err := r.store.Load(ctx, "c")
	require.NoError(t, err)
	var kinds []string
	for _, e := range snap.Log {
		if e.InboxID == string(msgID) {
			kinds = append(kinds, e.Kind)
		}
	}
	require.Equal(t, []string{session.EntryTurnStart, session.EntryTurnEnd}, kinds, "started once, not aborted")
}

// A cold restore whose commit recorded its followup's turn start and whose
// Activation cannot be made (the child's agent refused) answers the followup an
// error and logs that turn aborted — as a crash right after the commit would have
// left it — so it is resolved: no Activation is left, and the next followup
// restores the child and runs alone, the refused message not run.
func TestColdRestoreWhoseAgentFailsLogsItsRecordedTurnAborted(t *testing.T) {
	var refuse atomic.Bool
	r := newRig(t, func(turn subagent.Turn) (subagent.Reply, bool) {
		return subagent.Reply{Text: turn.Input.Text() + " done"}, true
	}, false, func(d *activation.Deps) {
		newAgent := d.NewAgent
		d.NewAgent = func(id string, inbox owner.Surface) (*owner.Agent, error) {
			if refuse.CompareAndSwap(true, false) {
				return nil, messages.Errorf("TEST_REFUSED", "agent refused")
			}
			return newAgent(id, inbox)
		}
	})
	ctx := context.Background()

	_, _, err := r.m.Start(ctx, r.parent, "spawn", "research", "c", subagent.Request{Prompt: "task"})
	require.NoError(t, err)
	require.Equal(t, []string{"Its closing message:", "task done"}, r.notice(t).More)

	refuse.Store(true)
	_, err = r.m.Followup(ctx, r.parent, "c", "refused", session.Source{Kind: "coordinator"})
	require.Equal(t, messages.Code("TEST_REFUSED"), messages.CodeOf(err), "%v", err)
	require.Zero(t, r.m.Live(ctx), "no Activation is left")
	snap, err := r.store.Load(ctx, "c")
	require.NoError(t, err)
	last := snap.Inbox[len(snap.Inbox)-1]
	require.Equal(t, "refused", last.Content[0].Text)
	var kinds []string
	for _, e := range snap.Log {
		if e.InboxID == last.ID {
			kinds = append(kinds, e.Kind)
		}
	}
	require.Equal(t, []string{session.EntryTurnStart, session.EntryTurnAborted}, kinds, "resolved: logged aborted")

	_, err = r.m.Followup(ctx, r.parent, "c", "after", session.Source{Kind: "coordinator"})
	require.NoError(t, err)
	require.Equal(t, []string{"Its closing message:", "after done"}, r.notice(t).More)
	require.Equal(t, []string{"task", "after"}, r.ran(), "the refused message never ran")
}

// A child's agent must be of the child's session (Deps.NewAgent): the directory
// reads the child id off it. An agent of another session is refused and disposed,
// and nothing of the child is left: no Activation, no registration, no session.
func TestAChildAgentOfAnotherSessionIsRefused(t *testing.T) {
	r := newRig(t, func(turn subagent.Turn) (subagent.Reply, bool) {
		return subagent.Reply{Text: turn.Input.Text() + " done"}, true
	}, false, func(d *activation.Deps) {
		newAgent := d.NewAgent
		d.NewAgent = func(id string, inbox owner.Surface) (*owner.Agent, error) { return newAgent(id+"-other", inbox) }
	})
	ctx := context.Background()
	_, _, err := r.m.Start(ctx, r.parent, "spawn", "research", "c", subagent.Request{Prompt: "task"})
	require.ErrorContains(t, err, `NewAgent made an agent of session "c-other" for child "c"`)
	require.Zero(t, r.m.Live(ctx), "no Activation is left")
	require.Nil(t, r.sys.Jobs().RegisteredAgent(ctx, "c-other"), "the agent is unregistered")
	_, err = r.store.Load(ctx, "c")
	require.Error(t, err, "the session is deleted")
	require.Empty(t, r.m.IndexProblems())
}
