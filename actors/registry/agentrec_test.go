package registry

import (
	"runtime"
	"strconv"
	"testing"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
)

// The agent registry keeps one map entry per registered session — its PID and its
// registration number by value, 32 B with its key (its wire credential is derived
// from the number: auth.go) — not three maps (session → PID, PID Id → session,
// session → secret: ≈ 105 B of slots per session). Measured as the live heap
// growth of 1,000 registrations (their sessions and PIDs made before): 44-50 B each
// (93 B when the entry held the 32 B credential, ≈ 215 with three maps); a -race
// build reads ≈ 82 B.
func TestAgentRegistryKeepsOneEntryPerSession(t *testing.T) {
	require.LessOrEqual(t, unsafe.Sizeof(agentRec{}), uintptr(16), "unsafe.Sizeof(agentRec{})")
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
	require.Less(t, per, 100.0, "bytes the agent registry keeps per registered session")
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

// A wire credential is 32 B, fresh for every registration — a same instance's
// registration after its unregistration too — and only its session's current
// registration's authenticates; another registry's credentials are its own.
func TestEveryRegistrationHasAFreshCredential(t *testing.T) {
	r, other := newRegistryActor(Config{}, nil), newRegistryActor(Config{}, nil)
	a := actor.NewPID("nonhost", "owner-1")
	cred := func(r *registryActor, s string) []byte {
		rec, ok := r.agents[s]
		require.True(t, ok, "%s is registered", s)
		c := append([]byte(nil), r.creds.of(s, rec.reg)...)
		require.Len(t, c, 32)
		return c
	}
	authenticates := func(r *registryActor, s string, c []byte) bool {
		got, err := r.authenticate(s, c)
		return err == nil && got == s
	}
	r.registerAgent("s", a)
	first := cred(r, "s")
	require.True(t, authenticates(r, "s", first))
	r.registerAgent("s", a)
	require.Equal(t, first, cred(r, "s"), "registered already: the credential stays")

	r.unregisterAgent("s", a)
	require.False(t, authenticates(r, "s", first), "an unregistered instance's credential is revoked")
	r.registerAgent("s", a)
	second := cred(r, "s")
	require.NotEqual(t, first, second, "a registration after an unregistration has a fresh credential")
	require.False(t, authenticates(r, "s", first))
	require.True(t, authenticates(r, "s", second))

	r.registerAgent("t", actor.NewPID("nonhost", "owner-2"))
	require.False(t, authenticates(r, "t", second), "a session's credential is not another's")
	require.True(t, authenticates(r, "t", cred(r, "t")))

	other.registerAgent("s", a)
	require.NotEqual(t, cred(r, "s"), cred(other, "s"), "each registry has its own key")
	require.False(t, authenticates(other, "s", second))
	require.False(t, authenticates(r, "s", nil))
	require.False(t, authenticates(r, "s", make([]byte, 32)))
}

// Authenticating a wire request allocates nothing.
func TestAuthenticateAllocatesNothing(t *testing.T) {
	r := newRegistryActor(Config{}, nil)
	r.registerAgent("session-1", actor.NewPID("nonhost", "owner-1"))
	c := append([]byte(nil), r.creds.of("session-1", r.agents["session-1"].reg)...)
	allocs := testing.AllocsPerRun(100, func() {
		if s, err := r.authenticate("session-1", c); err != nil || s != "session-1" {
			t.Fatal("not authenticated")
		}
	})
	require.Zero(t, allocs)
}
