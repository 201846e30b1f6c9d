package supervision

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
)

type nopSupervisor struct{}

func (nopSupervisor) Children() []*actor.PID        { return nil }
func (nopSupervisor) EscalateFailure(_, _ any)      {}
func (nopSupervisor) RestartChildren(...*actor.PID) {}
func (nopSupervisor) StopChildren(...*actor.PID)    {}
func (nopSupervisor) ResumeChildren(...*actor.PID)  {}

// The strategy never learns that a child is gone, so its history must not keep every
// child that ever failed: entries whose failures have left the window are swept.
func TestRestartingSweepsChildrenOutsideTheWindow(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := Restarting(nil, Intensity{MaxRestarts: 3, Within: time.Second}, func() time.Time { return now }).(*restarting)
	pid := actor.NewPID("local", "child")
	fail := func() { s.HandleFailure(nil, nopSupervisor{}, pid, actor.NewRestartStatistics(), "boom", nil) }

	// Children failing within one window are all kept: they may fail again.
	for range 1000 {
		fail()
	}
	require.Len(t, s.history, 1000)

	// Once the window has passed, they go as new failures come.
	now = now.Add(time.Second)
	for range 1000 {
		fail()
	}
	require.LessOrEqual(t, len(s.history), 1000+minSweep, "the first thousand were swept")

	now = now.Add(time.Hour)
	for range 2 * minSweep {
		fail()
	}
	require.LessOrEqual(t, len(s.history), 2*minSweep+1)
}
