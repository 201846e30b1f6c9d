package supervision_test

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/troupe-rt/troupe/supervision"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDeciders(t *testing.T) {
	type panicValue struct{ msg string }
	reasons := []struct {
		name   string
		reason any
	}{
		{"nil", nil},
		{"error", errors.New("boom")},
		{"string", "boom"},
		{"int", 42},
		{"struct", panicValue{"boom"}},
		{"runtime error", func() (r any) {
			defer func() { r = recover() }()
			var m map[string]int
			m["x"] = 1
			return nil
		}()},
	}
	deciders := []struct {
		name    string
		decider actor.DeciderFunc
		want    actor.Directive
	}{
		{"job", supervision.JobDecider, actor.StopDirective},
		{"registry", supervision.RegistryDecider, actor.ResumeDirective},
		{"owner", supervision.OwnerDecider, actor.StopDirective},
		{"directory", supervision.DirectoryDecider, actor.ResumeDirective},
	}
	for _, d := range deciders {
		for _, r := range reasons {
			t.Run(d.name+"/"+r.name, func(t *testing.T) {
				require.Equal(t, d.want, d.decider(r.reason))
			})
		}
	}
	require.NotNil(t, supervision.JobStrategy())
	require.NotNil(t, supervision.RegistryStrategy())
}

// The strategies, exercised on a real child: what happens to its state and its own
// children when it panics.

type (
	boom    struct{}
	inc     struct{}
	inspect struct{}
	ping    struct{}
)

type state struct {
	count      int
	grandchild *actor.PID
	starts     int
}

// child counts, keeps one child of its own, and panics on boom.
type child struct{ s state }

func (c *child) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		c.s.starts++
		c.s.grandchild = ctx.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
			if _, ok := ctx.Message().(ping); ok {
				ctx.Respond("pong")
			}
		}))
	case inc:
		c.s.count++
	case boom:
		panic("boom")
	case inspect:
		ctx.Respond(c.s)
	}
}

type harness struct {
	system     *actor.ActorSystem
	parent     *actor.PID
	child      *actor.PID
	terminated chan *actor.PID
}

// newHarness spawns a parent that supervises one child with strategy and reports the
// child's termination.
func newHarness(t *testing.T, strategy actor.SupervisorStrategy) *harness {
	t.Helper()
	system := actor.NewActorSystem(
		actor.WithDeadLetterThrottleInterval(time.Millisecond),
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }),
	)
	h := &harness{system: system, terminated: make(chan *actor.PID, 1)}
	spawned := make(chan *actor.PID, 1)
	h.parent = system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *actor.Started:
			pid := ctx.Spawn(actor.PropsFromProducer(func() actor.Actor { return &child{} }))
			ctx.Watch(pid)
			spawned <- pid
		case *actor.Terminated:
			h.terminated <- m.Who
		}
	}, actor.WithSupervisor(strategy)))
	h.child = <-spawned
	t.Cleanup(func() {
		require.NoError(t, system.Root.StopFuture(h.parent).Wait())
		system.Shutdown()
	})
	return h
}

// futureTimeout only bounds a failing test; passing tests never wait on it.
const futureTimeout = 10 * time.Second

func (h *harness) inspect(t *testing.T) state {
	t.Helper()
	v, err := h.system.Root.RequestFuture(h.child, inspect{}, futureTimeout).Result()
	require.NoError(t, err)
	return v.(state)
}

func TestJobStrategyStopsAFailedJob(t *testing.T) {
	h := newHarness(t, supervision.JobStrategy())
	h.system.Root.Send(h.child, inc{})
	before := h.inspect(t)
	require.Equal(t, 1, before.count)

	h.system.Root.Send(h.child, boom{})
	who := <-h.terminated
	require.True(t, who.Equal(h.child), "the failed job actor stops")
	_, err := h.system.Root.RequestFuture(before.grandchild, ping{}, futureTimeout).Result()
	require.ErrorIs(t, err, actor.ErrDeadLetter, "its children stopped with it")
}

func TestRegistryStrategyResumesKeepingStateAndChildren(t *testing.T) {
	h := newHarness(t, supervision.RegistryStrategy())
	h.system.Root.Send(h.child, inc{})
	before := h.inspect(t)
	require.Equal(t, state{count: 1, grandchild: before.grandchild, starts: 1}, before)

	h.system.Root.Send(h.child, boom{})
	h.system.Root.Send(h.child, inc{}) // the message after the failure is processed
	after := h.inspect(t)
	require.Equal(t, 2, after.count, "resume keeps the registry's state (a restart would reset it)")
	require.Equal(t, 1, after.starts, "no restart")
	require.True(t, after.grandchild.Equal(before.grandchild))

	// The registry's children (the live job actors) survive its failure.
	v, err := h.system.Root.RequestFuture(before.grandchild, ping{}, futureTimeout).Result()
	require.NoError(t, err)
	require.Equal(t, "pong", v)
	select {
	case who := <-h.terminated:
		t.Fatalf("%v terminated", who)
	default:
	}
}
