package controller_test

import (
	"context"
	"github.com/troupe-rt/troupe/actors/registry"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/controller"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/troupetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	flush      = 5 * time.Millisecond
	frameWait  = 10 * time.Second
	frameBytes = 64
)

func setup(t *testing.T) (*troupe.System, *controller.Controller) {
	sys, _ := troupetest.Served(t)
	ctl, err := sys.StartController(controller.Config{ObserveFlush: flush, ObserveMaxFrameBytes: frameBytes})
	require.NoError(t, err)
	return sys, ctl
}

func next[T any](t *testing.T, frames <-chan T) T {
	t.Helper()
	select {
	case f, ok := <-frames:
		require.True(t, ok, "the stream ended")
		return f
	case <-time.After(frameWait):
		t.Fatal("no frame arrived")
	}
	var zero T
	return zero
}

func ids(r *messages.JobRoster) []string {
	var out []string
	for _, j := range r.Jobs {
		out = append(out, j.Id+":"+j.Status.Name())
	}
	return out
}

func TestRosterFollowsLifecycleChanges(t *testing.T) {
	sys, ctl := setup(t)
	alice := troupetest.Agent(t, sys, "alice")
	bob := troupetest.Agent(t, sys, "bob")
	p := troupetest.NewProducer()
	_, err := sys.Jobs().Start(context.Background(), p.Spec(alice))
	require.NoError(t, err)

	s := ctl.List("alice")
	defer s.Close()
	require.Equal(t, []string{"bash-1:running"}, ids(next(t, s.Frames)))

	q := troupetest.NewProducer()
	q.OnCancel = &job.Outcome{Status: job.Killed}
	_, err = sys.Jobs().Start(context.Background(), q.Spec(bob)) // bob's job: not in alice's roster
	require.NoError(t, err)
	p.Settle(job.Outcome{Status: job.Completed})
	troupetest.Settled(t, sys, "bash-1", registry.AsAgent(alice))
	want := []string{"bash-1:completed"}
	for r := next(t, s.Frames); !equal(ids(r), want); r = next(t, s.Frames) {
	}
	snap, err := sys.Jobs().Get(context.Background(), "bash-1", registry.AsAgent(alice))
	require.NoError(t, err)
	require.False(t, snap.Reported, "the roster never claims")
}

func equal(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

func TestFollowStreamsTheRecordThenTheStatus(t *testing.T) {
	sys, ctl := setup(t)
	alice := troupetest.Agent(t, sys, "alice")
	p := troupetest.NewProducer()
	p.Stream = true
	p.Record = job.NewRecord()
	p.Record.Append("before start\n", job.AppendOptions{})
	p.Emit("model's view")
	id, err := sys.Jobs().Start(context.Background(), p.Spec(alice))
	require.NoError(t, err)

	f := ctl.Follow("alice", id, nil)
	defer f.Close()
	opened := next(t, f.Frames).GetOpened()
	require.NotNil(t, opened)
	require.True(t, opened.HasRecord)
	require.Equal(t, "bash-1", opened.Job.Id)

	p.Record.Append("out\n", job.AppendOptions{Channel: "stdout"})
	p.Record.Append("warn\n", job.AppendOptions{Channel: "stderr"})
	var got strings.Builder
	for !strings.Contains(got.String(), "warn\n") {
		out := next(t, f.Frames).GetOutput()
		require.NotNil(t, out)
		for _, c := range out.Chunks {
			got.WriteString(c.Text)
		}
	}
	require.Equal(t, "before start\nout\nwarn\n", got.String())

	p.Settle(job.Outcome{Status: job.Completed, Detail: "exit code: 0"})
	var status *messages.PublicJob
	for status == nil {
		status = next(t, f.Frames).GetStatus()
	}
	require.Equal(t, job.Completed, status.Status)
	_, ok := <-f.Frames
	require.False(t, ok, "the stream ends after the status frame")

	text, snap, err := sys.Jobs().Read(context.Background(), id, registry.AsAgent(alice))
	require.NoError(t, err)
	require.Equal(t, "model's view", text, "following never moved the model's cursor")
	require.True(t, snap.Reported)
}

func TestFollowFramesAreBoundedAndLossyWhenEvicted(t *testing.T) {
	sys, ctl := setup(t)
	p := troupetest.NewProducer()
	p.Record = job.NewRecord()
	big := strings.Repeat("x", job.DefaultRetainBytes)
	p.Record.Append(big, job.AppendOptions{})
	for range 10 {
		p.Record.Append(strings.Repeat("y", 20), job.AppendOptions{})
	}
	id, err := sys.Jobs().Start(context.Background(), p.Spec(nil))
	require.NoError(t, err)
	f := ctl.Follow("", id, nil)
	defer f.Close()
	opened := next(t, f.Frames).GetOpened()
	require.Greater(t, opened.Earliest, int64(0), "the oldest output was evicted")
	first := next(t, f.Frames).GetOutput()
	require.True(t, first.Lossy, "from 0 is below the earliest retained offset")
	total := 0
	for _, c := range first.Chunks {
		total += len(c.Text)
	}
	if len(first.Chunks) > 1 {
		require.LessOrEqual(t, total, frameBytes)
	}
	p.Settle(job.Outcome{Status: job.Completed})
}

func TestFollowWithoutRecordOrAccess(t *testing.T) {
	sys, ctl := setup(t)
	alice := troupetest.Agent(t, sys, "alice")
	p := troupetest.NewProducer()
	id, err := sys.Jobs().Start(context.Background(), p.Spec(alice))
	require.NoError(t, err)

	foreign := ctl.Follow("", id, nil)
	e := next(t, foreign.Frames).GetError()
	require.NotNil(t, e)
	require.Equal(t, string(messages.CodeNotFound), e.Code)
	require.Equal(t, "job bash-1 belongs to another session", e.Message)
	foreign.Close()

	f := ctl.Follow("alice", id, nil)
	defer f.Close()
	opened := next(t, f.Frames).GetOpened()
	require.False(t, opened.HasRecord)
	p.Settle(job.Outcome{Status: job.Failed, Detail: "boom"})
	status := next(t, f.Frames).GetStatus()
	require.Equal(t, job.Failed, status.Status)
	require.Equal(t, "boom", status.GetDetail())
}
