package spec

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/troupetest"
)

// SPEC §2.5 fence and listing, §2.6 read, §2.7 kill.

func TestSpec016_StreamReadConsumesCursor(t *testing.T) {
	sys, _ := troupetest.Served(t)
	p := troupetest.NewProducer()
	p.Stream = true
	p.Emit("first", "", "rest")
	id := start(t, sys, p.Spec(nil))
	text, snap, err := sys.Jobs().Read(context.Background(), id, registry.NoCaller)
	require.NoError(t, err)
	require.Equal(t, "first", text)
	require.Equal(t, snapView{"running", false}, view(snap))
	text, _, err = sys.Jobs().Read(context.Background(), id, registry.NoCaller)
	require.NoError(t, err)
	require.Equal(t, "", text)
	p.Settle(job.Outcome{Status: job.Completed, Detail: "exit code: 0"})
	troupetest.Settled(t, sys, id, registry.NoCaller)
	text, snap, err = sys.Jobs().Read(context.Background(), id, registry.NoCaller)
	require.NoError(t, err)
	require.Equal(t, "rest", text)
	require.Equal(t, job.Completed, snap.Status)
	require.Equal(t, "exit code: 0", snap.GetDetail())
	require.True(t, snap.Reported)
	require.NotNil(t, snap.FinishedAt)
	require.GreaterOrEqual(t, *snap.FinishedAt, snap.StartedAt)
}

func TestSpec017_FinalOutputReadIsIdempotent(t *testing.T) {
	sys, _ := troupetest.Served(t)
	p := troupetest.NewProducer()
	id := start(t, sys, p.Spec(nil))
	text, snap, err := sys.Jobs().Read(context.Background(), id, registry.NoCaller)
	require.NoError(t, err)
	require.Equal(t, "", text)
	require.Equal(t, snapView{"running", false}, view(snap))
	p.Settle(job.Outcome{Status: job.Completed, Output: "final answer"})
	troupetest.Settled(t, sys, id, registry.NoCaller)
	for range 2 {
		text, snap, err = sys.Jobs().Read(context.Background(), id, registry.NoCaller)
		require.NoError(t, err)
		require.Equal(t, "final answer", text)
		require.Equal(t, snapView{"completed", true}, view(snap))
	}
}

func TestSpec018_FailedFinalOutputReadsEmpty(t *testing.T) {
	sys, _ := troupetest.Served(t)
	p := troupetest.NewProducer()
	id := start(t, sys, p.Spec(nil))
	p.Settle(job.Outcome{Status: job.Failed, Detail: "max-tokens"})
	troupetest.Settled(t, sys, id, registry.NoCaller)
	text, snap, err := sys.Jobs().Read(context.Background(), id, registry.NoCaller)
	require.NoError(t, err)
	require.Equal(t, "", text)
	require.Equal(t, job.Failed, snap.Status)
	require.NotNil(t, snap.Detail)
	require.Equal(t, "max-tokens", *snap.Detail)
}

func TestSpec019_UnknownJobRead(t *testing.T) {
	sys, _ := troupetest.Served(t)
	_, _, err := sys.Jobs().Read(context.Background(), "bash-99", registry.NoCaller)
	requireCode(t, err, messages.ErrNotFound, "unknown job bash-99")
}

func TestSpec020_OwnerFenceBySession(t *testing.T) {
	sys, _ := troupetest.Served(t)
	ownerAgent := troupetest.Agent(t, sys, "owner")
	troupetest.Agent(t, sys, "other")
	po := live()
	owned := start(t, sys, po.Spec(ownerAgent))
	pu := live()
	pu.Stream = true
	pu.Emit("open to all")
	unowned := start(t, sys, pu.Spec(nil))
	foreign := "job " + owned + " belongs to another session"

	_, _, err := sys.Jobs().Read(context.Background(), owned, asSession("other"))
	requireCode(t, err, messages.ErrForeign, foreign)
	_, _, err = sys.Jobs().Kill(context.Background(), owned, asSession("other"), registry.KillOptions{})
	requireCode(t, err, messages.ErrForeign, foreign)
	_, err = sys.Jobs().Wait(ctx(t), owned, 5*time.Second, asSession("other"))
	requireCode(t, err, messages.ErrForeign, foreign)
	_, _, err = sys.Jobs().Read(context.Background(), owned, registry.NoCaller)
	requireCode(t, err, messages.ErrForeign, foreign)
	_, err = sys.Jobs().Get(context.Background(), owned, registry.NoCaller)
	requireCode(t, err, messages.ErrForeign, foreign)

	// None of the refused calls touched the job.
	require.Empty(t, po.Cancels())
	require.Equal(t, snapView{"running", false}, view(get(t, sys, owned, "owner")))

	text, snap, err := sys.Jobs().Read(context.Background(), unowned, asSession("other"))
	require.NoError(t, err)
	require.Equal(t, "open to all", text)
	require.Equal(t, unowned, snap.Id)
}

func TestSpec021_ListBySession(t *testing.T) {
	sys, _ := troupetest.Served(t)
	alice := troupetest.Agent(t, sys, "alice")
	bob := troupetest.Agent(t, sys, "bob")
	a := start(t, sys, live().Spec(alice))
	b := start(t, sys, live().Spec(bob))
	u := start(t, sys, live().Spec(nil))
	require.Equal(t, []string{a, u}, list(t, sys, "alice"))
	require.Equal(t, []string{b, u}, list(t, sys, "bob"))
	require.Equal(t, []string{u}, list(t, sys, ""))
}

func TestSpec023_KillWithReasonClaims(t *testing.T) {
	sys, _ := troupetest.Served(t)
	done := onDone(t, sys, sys.Scope())
	p := troupetest.NewProducer() // settles only when told to
	id := start(t, sys, p.Spec(nil))
	res, snap, err := sys.Jobs().Kill(context.Background(), id, registry.NoCaller, registry.KillOptions{Reason: "no longer needed"})
	require.NoError(t, err)
	require.Equal(t, "requested", res.Name())
	require.Equal(t, snapView{"stopping", true}, view(snap))
	require.Equal(t, []string{"no longer needed"}, p.Cancels())
	snaps, err := sys.Jobs().List(context.Background(), registry.NoCaller)
	require.NoError(t, err)
	require.Len(t, snaps, 1)
	require.Equal(t, snapView{"stopping", true}, view(snaps[0]))
	require.Empty(t, done.Snaps())

	p.Settle(job.Outcome{Status: job.Killed})
	troupetest.Settled(t, sys, id, registry.NoCaller)
	got := done.Snaps()
	require.Len(t, got, 1)
	require.Equal(t, snapView{"killed", true}, view(got[0]))
}

func TestSpec024_KillOfFinishedJobDoesNotCancel(t *testing.T) {
	sys, _ := troupetest.Served(t)
	p := troupetest.NewProducer()
	id := start(t, sys, p.Spec(nil))
	p.Settle(job.Outcome{Status: job.Completed})
	require.False(t, troupetest.Settled(t, sys, id, registry.NoCaller).Reported)

	// A human kill (no claim) of a terminal job changes nothing (rule 4) ...
	res, snap, err := sys.Jobs().Kill(context.Background(), id, registry.NoCaller, registry.KillOptions{Reason: "cancelled by the user", NoClaim: true})
	require.NoError(t, err)
	require.Equal(t, "already-finished", res.Name())
	require.Equal(t, snapView{"completed", false}, view(snap))
	// ... a model kill claims the report.
	res, snap, err = sys.Jobs().Kill(context.Background(), id, registry.NoCaller, registry.KillOptions{})
	require.NoError(t, err)
	require.Equal(t, "already-finished", res.Name())
	require.Equal(t, snapView{"completed", true}, view(snap))
	require.Empty(t, p.Cancels())
}

func TestSpec025_FailedCancelChangesNothing(t *testing.T) {
	t.Run("error", func(t *testing.T) {
		sys, _ := troupetest.Served(t)
		done := onDone(t, sys, sys.Scope())
		p := troupetest.NewProducer()
		p.CancelErr = errors.New("cancel boom")
		id := start(t, sys, p.Spec(nil))
		_, _, err := sys.Jobs().Kill(context.Background(), id, registry.NoCaller, registry.KillOptions{Reason: "superseded"})
		requireCode(t, err, messages.ErrCancelFailed, "cancel boom")
		require.ErrorIs(t, err, p.CancelErr)
		require.Equal(t, snapView{"running", false}, view(get(t, sys, id, "")))

		p.Settle(job.Outcome{Status: job.Completed})
		troupetest.Settled(t, sys, id, registry.NoCaller)
		got := done.Snaps()
		require.Len(t, got, 1)
		require.Equal(t, snapView{"completed", false}, view(got[0]))
		// The failed kill's reason was not recorded either.
		require.Nil(t, got[0].Detail)
		res, _, err := sys.Jobs().Kill(context.Background(), id, registry.NoCaller, registry.KillOptions{})
		require.NoError(t, err)
		require.Equal(t, "already-finished", res.Name())
		require.Equal(t, []string{"superseded"}, p.Cancels())
	})
	t.Run("panic", func(t *testing.T) {
		// Rule 13: a panicking Cancel is a failed cancel, its message fmt.Sprint(v).
		sys, _ := troupetest.Served(t)
		done := make(chan job.Outcome, 1)
		id := start(t, sys, job.Spec{Kind: "bash", Label: "panicky", Run: func() (job.Hooks, error) {
			return job.Hooks{Done: done, Cancel: func(string) error { panic("cancel boom") }}, nil
		}})
		_, _, err := sys.Jobs().Kill(context.Background(), id, registry.NoCaller, registry.KillOptions{})
		requireCode(t, err, messages.ErrCancelFailed, "cancel boom")
		require.Equal(t, snapView{"running", false}, view(get(t, sys, id, "")))
		done <- job.Outcome{Status: job.Killed}
		// Unclaimed: the failed kill did not claim, so the settlement is unreported.
		require.Equal(t, snapView{"killed", false}, view(troupetest.Settled(t, sys, id, registry.NoCaller)))
	})
}
