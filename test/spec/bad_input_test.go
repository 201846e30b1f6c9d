package spec

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/troupetest"
)

// Bad input: every refusal is a coded error (errors.Is with the messages sentinels),
// registers nothing (nothing listed, no id consumed, no observer fired) and leaks
// nothing (no goroutine outlives the system, checked per test).

// noLeaks checks, after the system of this test has shut down, that no goroutine
// started during the test is left. Call it before troupetest.NewSystem/Served, so
// its cleanup runs after theirs.
func noLeaks(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

func TestBadInput_StartSpecIsRefused(t *testing.T) {
	noLeaks(t)
	sys, _ := troupetest.Served(t)
	changed := onChanged(t, sys, sys.Scope())
	zero, negative, tooBig, maxSafe := int64(0), int64(-1), int64(1<<53), int64(1<<53-1)
	cases := []struct {
		name string
		edit func(*job.Spec)
		msg  string
	}{
		{"empty kind", func(s *job.Spec) { s.Kind = "" }, "invalid job kind: expected a non-empty string"},
		{"empty kind and label: kind first", func(s *job.Spec) { s.Kind, s.Label = "", "" },
			"invalid job kind: expected a non-empty string"},
		{"empty label", func(s *job.Spec) { s.Label = "" }, "invalid job label: expected a non-empty string"},
		{"outputLimitBytes 0", func(s *job.Spec) { s.OutputLimitBytes = &zero },
			"invalid outputLimitBytes: expected a positive safe integer, got 0"},
		{"outputLimitBytes negative", func(s *job.Spec) { s.OutputLimitBytes = &negative },
			"invalid outputLimitBytes: expected a positive safe integer, got -1"},
		{"outputLimitBytes above 2^53-1", func(s *job.Spec) { s.OutputLimitBytes = &tooBig },
			"invalid outputLimitBytes: expected a positive safe integer, got 9007199254740992"},
		{"label checked before the limit", func(s *job.Spec) { s.Label, s.OutputLimitBytes = "", &zero },
			"invalid job label: expected a non-empty string"},
		{"nil Run", func(s *job.Spec) { s.Run = nil }, ""},
	}
	for _, tc := range cases {
		p := live()
		spec := p.Spec(nil)
		tc.edit(&spec)
		_, err := sys.Jobs().Start(context.Background(), spec)
		requireCode(t, err, messages.ErrInvalidSpec, tc.msg)
		require.Zero(t, p.Runs(), tc.name)
	}
	// An owned spec is refused the same way, before the owner is looked at.
	alice := troupetest.Agent(t, sys, "alice")
	spec := live().Spec(alice)
	spec.Kind = ""
	_, err := sys.Jobs().Start(context.Background(), spec)
	requireCode(t, err, messages.ErrInvalidSpec, "invalid job kind: expected a non-empty string")
	require.Zero(t, countLabel(alice.Scope(), registry.OwnerCleanupLabel))

	require.Empty(t, changed.Owners(), "a refused start fired onJobsChanged")
	requireNothingRegistered(t, sys, "bash-1", "alice")

	// The largest safe integer is a valid limit.
	spec = live().Spec(nil)
	spec.OutputLimitBytes = &maxSafe
	require.Equal(t, maxSafe, get(t, sys, start(t, sys, spec), "").GetOutputLimitBytes())
}

func TestBadInput_StartUnservedIsRefusedBeforeValidation(t *testing.T) {
	noLeaks(t)
	sys, _ := troupetest.NewSystem(t)
	p := live()
	spec := p.Spec(nil)
	spec.Kind = ""
	_, err := sys.Jobs().Start(context.Background(), spec)
	require.ErrorIs(t, err, messages.ErrNoController)
	require.Zero(t, p.Runs())
}

func TestBadInput_FailingRunRegistersNothing(t *testing.T) {
	noLeaks(t)
	sys, _ := troupetest.Served(t)
	changed := onChanged(t, sys, sys.Scope())
	alice := troupetest.Agent(t, sys, "alice")
	runErr := errors.New("spawn failed: no such file")
	var cancels []string
	cases := []struct {
		name     string
		run      func() (job.Hooks, error)
		sentinel error
		msg      string
	}{
		{"Run returns an error", func() (job.Hooks, error) { return job.Hooks{}, runErr },
			messages.ErrRunFailed, runErr.Error()},
		{"Run panics with a string", func() (job.Hooks, error) { panic("run boom") },
			messages.ErrRunFailed, "run boom"},
		{"Run panics with an error", func() (job.Hooks, error) { panic(runErr) },
			messages.ErrRunFailed, runErr.Error()},
		{"Run panics with a value", func() (job.Hooks, error) { panic(42) },
			messages.ErrRunFailed, "42"},
		{"Run returns nil Done", func() (job.Hooks, error) {
			return job.Hooks{Cancel: func(r string) error { cancels = append(cancels, r); return nil }}, nil
		}, messages.ErrInvalidSpec, ""},
		{"Run returns nil Cancel", func() (job.Hooks, error) {
			return job.Hooks{Done: make(chan job.Outcome)}, nil
		}, messages.ErrInvalidSpec, "invalid job hooks: Cancel is nil (a producer must return Cancel and Done)"},
		{"Run returns both Done and OnSettle", func() (job.Hooks, error) {
			var s job.Settler
			return job.Hooks{Cancel: func(r string) error { cancels = append(cancels, r); return nil },
				Done: make(chan job.Outcome), OnSettle: s.OnSettle}, nil
		}, messages.ErrInvalidSpec, "invalid job hooks: both Done and OnSettle are set (a producer settles through one of them)"},
	}
	for _, tc := range cases {
		for _, owned := range []bool{false, true} {
			spec := job.Spec{Kind: "bash", Label: "doomed", Run: tc.run}
			if owned {
				spec.Owner = alice
			}
			_, err := sys.Jobs().Start(context.Background(), spec)
			requireCode(t, err, tc.sentinel, tc.msg)
			if tc.name == "Run returns an error" || tc.name == "Run panics with an error" {
				require.ErrorIs(t, err, runErr, "the producer's error is the cause")
			}
		}
	}
	// A producer whose hooks were refused was told to release what it started.
	require.Len(t, cancels, 4)
	require.Empty(t, changed.Owners(), "a refused start fired onJobsChanged")
	requireNothingRegistered(t, sys, "bash-1", "alice")
	// alice's bucket is untouched: she can still start her full quota.
	for range troupe.DefaultMaxConcurrentJobsPerOwner {
		start(t, sys, live().Spec(alice))
	}
}

func TestBadInput_UnknownIDs(t *testing.T) {
	noLeaks(t)
	sys, _ := troupetest.Served(t)
	troupetest.Agent(t, sys, "alice")
	// One real job, so "unknown" is not just "empty".
	start(t, sys, live().Spec(nil))
	for _, id := range []string{"bash-99", "bash-0", "", "bash", "subagent-1", "bash-1 "} {
		for _, caller := range []string{"", "alice"} {
			want := "unknown job " + id
			_, err := sys.Jobs().Get(context.Background(), id, asSession(caller))
			requireCode(t, err, messages.ErrNotFound, want)
			_, _, err = sys.Jobs().Read(context.Background(), id, asSession(caller))
			requireCode(t, err, messages.ErrNotFound, want)
			_, _, err = sys.Jobs().Kill(context.Background(), id, asSession(caller), registry.KillOptions{Reason: "x"})
			requireCode(t, err, messages.ErrNotFound, want)
			_, err = sys.Jobs().Wait(ctx(t), id, time.Second, asSession(caller))
			requireCode(t, err, messages.ErrNotFound, want)
			// The unknown-id check runs before the timeout check.
			_, err = sys.Jobs().Wait(ctx(t), id, 0, asSession(caller))
			requireCode(t, err, messages.ErrNotFound, want)
			_, err = sys.Jobs().AwaitSettled(ctx(t), id, asSession(caller))
			requireCode(t, err, messages.ErrNotFound, want)
		}
	}
	require.Equal(t, []string{"bash-1"}, list(t, sys, ""))
}

func TestBadInput_ForeignSessions(t *testing.T) {
	noLeaks(t)
	sys, _ := troupetest.Served(t)
	alice := troupetest.Agent(t, sys, "alice")
	troupetest.Agent(t, sys, "bob")
	p := live()
	id := start(t, sys, p.Spec(alice))
	want := "job " + id + " belongs to another session"
	for _, caller := range []string{"bob", "", "Alice", "alice "} {
		_, err := sys.Jobs().Get(context.Background(), id, asSession(caller))
		requireCode(t, err, messages.ErrForeign, want)
		_, _, err = sys.Jobs().Read(context.Background(), id, asSession(caller))
		requireCode(t, err, messages.ErrForeign, want)
		_, _, err = sys.Jobs().Kill(context.Background(), id, asSession(caller), registry.KillOptions{})
		requireCode(t, err, messages.ErrForeign, want)
		_, _, err = sys.Jobs().Kill(context.Background(), id, asSession(caller), registry.KillOptions{Reason: "cancelled by the user", NoClaim: true})
		requireCode(t, err, messages.ErrForeign, want)
		_, err = sys.Jobs().Wait(ctx(t), id, time.Second, asSession(caller))
		requireCode(t, err, messages.ErrForeign, want)
		// The access check runs before the timeout check.
		_, err = sys.Jobs().Wait(ctx(t), id, -time.Second, asSession(caller))
		requireCode(t, err, messages.ErrForeign, want)
		_, err = sys.Jobs().AwaitSettled(ctx(t), id, asSession(caller))
		requireCode(t, err, messages.ErrForeign, want)
		require.Empty(t, list(t, sys, caller))
	}
	require.Empty(t, p.Cancels())
	require.Equal(t, snapView{"running", false}, view(get(t, sys, id, "alice")))
	// The fence holds after settlement too.
	p.Settle(job.Outcome{Status: job.Completed, Output: "secret"})
	troupetest.Settled(t, sys, id, registry.AsAgent(alice))
	_, _, err := sys.Jobs().Read(context.Background(), id, asSession("bob"))
	requireCode(t, err, messages.ErrForeign, want)
	_, err = sys.Jobs().Wait(ctx(t), id, time.Second, asSession("bob"))
	requireCode(t, err, messages.ErrForeign, want)
	require.False(t, get(t, sys, id, "alice").Reported, "a refused call claimed the report")
}

func TestBadInput_DeadOwners(t *testing.T) {
	notLive := func(session string) string {
		return `agent "` + session + `" is not the registered agent instance (background job owner must be live)`
	}
	t.Run("unregistered", func(t *testing.T) {
		noLeaks(t)
		sys, _ := troupetest.Served(t)
		alice := troupetest.Agent(t, sys, "alice")
		require.NoError(t, sys.Jobs().UnregisterAgent(context.Background(), alice))
		p := live()
		_, err := sys.Jobs().Start(context.Background(), p.Spec(alice))
		requireCode(t, err, messages.ErrOwnerNotLive, notLive("alice"))
		require.Zero(t, p.Runs())
		require.Zero(t, countLabel(alice.Scope(), registry.OwnerCleanupLabel))
		requireNothingRegistered(t, sys, "bash-1", "alice")
	})
	t.Run("replaced by a same-session incarnation", func(t *testing.T) {
		noLeaks(t)
		sys, _ := troupetest.Served(t)
		stale := troupetest.Agent(t, sys, "alice")
		fresh := troupetest.Agent(t, sys, "alice")
		p := live()
		_, err := sys.Jobs().Start(context.Background(), p.Spec(stale))
		requireCode(t, err, messages.ErrOwnerNotLive, notLive("alice"))
		require.Zero(t, p.Runs())
		require.Zero(t, countLabel(stale.Scope(), registry.OwnerCleanupLabel))
		// The stale instance unregistering itself does not unregister the fresh one.
		require.NoError(t, sys.Jobs().UnregisterAgent(context.Background(), stale))
		requireNothingRegistered(t, sys, "bash-1", "alice")
		require.Equal(t, "bash-2", start(t, sys, live().Spec(fresh)))
	})
	t.Run("disposed", func(t *testing.T) {
		noLeaks(t)
		sys, _ := troupetest.Served(t)
		alice := troupetest.Agent(t, sys, "alice")
		old := live()
		start(t, sys, old.Spec(alice))
		require.NoError(t, alice.Dispose(ctx(t)))
		require.Equal(t, []string{"owner disposed"}, old.Cancels())
		p := live()
		_, err := sys.Jobs().Start(context.Background(), p.Spec(alice))
		requireCode(t, err, messages.ErrOwnerNotLive, notLive("alice"))
		require.Zero(t, p.Runs())
		// A torn-down incarnation cannot come back.
		require.ErrorIs(t, sys.Jobs().RegisterAgent(context.Background(), alice), messages.ErrOwnerNotLive)
		_, err = sys.Jobs().Start(context.Background(), p.Spec(alice))
		require.ErrorIs(t, err, messages.ErrOwnerNotLive)
		requireNothingRegistered(t, sys, "bash-2", "alice")
	})
	t.Run("owner actor stopped", func(t *testing.T) {
		// Rule 26: teardown also runs when the owner actor stops for any reason.
		noLeaks(t)
		sys, _ := troupetest.Served(t)
		alice := troupetest.Agent(t, sys, "alice")
		old := live()
		id := start(t, sys, old.Spec(alice))
		require.NoError(t, sys.Actors().Root.StopFuture(alice.PID()).Wait())
		require.Equal(t, "owner disposed", old.NextCancel(t))
		p := live()
		_, err := sys.Jobs().Start(context.Background(), p.Spec(alice))
		requireCode(t, err, messages.ErrOwnerNotLive, notLive("alice"))
		require.Zero(t, p.Runs())
		require.ErrorIs(t, sys.Jobs().RegisterAgent(context.Background(), alice), messages.ErrOwnerNotLive)
		_, err = sys.Jobs().Start(context.Background(), p.Spec(alice))
		require.ErrorIs(t, err, messages.ErrOwnerNotLive)
		// Disposing its scope afterwards is harmless, and returns once the stopped
		// incarnation's records are removed.
		require.NoError(t, alice.Dispose(ctx(t)))
		_, err = sys.Jobs().Get(context.Background(), id, asSession("alice"))
		requireCode(t, err, messages.ErrNotFound, "unknown job "+id)
		requireNothingRegistered(t, sys, "bash-2", "alice")
	})
}

func TestBadInput_WaitTimeouts(t *testing.T) {
	noLeaks(t)
	sys, _ := troupetest.Served(t)
	p := live()
	id := start(t, sys, p.Spec(nil))
	for _, d := range []time.Duration{0, -1, -time.Millisecond, -time.Hour} {
		_, err := sys.Jobs().Wait(ctx(t), id, d, registry.NoCaller)
		require.ErrorIs(t, err, messages.ErrInvalidWaitTimeout)
	}
	// The timeout is validated before the terminal check (§2.8 step 2).
	p.Settle(job.Outcome{Status: job.Completed})
	troupetest.Settled(t, sys, id, registry.NoCaller)
	_, err := sys.Jobs().Wait(ctx(t), id, 0, registry.NoCaller)
	requireCode(t, err, messages.ErrInvalidWaitTimeout,
		"invalid wait timeout: expected a positive number of milliseconds, got 0")
	require.False(t, get(t, sys, id, "").Reported, "a refused wait claimed the report")
}

func TestBadInput_Config(t *testing.T) {
	for _, v := range []int64{0, -1, 1 << 53} {
		c := troupe.DefaultConfig()
		c.MaxConcurrentJobsPerOwner = &v
		require.ErrorIs(t, c.Validate(), messages.ErrInvalidConfig)
		sys, err := troupe.New(c)
		require.ErrorIs(t, err, messages.ErrInvalidConfig)
		require.Nil(t, sys)
	}
	noLeaks(t)
	maxSafe := int64(1<<53 - 1)
	sys, _ := troupetest.Served(t, func(c *troupe.Config) { c.MaxConcurrentJobsPerOwner = &maxSafe })
	start(t, sys, live().Spec(nil))
}

func TestBadInput_CallsAfterDisposalAndShutdown(t *testing.T) {
	noLeaks(t)
	sys, _ := troupetest.Served(t)
	p := live()
	id := start(t, sys, p.Spec(nil))
	require.NoError(t, sys.Jobs().Dispose(ctx(t)))
	require.NoError(t, sys.Jobs().Dispose(ctx(t)), "disposal is idempotent")

	q := live()
	_, err := sys.Jobs().Start(context.Background(), q.Spec(nil))
	require.ErrorIs(t, err, messages.ErrDisposed)
	require.Zero(t, q.Runs())
	_, err = sys.Jobs().List(context.Background(), registry.NoCaller)
	require.ErrorIs(t, err, messages.ErrDisposed)
	_, err = sys.Jobs().Get(context.Background(), id, registry.NoCaller)
	require.ErrorIs(t, err, messages.ErrDisposed)
	_, _, err = sys.Jobs().Read(context.Background(), id, registry.NoCaller)
	require.ErrorIs(t, err, messages.ErrDisposed)
	_, _, err = sys.Jobs().Kill(context.Background(), id, registry.NoCaller, registry.KillOptions{})
	require.ErrorIs(t, err, messages.ErrDisposed)
	_, err = sys.Jobs().Wait(ctx(t), id, time.Second, registry.NoCaller)
	require.ErrorIs(t, err, messages.ErrDisposed)
	require.Equal(t, []string{"jobs service disposed"}, p.Cancels())

	require.NoError(t, sys.Shutdown(ctx(t)))
	_, err = sys.Jobs().Start(context.Background(), q.Spec(nil))
	require.ErrorIs(t, err, messages.ErrStopped)
	_, err = sys.Jobs().List(context.Background(), registry.NoCaller)
	require.ErrorIs(t, err, messages.ErrStopped)
	_, err = sys.Jobs().Wait(ctx(t), id, time.Second, registry.NoCaller)
	require.ErrorIs(t, err, messages.ErrStopped)
	_, err = sys.NewAgent(nil, "late")
	require.Error(t, err)
	require.Zero(t, q.Runs())
}
