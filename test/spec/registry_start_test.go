package spec

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/troupetest"
)

// SPEC §2.2 start preflight, §2.3 ids, §2.4 admission, §2.10 the controller gate.

func TestSpec001_NoControllerRefusesStart(t *testing.T) {
	sys, _ := troupetest.NewSystem(t)
	p := troupetest.NewProducer()
	_, err := sys.Jobs().Start(context.Background(), p.Spec(nil))
	require.ErrorIs(t, err, messages.ErrNoController)
	requireHinted(t, err, prefixNoController)
	require.Zero(t, p.Runs())
	require.Empty(t, list(t, sys, ""))

	// Rev A: the gate is the first check, before the owner checks (no agent
	// registry is mounted here either).
	ghost, err := sys.NewAgent(nil, "ghost")
	require.NoError(t, err)
	_, err = sys.Jobs().Start(context.Background(), p.Spec(ghost))
	require.ErrorIs(t, err, messages.ErrNoController)
	require.Zero(t, p.Runs())
	require.Empty(t, list(t, sys, "ghost"))
}

func TestSpec002_ScopedControllerServesOnlyItsScope(t *testing.T) {
	sys, _ := troupetest.NewSystem(t)
	_, err := sys.Jobs().MountAgents(context.Background(), sys.Scope())
	require.NoError(t, err)
	x := childScope(t, sys.Scope(), "X")
	y := childScope(t, sys.Scope(), "Y")
	_, err = sys.Jobs().AttachController(context.Background(), x, "tool-jobs")
	require.NoError(t, err)
	underX := agentUnder(t, sys, x, "alice")
	underY := agentUnder(t, sys, y, "bob")

	require.Equal(t, "bash-1", start(t, sys, live().Spec(underX)))

	// A controller serves the whole subtree below its scope.
	deep := agentUnder(t, sys, childScope(t, x, "preset"), "carol")
	require.Equal(t, "bash-2", start(t, sys, live().Spec(deep)))

	py, pu := live(), live()
	for name, spec := range map[string]job.Spec{"sibling scope": py.Spec(underY), "unowned": pu.Spec(nil)} {
		_, err := sys.Jobs().Start(context.Background(), spec)
		require.ErrorIs(t, err, messages.ErrNoController, name)
		requireHinted(t, err, prefixNoController)
	}
	require.Zero(t, py.Runs())
	require.Zero(t, pu.Runs())
	require.Equal(t, []string{"bash-1"}, list(t, sys, "alice"))
	require.Empty(t, list(t, sys, "bob"))
	require.Empty(t, list(t, sys, ""))
}

func TestSpec003_GlobalControllerServesEveryone(t *testing.T) {
	sys, _ := troupetest.Served(t)
	x := childScope(t, sys.Scope(), "X")
	a := agentUnder(t, sys, x, "alice")
	b := agentUnder(t, sys, childScope(t, x, "deeper"), "bob")
	require.Equal(t, "bash-1", start(t, sys, live().Spec(a)))
	require.Equal(t, "bash-2", start(t, sys, live().Spec(b)))
	require.Equal(t, "bash-3", start(t, sys, live().Spec(nil)))
}

func TestSpec004_GateRearmsWhenLastControllerDetaches(t *testing.T) {
	sys, _ := troupetest.NewSystem(t)
	c := ctx(t)
	_, err := sys.Jobs().MountAgents(context.Background(), sys.Scope())
	require.NoError(t, err)
	// "b" is attached by a plugin fiber: a scope of its own, which alice is composed under.
	fiber := childScope(t, sys.Scope(), "plugin-b")
	alice := agentUnder(t, sys, fiber, "alice")
	a1, err := sys.Jobs().AttachController(context.Background(), sys.Scope(), "a")
	require.NoError(t, err)
	a2, err := sys.Jobs().AttachController(context.Background(), sys.Scope(), "a")
	require.NoError(t, err)
	_, err = sys.Jobs().AttachController(context.Background(), fiber, "b")
	require.NoError(t, err)

	owned := func() error { _, err := sys.Jobs().Start(context.Background(), live().Spec(alice)); return err }
	unowned := func() error { _, err := sys.Jobs().Start(context.Background(), live().Spec(nil)); return err }

	require.NoError(t, owned())
	require.NoError(t, unowned())

	// a's first disposer, twice: idempotent, so a's second registration stays.
	require.NoError(t, a1.Run(c))
	require.NoError(t, a1.Run(c))
	require.NoError(t, owned())
	require.NoError(t, unowned(), "the second \"a\" is an independent token and still serves globally")

	// a's second disposer: only b remains, on alice's scope chain.
	require.NoError(t, a2.Run(c))
	require.NoError(t, owned())
	err = unowned()
	require.ErrorIs(t, err, messages.ErrNoController)

	// b's fiber is disposed: the last controller is gone.
	require.NoError(t, fiber.Dispose(c))
	err = owned()
	require.ErrorIs(t, err, messages.ErrNoController)
	requireHinted(t, err, prefixNoController)
	require.ErrorIs(t, unowned(), messages.ErrNoController)
}

func TestSpec005_InvalidSpecErrors(t *testing.T) {
	sys, _ := troupetest.Served(t)
	limit := int64(0)
	cases := []struct {
		name string
		edit func(*job.Spec)
		msg  string
	}{
		{"empty kind", func(s *job.Spec) { s.Kind = "" }, "invalid job kind: expected a non-empty string"},
		{"empty label", func(s *job.Spec) { s.Label = "" }, "invalid job label: expected a non-empty string"},
		{"outputLimitBytes 0", func(s *job.Spec) { s.OutputLimitBytes = &limit },
			"invalid outputLimitBytes: expected a positive safe integer, got 0"},
	}
	for _, tc := range cases {
		p := live()
		spec := p.Spec(nil)
		tc.edit(&spec)
		_, err := sys.Jobs().Start(context.Background(), spec)
		requireCode(t, err, messages.ErrInvalidSpec, tc.msg)
		require.Zero(t, p.Runs(), tc.name)
	}
	requireNothingRegistered(t, sys, "bash-1")
}

func TestSpec007_IdsCountPerKind(t *testing.T) {
	sys, _ := troupetest.Served(t)
	var got []string
	for _, kind := range []string{"bash", "bash", "subagent", "workflow"} {
		p := live()
		p.Kind = kind
		got = append(got, start(t, sys, p.Spec(nil)))
	}
	require.Equal(t, []string{"bash-1", "bash-2", "subagent-1", "workflow-1"}, got)
	require.Equal(t, got, list(t, sys, ""))
}

func TestSpec008_CapacityRejectsEleventh(t *testing.T) {
	sys, _ := troupetest.Served(t)
	for i := 0; i < troupe.DefaultMaxConcurrentJobsPerOwner; i++ {
		start(t, sys, live().Spec(nil))
	}
	p := live()
	_, err := sys.Jobs().Start(context.Background(), p.Spec(nil))
	requireCode(t, err, messages.ErrCapacity,
		"background job limit reached for this owner (limit: 10); use job_kill to stop an unneeded job, wait for it to finish, then retry")
	require.Zero(t, p.Runs())
	require.Len(t, list(t, sys, ""), 10)
}

func limitOne(c *troupe.Config) {
	one := int64(1)
	c.MaxConcurrentJobsPerOwner = &one
}

func TestSpec009_CapacityRejectionConsumesNoID(t *testing.T) {
	sys, _ := troupetest.Served(t, limitOne)
	p1 := live()
	require.Equal(t, "bash-1", start(t, sys, p1.Spec(nil)))
	p2 := live()
	_, err := sys.Jobs().Start(context.Background(), p2.Spec(nil))
	requireCode(t, err, messages.ErrCapacity,
		"background job limit reached for this owner (limit: 1); use job_kill to stop an unneeded job, wait for it to finish, then retry")
	require.Zero(t, p2.Runs())
	p1.Settle(job.Outcome{Status: job.Completed})
	troupetest.Settled(t, sys, "bash-1", registry.NoCaller)
	// The same spec (same kind and label; a fresh producer, since one producer
	// settles once) is admitted at once and gets the next id.
	require.Equal(t, "bash-2", start(t, sys, p2.Spec(nil)))
	require.Equal(t, 1, p2.Runs())
}

func TestSpec011_AnyTerminalStatusFreesTheSlot(t *testing.T) {
	for _, status := range []job.Status{job.Completed, job.Killed, job.Failed} {
		t.Run(status.Name(), func(t *testing.T) {
			sys, _ := troupetest.Served(t, limitOne)
			p := live()
			id := start(t, sys, p.Spec(nil))
			_, err := sys.Jobs().Start(context.Background(), live().Spec(nil))
			require.ErrorIs(t, err, messages.ErrCapacity)
			p.Settle(job.Outcome{Status: status})
			require.Equal(t, status, troupetest.Settled(t, sys, id, registry.NoCaller).Status)
			require.Equal(t, "bash-2", start(t, sys, live().Spec(nil)))
		})
	}
}

func TestSpec013_OwnedStartNeedsAgentRegistry(t *testing.T) {
	sys, _ := troupetest.NewSystem(t)
	_, err := sys.Jobs().AttachController(context.Background(), sys.Scope(), "tool-jobs")
	require.NoError(t, err)
	alice, err := sys.NewAgent(nil, "alice")
	require.NoError(t, err)
	p := live()
	_, err = sys.Jobs().Start(context.Background(), p.Spec(alice))
	require.ErrorIs(t, err, messages.ErrNoAgentRegistry)
	requireHinted(t, err, prefixNoAgentRegistry)
	require.Zero(t, p.Runs())
	require.Zero(t, countLabel(alice.Scope(), registry.OwnerCleanupLabel))
	// Nor can an agent be registered without the registry.
	err = sys.Jobs().RegisterAgent(context.Background(), alice)
	require.ErrorIs(t, err, messages.ErrNoAgentRegistry)
	requireHinted(t, err, prefixNoAgentRegistry)
	require.Empty(t, list(t, sys, "alice"))
	requireNothingRegistered(t, sys, "bash-1")
}

func TestSpec014_OwnerMustBeTheRegisteredInstance(t *testing.T) {
	sys, _ := troupetest.Served(t)
	ghost, err := sys.NewAgent(nil, "ghost")
	require.NoError(t, err)
	p := live()
	_, err = sys.Jobs().Start(context.Background(), p.Spec(ghost))
	requireCode(t, err, messages.ErrOwnerNotLive,
		`agent "ghost" is not the registered agent instance (background job owner must be live)`)
	require.Zero(t, p.Runs())
	require.Zero(t, countLabel(ghost.Scope(), registry.OwnerCleanupLabel))
	require.Empty(t, list(t, sys, "ghost"))

	require.NoError(t, sys.Jobs().RegisterAgent(context.Background(), ghost))
	require.Equal(t, "bash-1", start(t, sys, p.Spec(ghost)))
	require.NoError(t, ghost.Dispose(ctx(t)))
	require.Equal(t, []string{"owner disposed"}, p.Cancels())
	require.Empty(t, list(t, sys, "ghost"))
}
