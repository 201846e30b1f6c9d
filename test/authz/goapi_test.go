package authz

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/troupetest"
)

// TestAuthzGoAPIMatrix: every registry.Client request kind × every forged Go-API
// identity — a new, never-registered incarnation of alice's session, a replaced
// (stale, still live) one, a disposed one, another session's agent, and no caller —
// is refused with its code (job/unauthenticated for an incarnation that is not its
// session's registered one; job/foreign for an authentic caller that is not alice),
// List hides alice's job, and the producer is called 0 times. A session string is
// no authority: there is no way to ask as "alice" without her registered agent.
func TestAuthzGoAPIMatrix(t *testing.T) {
	sys, _ := troupetest.Served(t)
	jobs := sys.Jobs()
	disposed := troupetest.Agent(t, sys, "alice")
	require.NoError(t, disposed.Dispose(t.Context()))
	stale, err := sys.NewAgent(nil, "alice")
	require.NoError(t, err)
	require.NoError(t, jobs.RegisterAgent(t.Context(), stale))
	alice, err := sys.NewAgent(nil, "alice")
	require.NoError(t, err)
	require.NoError(t, jobs.ReplaceAgent(t.Context(), stale, alice))
	unregistered, err := sys.NewAgent(nil, "alice")
	require.NoError(t, err)
	bob := troupetest.Agent(t, sys, "bob")

	p := newCounting()
	id, err := jobs.Start(t.Context(), p.spec(alice))
	require.NoError(t, err)

	type ident struct {
		name   string
		caller registry.Caller
		code   messages.Code
	}
	identities := []ident{
		{"unregistered incarnation of alice", registry.AsAgent(unregistered), messages.CodeUnauthenticated},
		{"replaced (stale) incarnation of alice", registry.AsAgent(stale), messages.CodeUnauthenticated},
		{"disposed incarnation of alice", registry.AsAgent(disposed), messages.CodeUnauthenticated},
		{"bob's agent", registry.AsAgent(bob), messages.CodeForeign},
		{"no caller", registry.NoCaller, messages.CodeForeign},
	}
	ctx := func() context.Context {
		c, cancel := context.WithTimeout(t.Context(), requestTimeout)
		t.Cleanup(cancel)
		return c
	}
	kinds := map[string]func(c registry.Caller) error{
		"Get": func(c registry.Caller) error { _, err := jobs.Get(ctx(), id, c); return err },
		"AwaitSettled": func(c registry.Caller) error {
			_, err := jobs.AwaitSettled(ctx(), id, c)
			return err
		},
		"Record": func(c registry.Caller) error { _, _, err := jobs.Record(ctx(), id, c); return err },
		"Read":   func(c registry.Caller) error { _, _, err := jobs.Read(ctx(), id, c); return err },
		"Kill": func(c registry.Caller) error {
			_, _, err := jobs.Kill(ctx(), id, c, registry.KillOptions{Reason: "forged"})
			return err
		},
		"Wait": func(c registry.Caller) error { _, err := jobs.Wait(ctx(), id, time.Millisecond, c); return err },
	}
	for _, w := range identities {
		for name, kind := range kinds {
			err := kind(w.caller)
			require.Error(t, err, "%s: %s was served", w.name, name)
			require.Equal(t, w.code, messages.CodeOf(err), "%s %s: %v", w.name, name, err)
		}
		// List and ListAsync: a forged incarnation is refused; an authentic stranger
		// is served its own view, without alice's job.
		snaps, err := jobs.List(ctx(), w.caller)
		res := <-jobs.ListAsync(w.caller)
		if w.code == messages.CodeUnauthenticated {
			require.Equal(t, w.code, messages.CodeOf(err), "%s List: %v", w.name, err)
			require.Equal(t, w.code, messages.CodeOf(res.Err), "%s ListAsync: %v", w.name, res.Err)
			continue
		}
		require.NoError(t, err)
		require.NoError(t, res.Err)
		for _, s := range append(snaps, res.Jobs...) {
			require.NotEqual(t, id, s.GetId(), "%s lists alice's job", w.name)
		}
	}
	troupetest.Barrier(t, sys)
	require.Zero(t, p.calls(), "the producer was called for a forged request")
	snap, err := jobs.Get(t.Context(), id, registry.AsAgent(alice))
	require.NoError(t, err)
	require.Equal(t, messages.JobStatus_JOB_STATUS_RUNNING, snap.GetStatus())

	// The control: alice's registered incarnation is served every kind.
	me := registry.AsAgent(alice)
	snaps, err := jobs.List(t.Context(), me)
	require.NoError(t, err)
	require.Len(t, snaps, 1)
	for _, name := range []string{"Get", "Record", "Read", "Wait", "Kill", "AwaitSettled"} {
		require.NoError(t, kinds[name](me), "%s as alice's registered incarnation", name)
	}
	require.Equal(t, int64(1), p.cancels.Load(), "the authenticated kill reached the producer")
	for _, a := range []*owner.Agent{stale, alice, unregistered} {
		require.NoError(t, a.Dispose(t.Context()))
	}
}
