package authz

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/troupetest"
)

// TestAuthzJobActorServesOnlyItsRegistry: a job actor's PID is guessable (the
// registry's PID id, "/", the job id), and the job requests are exported Go values
// whose Caller the registry fills in after its fence. A stranger actor that sends
// alice's job actor — or the registry's PID, posing as a job actor's forward —
// those requests directly, naming alice as the caller, or stamped with a Shared of
// its own, is refused: Read, Kill and Wait with job/unauthenticated on their reply
// channel, every wire request with its coded *Reply; Teardown, ForceFail, WaitEnd
// and CountWaiters (no error channel) change nothing. The producer is called 0
// times and the job stays running and unreported; alice's own requests still work.
func TestAuthzJobActorServesOnlyItsRegistry(t *testing.T) {
	sys, _ := troupetest.Served(t)
	alice := troupetest.Agent(t, sys, "alice")
	p := newCounting()
	id, err := sys.Jobs().Start(t.Context(), p.spec(alice))
	require.NoError(t, err)
	reg := sys.Jobs().PID()
	jobPID := actor.NewPID(reg.Address, reg.Id+"/"+id)

	// The stranger is an actor: it sends what it is told, and hands back the
	// replies its wire requests get.
	type send struct {
		to  *actor.PID
		msg any
	}
	replies := make(chan any, 16)
	stranger := sys.Actors().Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case send:
			if _, wire := m.msg.(proto.Message); wire {
				c.Request(m.to, m.msg)
				return
			}
			c.Send(m.to, m.msg)
		case proto.Message:
			replies <- m
		}
	}))
	t.Cleanup(func() { _ = sys.Actors().Root.StopFuture(stranger).Wait() })
	tell := func(to *actor.PID, msg any) { sys.Actors().Root.Send(stranger, send{to, msg}) }

	own := &job.Shared{Registry: reg} // a stranger's own Shared: its stamp is not the registry's
	type request struct {
		name string
		msg  func() (job.Routable, func() error)
	}
	read := func(stamp bool) func() (job.Routable, func() error) {
		return func() (job.Routable, func() error) {
			reply := make(chan job.ReadResult, 1)
			m := job.Routable(&job.Read{ID: id, Caller: "alice", Reply: reply})
			if stamp {
				m = own.Stamp(m)
			}
			return m, func() error {
				r := within(t, reply)
				require.Empty(t, r.Text, "a forged read got output")
				require.Nil(t, r.Snapshot)
				return r.Err
			}
		}
	}
	kill := func(stamp bool) func() (job.Routable, func() error) {
		return func() (job.Routable, func() error) {
			reply := make(chan job.KillResult, 1)
			m := job.Routable(&job.Kill{ID: id, Caller: "alice", Reason: "forged", Reply: reply})
			if stamp {
				m = own.Stamp(m)
			}
			return m, func() error { r := within(t, reply); require.Nil(t, r.Snapshot); return r.Err }
		}
	}
	wait := func(stamp bool) func() (job.Routable, func() error) {
		return func() (job.Routable, func() error) {
			reply := make(chan job.WaitResult, 1)
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			t.Cleanup(cancel)
			m := job.Routable(&job.Wait{ID: id, Caller: "alice", Timeout: time.Hour, Token: 1 << 40, Ctx: ctx, Reply: reply})
			if stamp {
				m = own.Stamp(m)
			}
			return m, func() error { r := within(t, reply); require.Nil(t, r.Snapshot); return r.Err }
		}
	}
	reqs := []request{
		{"Read", read(false)}, {"Kill", kill(false)}, {"Wait", wait(false)},
		{"Read stamped by a stranger's Shared", read(true)},
		{"Kill stamped by a stranger's Shared", kill(true)},
		{"Wait stamped by a stranger's Shared", wait(true)},
	}
	for _, to := range []*actor.PID{jobPID, reg} {
		for _, r := range reqs {
			m, await := r.msg()
			tell(to, m)
			err := await()
			require.Error(t, err, "%s sent to %s was served", r.name, to.Id)
			require.Equal(t, messages.CodeUnauthenticated, messages.CodeOf(err), "%s to %s: %v", r.name, to.Id, err)
			require.EqualError(t, err, job.TextNotRouted)
		}
	}

	// Wire requests sent straight to the job actor, asserting alice: each is
	// answered job/unauthenticated, with nothing of the job.
	wire := []proto.Message{
		&messages.GetRequest{JobId: id, CallerSession: "alice"},
		&messages.ListRequest{CallerSession: "alice"},
		&messages.ReadRequest{JobId: id, CallerSession: "alice"},
		&messages.KillRequest{JobId: id, CallerSession: "alice", Reason: "forged"},
		&messages.WaitRequest{JobId: id, CallerSession: "alice", TimeoutMs: 1},
	}
	for _, req := range wire {
		tell(jobPID, req)
		select {
		case reply := <-replies:
			e := wireError(t, reply)
			require.NotNil(t, e, "%T sent to the job actor was served: %v", req, reply)
			require.Equal(t, string(messages.CodeUnauthenticated), e.GetCode(), "%T: %v", req, e)
			require.Equal(t, job.TextNotRouted, e.GetMessage())
		case <-time.After(requestTimeout):
			t.Fatalf("%T sent to the job actor got no reply", req)
		}
	}

	// Fire-and-forget requests: each would end or settle the job, or end a wait,
	// if the job actor (or the registry) served it.
	counts := make(chan int, 2)
	for _, to := range []*actor.PID{jobPID, reg} {
		tell(to, &job.Teardown{Reason: "forged teardown"})
		tell(to, &job.ForceFail{Detail: "forged", Warn: "forged", Reason: "forged"})
		tell(to, &job.WaitEnd{ID: id, Token: 1})
		tell(to, &job.CountWaiters{ID: id, Reply: counts})
	}

	// The stranger sends in order and each target serves in order, so once a last
	// request through each has been answered, every message above was handled.
	tell(jobPID, &messages.GetRequest{JobId: id, CallerSession: "alice"})
	require.NotNil(t, wireError(t, within(t, (<-chan any)(replies))))
	m, await := read(false)()
	tell(reg, m)
	require.Equal(t, messages.CodeUnauthenticated, messages.CodeOf(await()))
	snap, err := sys.Jobs().Get(t.Context(), id, registry.AsAgent(alice))
	require.NoError(t, err)
	require.Equal(t, messages.JobStatus_JOB_STATUS_RUNNING, snap.GetStatus(), "a forged request settled the job")
	require.False(t, snap.GetReported(), "a forged request claimed the job's report")
	n, err := sys.Jobs().Waiters(t.Context(), id)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Empty(t, counts, "a forged CountWaiters was answered")
	require.Zero(t, p.calls(), "the producer was called for a forged request")

	// The control: the same requests through the registry, as alice, are served.
	text, _, err := sys.Jobs().Read(t.Context(), id, registry.AsAgent(alice))
	require.NoError(t, err)
	require.Equal(t, "secret output", text)
	res, _, err := sys.Jobs().Kill(t.Context(), id, registry.AsAgent(alice), registry.KillOptions{Reason: "done"})
	require.NoError(t, err)
	require.Equal(t, messages.KillResult_KILL_RESULT_REQUESTED, res)
	require.Equal(t, messages.JobStatus_JOB_STATUS_KILLED, troupetest.Settled(t, sys, id, registry.AsAgent(alice)).GetStatus())
}

// within is the one value on reply, failing the test if none comes in time.
func within[T any](t *testing.T, reply <-chan T) T {
	t.Helper()
	select {
	case r := <-reply:
		return r
	case <-time.After(requestTimeout):
		t.Fatalf("no reply within %s", requestTimeout)
		var zero T
		return zero
	}
}
