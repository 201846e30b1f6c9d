package registry

import (
	"runtime"
	"strconv"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
)

// The agent registry keeps one map entry per registered session — its PID and its
// wire credential by value, 56 B with its key — not three maps (session → PID,
// PID Id → session, session → secret: ≈ 105 B of slots per session). Measured as
// the live heap growth of 1,000 registrations (their sessions and PIDs made
// before): ≈ 130 B each with one map, ≈ 215 with three.
func TestAgentRegistryKeepsOneEntryPerSession(t *testing.T) {
	const n = 1000
	r := newRegistryActor(Config{}, nil)
	sessions, pids := make([]string, n), make([]*actor.PID, n)
	for i := range sessions {
		sessions[i] = "session-" + strconv.Itoa(i)
		pids[i] = actor.NewPID("nonhost", "owner-"+strconv.Itoa(i))
	}
	before := liveBytes()
	for i, s := range sessions {
		r.registerAgent(s, pids[i])
	}
	per := float64(liveBytes()-before) / n
	runtime.KeepAlive(r)
	t.Logf("%.0f B per registered session", per)
	require.Less(t, per, 150.0, "bytes the agent registry keeps per registered session")
	for i, s := range sessions {
		require.Equal(t, pids[i], r.agentPID(s))
	}
}

func liveBytes() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
