package spec

import (
	"context"
	"errors"
	"github.com/troupe-rt/troupe/actors/registry"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/controller"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/tools/jobtools"
	"github.com/troupe-rt/troupe/troupetest"
)

const humanBudget = 10 * time.Second

// inbox is a delivery surface that records what reaches the agent.
type inbox struct{ msgs chan owner.Message }

func newInbox() *inbox                          { return &inbox{msgs: make(chan owner.Message, 16)} }
func (i *inbox) Inject(m owner.Message) error   { i.msgs <- m; return nil }
func (i *inbox) Steer(m owner.Message) error    { i.msgs <- m; return nil }
func (i *inbox) Followup(m owner.Message) error { i.msgs <- m; return nil }

// humanSystem is a system with the job tools mounted globally, the agent registry,
// the job-controller, and agent S with a recording surface.
func humanSystem(t *testing.T) (*troupe.System, *controller.Controller, *owner.Agent, *inbox) {
	t.Helper()
	sys, _ := troupetest.NewSystem(t)
	_, err := jobtools.MountIn(t.Context(), sys.Jobs(), sys.Scope(), jobtools.DefaultConfig())
	require.NoError(t, err)
	_, err = sys.Jobs().MountAgents(context.Background(), sys.Scope())
	require.NoError(t, err)
	ctl, err := sys.StartController(controller.Config{})
	require.NoError(t, err)
	in := newInbox()
	s, err := sys.NewAgent(nil, "S", owner.Options{Surface: in})
	require.NoError(t, err)
	require.NoError(t, sys.Jobs().RegisterAgent(context.Background(), s))
	return sys, ctl, s, in
}

func TestSpec120_HumanKillOfUnknownOrForeignJobIsNotFound(t *testing.T) {
	sys, ctl, _, _ := humanSystem(t)
	other := troupetest.Agent(t, sys, "T")
	p := troupetest.NewProducer()
	p.OnCancel = &job.Outcome{Status: job.Killed}
	id, err := sys.Jobs().Start(context.Background(), p.Spec(other))
	require.NoError(t, err)
	require.Equal(t, "bash-1", id)
	ctx, cancel := context.WithTimeout(context.Background(), humanBudget)
	defer cancel()
	for _, target := range []string{"bash-7", "bash-1"} {
		_, err := ctl.Kill(ctx, "S", target)
		require.ErrorIs(t, err, messages.ErrNotFound, target)
		var e *messages.Error
		require.ErrorAs(t, err, &e)
		require.Equal(t, map[string]string{"sessionId": "S", "jobId": target}, e.Details)
	}
	snap, err := sys.Jobs().Get(ctx, "bash-1", registry.AsAgent(other))
	require.NoError(t, err)
	require.Equal(t, job.Running, snap.Status, "the foreign job was not touched")
}

func TestSpec121_HumanKillReasonReachesTheModelsNotice(t *testing.T) {
	sys, ctl, s, in := humanSystem(t)
	p := troupetest.NewProducer()
	id, err := sys.Jobs().Start(context.Background(), p.Spec(s))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), humanBudget)
	defer cancel()
	outcome, err := ctl.Kill(ctx, "S", id)
	require.NoError(t, err)
	require.Equal(t, messages.KillResult_KILL_RESULT_REQUESTED, outcome)
	require.Equal(t, controller.ReasonUser, p.NextCancel(t))
	p.Settle(job.Outcome{Status: job.Killed, Detail: "signal: SIGTERM"})
	snap := troupetest.Settled(t, sys, id, asSession("S"))
	require.Equal(t, "signal: SIGTERM; cancelled by the user", snap.GetDetail())
	require.False(t, snap.Reported, "a human kill never claims")
	select {
	case m := <-in.msgs:
		require.Equal(t, "background job bash-1 (bash: test job) finished [status: killed, signal: SIGTERM; cancelled by the user]. Read its output with job_output.", m.Text)
	case <-ctx.Done():
		t.Fatal("no notice reached the agent")
	}
}

func TestSpec122_HumanKillOfFinishedJobDoesNotCancel(t *testing.T) {
	sys, ctl, s, _ := humanSystem(t)
	p := troupetest.NewProducer()
	id, err := sys.Jobs().Start(context.Background(), p.Spec(s))
	require.NoError(t, err)
	p.Settle(job.Outcome{Status: job.Completed, Detail: "exit code: 0"})
	troupetest.Settled(t, sys, id, asSession("S"))
	ctx, cancel := context.WithTimeout(context.Background(), humanBudget)
	defer cancel()
	outcome, err := ctl.Kill(ctx, "S", id)
	require.NoError(t, err)
	require.Equal(t, messages.KillResult_KILL_RESULT_ALREADY_FINISHED, outcome)
	require.Empty(t, p.Cancels())
	snap, err := sys.Jobs().Get(ctx, id, asSession("S"))
	require.NoError(t, err)
	require.False(t, snap.Reported, "a human kill of a finished job changes nothing")
}

func TestHumanKillCancelErrorPropagatesAsItself(t *testing.T) {
	sys, ctl, s, _ := humanSystem(t)
	p := troupetest.NewProducer()
	p.CancelErr = errors.New("cancel boom")
	id, err := sys.Jobs().Start(context.Background(), p.Spec(s))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), humanBudget)
	defer cancel()
	_, err = ctl.Kill(ctx, "S", id)
	require.ErrorIs(t, err, messages.ErrCancelFailed)
	require.Equal(t, "cancel boom", err.Error())
	snap, err := sys.Jobs().Get(ctx, id, asSession("S"))
	require.NoError(t, err)
	require.Equal(t, job.Running, snap.Status)
}
