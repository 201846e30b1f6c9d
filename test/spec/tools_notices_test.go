package spec

import (
	"context"
	"errors"
	"github.com/troupe-rt/troupe/actors/registry"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/tools/jobtools"
	"github.com/troupe-rt/troupe/troupetest"
)

// SPEC §3.7 notice text and bounding, §3.8 lanes, budget and suppression, §3.9
// scoped mounts (cases 90–113). A notice travels registry listener → owner actor →
// surface; "no notice" is asserted after a positive barrier (quiesce or a probe),
// never after a sleep.

func TestSpec090_BusyOwnerGetsOneExactInjectedNotice(t *testing.T) {
	e := serveTools(t, jobtools.Config{})
	alice, s := e.agent(t, nil, "alice")
	alice.SetBusy(true)
	p := troupetest.NewProducer()
	p.Label = "pnpm test"
	id := start(t, e.sys, p.Spec(alice))
	p.Settle(job.Outcome{Status: job.Completed, Detail: "exit code: 0"})

	n := nextNote(t, s)
	require.Equal(t, "inject", n.verb)
	require.NotEmpty(t, n.msg.ID)
	n.msg.ID = ""
	require.Equal(t, owner.Message{
		Role: "user",
		Text: "background job bash-1 (bash: pnpm test) finished [status: completed, exit code: 0]. Read its output with job_output.",
		Source: owner.Source{Kind: "plugin", Plugin: "tool-jobs", Form: "notice",
			Summary: "bash pnpm test [status: completed, exit code: 0]"},
	}, n.msg)

	st := quiesce(t, e, alice, id)
	require.Empty(t, s.drain(), "inject is called once")
	require.Equal(t, owner.Stats{Busy: true, Delivered: 1}, st)
}

// settleLongSubagent starts an owned subagent job with a 1000-char label and a
// limit, settles it with a 1000-char detail and returns its one notice.
func settleLongSubagent(t *testing.T, e *toolEnv, a *owner.Agent, s *surface, limit int64) (string, note) {
	t.Helper()
	p := troupetest.NewProducer()
	p.Kind, p.Label = "subagent", strings.Repeat("x", 1000)
	spec := p.Spec(a)
	spec.OutputLimitBytes = &limit
	id := start(t, e.sys, spec)
	p.Settle(job.Outcome{Status: job.Completed, Detail: strings.Repeat("d", 1000)})
	quiesce(t, e, a, id)
	got := s.drain()
	require.Len(t, got, 1)
	return id, got[0]
}

func TestSpec091_NoticeBoundedToPrefixAndAction(t *testing.T) {
	e := serveTools(t, jobtools.Config{})
	alice, s := e.agent(t, nil, "alice")
	id, n := settleLongSubagent(t, e, alice, s, 61)
	require.Equal(t, "subagent-1", id)
	require.Equal(t, "background job subagent-1\nDone; job_output.", n.msg.Text)
	require.Equal(t, "subagent "+strings.Repeat("x", 110)+"…", n.msg.Source.Summary)
}

func TestSpec092_NoticeKeepsTheHeadOfItsDetail(t *testing.T) {
	e := serveTools(t, jobtools.Config{})
	alice, s := e.agent(t, nil, "alice")
	_, first := settleLongSubagent(t, e, alice, s, 61)
	require.Contains(t, first.msg.Text, "subagent-1")

	id, n := settleLongSubagent(t, e, alice, s, 80)
	require.Equal(t, "subagent-2", id)
	require.LessOrEqual(t, len(n.msg.Text), 80)
	require.True(t, utf8.ValidString(n.msg.Text))
	require.Contains(t, n.msg.Text, "background job subagent-2 (subagent: xxxx")
	require.Contains(t, n.msg.Text, "[notice truncated]\nDone; job_output.")
	require.Equal(t, "background job subagent-2 (subagent: xxxxxx\n[notice truncated]\nDone; job_output.", n.msg.Text)
}

func TestSpec095_ModelKillThatLandsClaimsTheNotice(t *testing.T) {
	e := serveTools(t, jobtools.Config{})
	alice, s := e.agent(t, nil, "alice")
	p := live()
	id := start(t, e.sys, p.Spec(alice))

	require.Equal(t, "requested cancellation of job bash-1",
		okText(t, e.call(ctx(t), "alice", "job_kill", `{"job_id":"bash-1"}`)))
	st := quiesce(t, e, alice, id)
	require.Empty(t, s.drain())
	require.Zero(t, st.Delivered)
}

func TestSpec096_PendingWaitClaimsTheNotice(t *testing.T) {
	e := serveTools(t, jobtools.Config{})
	alice, s := e.agent(t, nil, "alice")
	p := troupetest.NewProducer()
	p.Kind = "subagent"
	id := start(t, e.sys, p.Spec(alice))

	out := make(chan tools.Result, 1)
	go func() { out <- e.call(ctx(t), "alice", "job_output", `{"job_id":"`+id+`","wait":true}`) }()
	troupetest.AwaitWaiters(t, e.sys, id, 1)
	p.Settle(job.Outcome{Status: job.Completed, Output: "answer"})
	require.Contains(t, okText(t, recv(t, out)), "answer")

	st := quiesce(t, e, alice, id)
	require.Empty(t, s.drain())
	require.Zero(t, st.Delivered)
}

func TestSpec097_UnownedJobDeliversNothing(t *testing.T) {
	e := serveTools(t, jobtools.Config{})
	alice, s := e.agent(t, nil, "alice")
	p := troupetest.NewProducer()
	id := start(t, e.sys, p.Spec(nil))
	p.Settle(job.Outcome{Status: job.Completed, Detail: "exit code: 0"})

	snap := troupetest.Settled(t, e.sys, id, registry.NoCaller)
	require.False(t, snap.Reported, "nothing claimed it: it is suppressed for having no owner")
	require.Zero(t, stats(t, alice).Delivered)
	require.Empty(t, s.drain())
	require.False(t, e.logs.Contains("threw"), "%q", e.logs.Lines())
}

func TestSpec098_IdleOwnerIsWokenWithAFollowup(t *testing.T) {
	e := serveTools(t, jobtools.Config{})
	alice, s := e.agent(t, nil, "alice")
	p := troupetest.NewProducer()
	id := start(t, e.sys, p.Spec(alice))
	p.Settle(job.Outcome{Status: job.Completed})

	require.Equal(t, "followup", nextNote(t, s).verb)
	st := quiesce(t, e, alice, id)
	require.Empty(t, s.drain())
	require.Equal(t, owner.Stats{SpentWakes: 1, Delivered: 1}, st)
}

func TestSpec099_QuietDeliveryInjectsForAnIdleOwner(t *testing.T) {
	quiet := jobtools.Quiet
	e := serveTools(t, jobtools.Config{CompletionDelivery: &quiet})
	alice, s := e.agent(t, nil, "alice")
	p := troupetest.NewProducer()
	id := start(t, e.sys, p.Spec(alice))
	p.Settle(job.Outcome{Status: job.Completed})

	require.Equal(t, "inject", nextNote(t, s).verb)
	st := quiesce(t, e, alice, id)
	require.Empty(t, s.drain())
	require.Equal(t, owner.Stats{Delivered: 1}, st)
}

func TestSpec100_BusyOwnerGetsAnInjectUnderWakeup(t *testing.T) {
	e := serveTools(t, jobtools.Config{})
	alice, s := e.agent(t, nil, "alice")
	alice.SetBusy(true)
	p := troupetest.NewProducer()
	id := start(t, e.sys, p.Spec(alice))
	p.Settle(job.Outcome{Status: job.Completed})

	require.Equal(t, "inject", nextNote(t, s).verb)
	quiesce(t, e, alice, id)
	require.Empty(t, s.drain())
}

// settleOne starts an owned job, settles it completed and returns the lane its
// notice took.
func settleOne(t *testing.T, e *toolEnv, a *owner.Agent, s *surface) string {
	t.Helper()
	p := troupetest.NewProducer()
	id := start(t, e.sys, p.Spec(a))
	p.Settle(job.Outcome{Status: job.Completed})
	quiesce(t, e, a, id)
	got := s.drain()
	require.Len(t, got, 1)
	return got[0].verb
}

func TestSpec101_WakeBudgetThenInject(t *testing.T) {
	e := serveTools(t, jobtools.Config{MaxConsecutiveWakes: i64(2)})
	alice, s := e.agent(t, nil, "alice")
	lanes := []string{}
	for range 3 {
		lanes = append(lanes, settleOne(t, e, alice, s))
	}
	require.Equal(t, []string{"followup", "followup", "inject"}, lanes)
	require.Equal(t, 2, stats(t, alice).SpentWakes)
}

func TestSpec102_ClaimedUserMessageResetsTheBudget(t *testing.T) {
	e := serveTools(t, jobtools.Config{MaxConsecutiveWakes: i64(1)})
	alice, s := e.agent(t, nil, "alice")
	lanes := []string{settleOne(t, e, alice, s), settleOne(t, e, alice, s)}
	require.Equal(t, []string{"followup", "inject"}, lanes)

	alice.InboxClaimed("plugin") // claiming a notice does not reset the budget
	lanes = append(lanes, settleOne(t, e, alice, s))
	alice.InboxClaimed("user")
	lanes = append(lanes, settleOne(t, e, alice, s))
	require.Equal(t, []string{"followup", "inject", "inject", "followup"}, lanes)
	require.Equal(t, 2, strings.Count(strings.Join(lanes, " "), "followup"))
}

func TestSpec104_OwnerTeardownDeliversNothing(t *testing.T) {
	e := serveTools(t, jobtools.Config{})
	alice, s := e.agent(t, nil, "alice")
	probe := probeBeforeStop(t, alice)
	done := onDone(t, e.sys, e.sys.Scope())
	p := live()
	start(t, e.sys, p.Spec(alice))

	require.NoError(t, alice.Dispose(ctx(t)))
	require.Equal(t, []string{"owner disposed"}, p.Cancels())
	st := recv(t, probe)
	require.Zero(t, st.Delivered)
	require.Zero(t, st.Duplicates)
	require.Empty(t, s.drain(), "neither followup nor inject")
	snaps := done.Snaps()
	require.Len(t, snaps, 1)
	require.Equal(t, snapView{"killed", true}, view(snaps[0]))
}

func TestSpec107_NoticeReachesTheOwnerAfterTheAgentRegistryIsGone(t *testing.T) {
	e := serveTools(t, jobtools.Config{})
	alice, s := e.agent(t, nil, "alice")
	alice.SetBusy(true)
	p1, p2 := troupetest.NewProducer(), troupetest.NewProducer()
	id1 := start(t, e.sys, p1.Spec(alice))
	id2 := start(t, e.sys, p2.Spec(alice))

	require.NoError(t, e.agents.Run(ctx(t)))
	_, err := e.sys.Jobs().Start(context.Background(), live().Spec(alice))
	requireHinted(t, err, prefixNoAgentRegistry)

	p1.Settle(job.Outcome{Status: job.Completed})
	quiesce(t, e, alice, id1)
	p2.Settle(job.Outcome{Status: job.Failed})
	st := quiesce(t, e, alice, id2)
	got := s.drain()
	require.Equal(t, []string{"inject", "inject"}, verbs(got))
	require.Contains(t, got[0].msg.Text, "background job bash-1 ")
	require.Contains(t, got[1].msg.Text, "background job bash-2 ")
	require.Equal(t, 2, st.Delivered)
}

func TestSpec108_FailingInjectIsLogged(t *testing.T) {
	e := serveTools(t, jobtools.Config{})
	s := newSurface()
	s.fail = errors.New("unexpected inject bug")
	alice, err := e.sys.NewAgent(nil, "alice", owner.Options{Surface: s})
	require.NoError(t, err)
	require.NoError(t, e.sys.Jobs().RegisterAgent(context.Background(), alice))
	alice.SetBusy(true)
	p := troupetest.NewProducer()
	id := start(t, e.sys, p.Spec(alice))
	p.Settle(job.Outcome{Status: job.Completed})

	st := quiesce(t, e, alice, id)
	require.Equal(t, []string{"inject"}, verbs(s.drain()))
	require.True(t, e.logs.Contains("unexpected inject bug"), "%q", e.logs.Lines())
	require.Contains(t, e.logs.Lines(), "jobs: onJobDone listener threw for bash-1: unexpected inject bug")
	require.Equal(t, 1, st.Failed)
	require.Zero(t, st.Delivered)
}

// panicSurface panics in every verb.
type panicSurface struct{}

func (panicSurface) Inject(owner.Message) error   { panic("unexpected inject bug") }
func (panicSurface) Steer(owner.Message) error    { panic("unexpected steer bug") }
func (panicSurface) Followup(owner.Message) error { panic("unexpected followup bug") }

func TestSpec108_PanickingInjectIsLoggedToo(t *testing.T) {
	e := serveTools(t, jobtools.Config{})
	alice, err := e.sys.NewAgent(nil, "alice", owner.Options{Surface: panicSurface{}})
	require.NoError(t, err)
	require.NoError(t, e.sys.Jobs().RegisterAgent(context.Background(), alice))
	alice.SetBusy(true)
	p := troupetest.NewProducer()
	id := start(t, e.sys, p.Spec(alice))
	p.Settle(job.Outcome{Status: job.Completed})

	st := quiesce(t, e, alice, id)
	require.Contains(t, e.logs.Lines(), "jobs: onJobDone listener threw for bash-1: unexpected inject bug")
	require.Equal(t, 1, st.Failed)
}

func TestSpec109_SiblingMountsDeliverOnce(t *testing.T) {
	sys, _ := troupetest.NewSystem(t)
	_, err := sys.Jobs().MountAgents(context.Background(), sys.Scope())
	require.NoError(t, err)
	a := childScope(t, sys.Scope(), "preset-a")
	b := childScope(t, sys.Scope(), "preset-b")
	_, err = jobtools.MountIn(t.Context(), sys.Jobs(), a, jobtools.Config{})
	require.NoError(t, err)
	_, err = jobtools.MountIn(t.Context(), sys.Jobs(), b, jobtools.Config{})
	require.NoError(t, err)
	e := &toolEnv{sys: sys}
	alice, s := e.agent(t, a, "alice")
	alice.SetBusy(true)
	p := troupetest.NewProducer()
	id := start(t, sys, p.Spec(alice))
	p.Settle(job.Outcome{Status: job.Completed})

	st := quiesce(t, e, alice, id)
	require.Equal(t, []string{"inject"}, verbs(s.drain()))
	require.Equal(t, owner.Stats{Busy: true, Delivered: 1}, st, "B's listener never fired: no duplicate either")
}

func TestSpec112_TimedOutWaitClaimsNothing(t *testing.T) {
	e := serveTools(t, jobtools.Config{WaitTimeoutMs: i64(10), MaxWaitTimeoutMs: i64(20)})
	alice, s := e.agent(t, nil, "alice")
	alice.SetBusy(true)
	p := troupetest.NewProducer()
	id := start(t, e.sys, p.Spec(alice))

	res := e.call(ctx(t), "alice", "job_output", `{"job_id":"`+id+`","wait":true}`)
	require.Equal(t, "(no new output)\n[status: running]", okText(t, res))
	p.Settle(job.Outcome{Status: job.Completed})

	require.False(t, troupetest.Settled(t, e.sys, id, asSession("alice")).Reported)
	st := stats(t, alice)
	require.Equal(t, []string{"inject"}, verbs(s.drain()), "exactly one notice")
	require.Equal(t, 1, st.Delivered)
}

func TestSpec113_AbortedWaitClaimsNothing(t *testing.T) {
	e := serveTools(t, jobtools.Config{})
	alice, s := e.agent(t, nil, "alice")
	alice.SetBusy(true)
	p := troupetest.NewProducer()
	p.Stream = true
	p.Emit("kept for a later read")
	id := start(t, e.sys, p.Spec(alice))

	c, cancel := context.WithCancel(ctx(t))
	out := make(chan tools.Result, 1)
	go func() { out <- e.call(c, "alice", "job_output", `{"job_id":"`+id+`","wait":true}`) }()
	troupetest.AwaitWaiters(t, e.sys, id, 1)
	cancel() // the tool's abort signal
	got := errText(t, recv(t, out))
	require.Contains(t, got, "wait aborted")
	require.Equal(t, "Error: wait aborted", got)

	p.Settle(job.Outcome{Status: job.Completed})
	require.False(t, troupetest.Settled(t, e.sys, id, asSession("alice")).Reported)
	st := stats(t, alice)
	require.Equal(t, []string{"inject"}, verbs(s.drain()), "exactly one notice")
	require.Equal(t, 1, st.Delivered)
	// The aborted call read nothing: the delta is still there.
	require.Equal(t, "kept for a later read\n[status: completed]",
		okText(t, e.call(ctx(t), "alice", "job_output", `{"job_id":"`+id+`"}`)))
}
