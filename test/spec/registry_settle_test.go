package spec

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/troupetest"
)

// SPEC §2.9 settlement, §2.10 observers, §2.12 snapshots.

func TestSpec038_DoneClosedWithoutOutcomeSettlesFailed(t *testing.T) {
	cases := []struct {
		name    string
		settle  func(*troupetest.Producer)
		problem string
		prefix  bool // only the problem's prefix is pinned
	}{
		{"closed", func(p *troupetest.Producer) { p.CloseDone() },
			"producer done channel closed without an outcome", false},
		{"unknown status", func(p *troupetest.Producer) { p.Settle(job.Outcome{Status: job.Running, Output: "ignored"}) },
			`producer outcome has unknown status "running"`, false},
		// The zero Status has no SPEC name; only the rule's prefix is pinned for it.
		{"zero outcome", func(p *troupetest.Producer) { p.Settle(job.Outcome{}) },
			`producer outcome has unknown status "`, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sys, logs := troupetest.Served(t)
			p := troupetest.NewProducer()
			p.Channel = tc.name == "closed" // the other cases go through OnSettle
			id := start(t, sys, p.Spec(nil))
			tc.settle(p)
			snap := troupetest.Settled(t, sys, id, registry.NoCaller)
			require.Equal(t, job.Failed, snap.Status)
			require.NotNil(t, snap.Detail)
			require.True(t, strings.HasPrefix(*snap.Detail, "Error: "+tc.problem), *snap.Detail)
			require.NotNil(t, snap.FinishedAt)
			require.True(t, logs.Contains("producer contract violation"))
			warning := "jobs: job " + id + " producer done promise rejected (producer contract violation): " + (*snap.Detail)[len("Error: "):]
			require.Contains(t, logs.Lines(), warning)
			if !tc.prefix {
				require.Equal(t, "Error: "+tc.problem, *snap.Detail)
			}
			text, _, err := sys.Jobs().Read(context.Background(), id, registry.NoCaller)
			require.NoError(t, err)
			require.Equal(t, "", text, "a rejected outcome carries no output")
		})
	}
}

// throwingDoneListenerCase is cases 39 and 40: rule 13 makes a "rejecting" listener a
// throwing one, so both check that a panicking onJobDone listener is contained.
func throwingDoneListenerCase(t *testing.T, panicValue any, message string) {
	sys, logs := troupetest.Served(t)
	_, err := sys.Jobs().OnJobDone(context.Background(), sys.Scope(), func(*messages.JobSnapshot, registry.Owner) { panic(panicValue) })
	require.NoError(t, err)
	second := onDone(t, sys, sys.Scope())
	p := troupetest.NewProducer()
	id := start(t, sys, p.Spec(nil))
	p.Settle(job.Outcome{Status: job.Completed})
	troupetest.Settled(t, sys, id, registry.NoCaller)
	got := second.Snaps()
	require.Len(t, got, 1)
	require.Equal(t, snapView{"completed", false}, view(got[0]))
	require.True(t, logs.Contains(message))
	require.Contains(t, logs.Lines(), "jobs: onJobDone listener threw for "+id+": "+message)
	// The commit stands: the settled row is there for everyone.
	require.Equal(t, snapView{"completed", false}, view(get(t, sys, id, "")))
}

func TestSpec039_ThrowingDoneListenerIsContained(t *testing.T) {
	throwingDoneListenerCase(t, "listener boom", "listener boom")
}

func TestSpec040_RejectingDoneListenerIsContained(t *testing.T) {
	throwingDoneListenerCase(t, errors.New("async listener boom"), "async listener boom")
}

func TestSpec041_DisposedListenersAreNotCalled(t *testing.T) {
	sys, _ := troupetest.Served(t)
	c := ctx(t)
	control := onDone(t, sys, sys.Scope())
	alice := troupetest.Agent(t, sys, "alice")
	p1, p2 := troupetest.NewProducer(), live()
	first := start(t, sys, p1.Spec(alice))
	second := start(t, sys, p2.Spec(alice))

	// A listener registered by a fiber: alice's own scope, after her jobs started, so
	// its effect is newer than her jobs.ownerCleanup() and goes first on disposal.
	fiber := onDone(t, sys, alice.Scope())
	// A listener detached through its disposer (twice: idempotent).
	detached := &doneRec{}
	eff, err := sys.Jobs().OnJobDone(context.Background(), sys.Scope(), detached.fn)
	require.NoError(t, err)
	require.NoError(t, eff.Run(c))
	require.NoError(t, eff.Run(c))

	// While its fiber lives, the fiber's listener sees alice's settlements.
	p1.Settle(job.Outcome{Status: job.Completed})
	troupetest.Settled(t, sys, first, registry.AsAgent(alice))
	require.Len(t, fiber.Snaps(), 1)

	// The fiber is disposed; alice's second job settles in that teardown, and an
	// unowned job settles afterwards.
	require.NoError(t, alice.Dispose(c))
	pu := troupetest.NewProducer()
	unowned := start(t, sys, pu.Spec(nil))
	pu.Settle(job.Outcome{Status: job.Completed})
	troupetest.Settled(t, sys, unowned, registry.NoCaller)

	var ids []string
	for _, s := range control.Snaps() {
		ids = append(ids, s.Id)
	}
	require.Equal(t, []string{first, second, unowned}, ids)
	require.Len(t, fiber.Snaps(), 1, "the disposed fiber's listener was called again")
	require.Empty(t, detached.Snaps())
}

func TestSpec042_ChangedBeforeDone(t *testing.T) {
	sys, _ := troupetest.Served(t)
	alice := troupetest.Agent(t, sys, "alice")
	p := troupetest.NewProducer()
	id := start(t, sys, p.Spec(alice))
	var mu sync.Mutex
	var order []string
	record := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, s)
	}
	// Registered in the opposite order, so registration order cannot explain the result.
	_, err := sys.Jobs().OnJobDone(context.Background(), sys.Scope(), func(*messages.JobSnapshot, registry.Owner) { record("done") })
	require.NoError(t, err)
	_, err = sys.Jobs().OnJobsChanged(context.Background(), sys.Scope(), func(registry.Owner) { record("changed") })
	require.NoError(t, err)
	p.Settle(job.Outcome{Status: job.Completed})
	troupetest.Settled(t, sys, id, registry.AsAgent(alice))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"changed", "done"}, order)
}

func TestSpec044_UnownedStartChangesUndefined(t *testing.T) {
	sys, _ := troupetest.Served(t)
	changed := onChanged(t, sys, sys.Scope())
	start(t, sys, live().Spec(nil))
	require.Equal(t, []string{"undefined"}, changed.Owners())
}

func TestSpec046_ThrowingChangedListenerIsContained(t *testing.T) {
	sys, logs := troupetest.Served(t)
	_, err := sys.Jobs().OnJobsChanged(context.Background(), sys.Scope(), func(registry.Owner) { panic("changed boom") })
	require.NoError(t, err)
	changed := onChanged(t, sys, sys.Scope())
	require.Equal(t, "bash-1", start(t, sys, live().Spec(nil)))
	require.Equal(t, []string{"undefined"}, changed.Owners())
	require.True(t, logs.Contains("onJobsChanged listener threw"))
	require.Contains(t, logs.Lines(), "jobs: onJobsChanged listener threw: changed boom")
	require.Equal(t, []string{"bash-1"}, list(t, sys, ""))
}

func TestSpec058_SnapshotOptionalFields(t *testing.T) {
	sys, _ := troupetest.Served(t)
	p := troupetest.NewProducer()
	id := start(t, sys, p.Spec(nil))
	snap := get(t, sys, id, "")
	require.Nil(t, snap.OutputLimitBytes)
	require.Nil(t, snap.OwnerSession)
	require.Nil(t, snap.Detail)
	require.Nil(t, snap.FinishedAt)
	require.False(t, snap.Reported)
	require.Equal(t, job.Running, snap.Status)
	require.Equal(t, "bash", snap.Kind)
	require.Equal(t, p.Label, snap.Label)
	require.Positive(t, snap.StartedAt)

	p.Settle(job.Outcome{Status: job.Completed, Detail: "x"})
	snap = troupetest.Settled(t, sys, id, registry.NoCaller)
	require.NotNil(t, snap.Detail)
	require.Equal(t, "x", *snap.Detail)
	require.NotNil(t, snap.FinishedAt)
	require.GreaterOrEqual(t, *snap.FinishedAt, snap.StartedAt)
	require.Nil(t, snap.OutputLimitBytes)
	require.Nil(t, snap.OwnerSession)

	// The keys appear when set: an owned job with a limit.
	alice := troupetest.Agent(t, sys, "alice")
	limit := int64(4096)
	spec := live().Spec(alice)
	spec.OutputLimitBytes = &limit
	snap = get(t, sys, start(t, sys, spec), "alice")
	require.NotNil(t, snap.OutputLimitBytes)
	require.Equal(t, limit, *snap.OutputLimitBytes)
	require.NotNil(t, snap.OwnerSession)
	require.Equal(t, "alice", *snap.OwnerSession)
	require.Nil(t, snap.Detail)
	require.Nil(t, snap.FinishedAt)
}

func TestSpec059_KillReasonMergesIntoKilledDetail(t *testing.T) {
	cases := []struct {
		name    string
		outcome job.Outcome
		detail  *string
	}{
		{"producer detail", job.Outcome{Status: job.Killed, Detail: "signal: SIGTERM"}, ptr("signal: SIGTERM; cancelled by the user")},
		{"no producer detail", job.Outcome{Status: job.Killed}, ptr("cancelled by the user")},
		// Rev B outran-kill: a job that settles completed or failed keeps only its own detail.
		{"outran completed", job.Outcome{Status: job.Completed, Detail: "exit code: 0"}, ptr("exit code: 0")},
		{"outran failed", job.Outcome{Status: job.Failed}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sys, _ := troupetest.Served(t)
			p := troupetest.NewProducer()
			id := start(t, sys, p.Spec(nil))
			res, _, err := sys.Jobs().Kill(context.Background(), id, registry.NoCaller, registry.KillOptions{Reason: "cancelled by the user", NoClaim: true})
			require.NoError(t, err)
			require.Equal(t, "requested", res.Name())
			require.Equal(t, "cancelled by the user", p.NextCancel(t))
			p.Settle(tc.outcome)
			snap := troupetest.Settled(t, sys, id, registry.NoCaller)
			require.Equal(t, tc.outcome.Status, snap.Status)
			require.Equal(t, tc.detail, snap.Detail)
		})
	}
}

func ptr[T any](v T) *T { return &v }
