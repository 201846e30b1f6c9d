package authz

import (
	"context"
	"crypto/rand"
	"fmt"
	"github.com/troupe-rt/troupe/actors/registry"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/troupetest"
)

// wireIdentity is how a forged wire request presents itself.
type wireIdentity struct {
	name    string
	session string
	cred    []byte
	sender  *actor.PID // nil: no sender (a root request)
}

// TestAuthzWireMatrix: every wire request kind × every forged identity — the
// session asserted without a credential, a random credential, a truncated one,
// another session's, a disposed incarnation's, a replaced (stale, still live)
// incarnation's, the right credential under another session, and an unknown actor
// or alice's own owner PID as the sender — is refused with job/unauthenticated,
// leaks nothing, and calls the producer 0 times. The current incarnation's
// credential is then served (the control).
func TestAuthzWireMatrix(t *testing.T) {
	sys, _ := troupetest.Served(t)
	jobs := sys.Jobs()
	cred := func(a *owner.Agent) []byte {
		c, err := jobs.WireCredential(t.Context(), a)
		require.NoError(t, err)
		require.Len(t, c, 32, "a credential is 256 bits")
		return c
	}
	disposed := troupetest.Agent(t, sys, "alice")
	disposedCred := cred(disposed)
	require.NoError(t, disposed.Dispose(t.Context()))
	_, err := jobs.WireCredential(t.Context(), disposed)
	require.ErrorIs(t, err, messages.ErrOwnerNotLive, "a disposed incarnation has no credential")
	stale, err := sys.NewAgent(nil, "alice")
	require.NoError(t, err)
	require.NoError(t, jobs.RegisterAgent(context.Background(), stale))
	staleCred := cred(stale)
	alice, err := sys.NewAgent(nil, "alice")
	require.NoError(t, err)
	require.NoError(t, jobs.ReplaceAgent(t.Context(), stale, alice))
	aliceCred := cred(alice)
	require.NotEqual(t, staleCred, aliceCred, "each registration mints a fresh credential")
	bob := troupetest.Agent(t, sys, "bob")
	bobCred := cred(bob)
	random := make([]byte, 32)
	_, _ = rand.Read(random)

	p := newCounting()
	id, err := jobs.Start(t.Context(), p.spec(alice))
	require.NoError(t, err)
	stranger := sys.Actors().Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	t.Cleanup(func() { _ = sys.Actors().Root.StopFuture(stranger).Wait() })

	identities := []wireIdentity{
		{name: "asserted session, no credential", session: "alice"},
		{name: "random credential", session: "alice", cred: random},
		{name: "truncated credential", session: "alice", cred: aliceCred[:16]},
		{name: "another session's credential", session: "alice", cred: bobCred},
		{name: "disposed incarnation's credential", session: "alice", cred: disposedCred},
		{name: "replaced incarnation's credential", session: "alice", cred: staleCred},
		{name: "alice's credential under bob's session", session: "bob", cred: aliceCred},
		{name: "unknown actor as sender", session: "alice", sender: stranger},
		{name: "alice's owner PID as sender", session: "alice", sender: alice.PID()},
	}
	kinds := []func(w wireIdentity) proto.Message{
		func(w wireIdentity) proto.Message {
			return &messages.GetRequest{JobId: id, CallerSession: w.session, CallerCredential: w.cred}
		},
		func(w wireIdentity) proto.Message {
			return &messages.ListRequest{CallerSession: w.session, CallerCredential: w.cred}
		},
		func(w wireIdentity) proto.Message {
			return &messages.ReadRequest{JobId: id, CallerSession: w.session, CallerCredential: w.cred}
		},
		func(w wireIdentity) proto.Message {
			return &messages.WaitRequest{JobId: id, CallerSession: w.session, CallerCredential: w.cred, TimeoutMs: 1}
		},
		func(w wireIdentity) proto.Message {
			return &messages.KillRequest{JobId: id, CallerSession: w.session, CallerCredential: w.cred, Reason: "forged"}
		},
	}
	ask := func(w wireIdentity, m proto.Message) any {
		f := actor.NewFuture(sys.Actors(), requestTimeout)
		if w.sender != nil {
			sys.Actors().Root.RequestWithCustomSender(sys.Jobs().PID(), m, w.sender) // the forgery itself
		}
		sys.Actors().Root.RequestWithCustomSender(sys.Jobs().PID(), m, f.PID())
		reply, err := f.Result()
		require.NoError(t, err, "%T: no reply", m)
		return reply
	}
	for _, w := range identities {
		for _, kind := range kinds {
			req := kind(w)
			e := wireError(t, ask(w, req))
			require.NotNil(t, e, "%s: %T was served", w.name, req)
			require.Equal(t, string(messages.CodeUnauthenticated), e.GetCode(), "%s %T: %v", w.name, req, e)
			require.Equal(t, w.session, e.GetDetails()["sessionId"])
		}
	}
	troupetest.Barrier(t, sys)
	require.Zero(t, p.calls(), "the producer was called for a forged request")
	snap, err := jobs.Get(t.Context(), id, registry.AsAgent(alice))
	require.NoError(t, err)
	require.Equal(t, messages.JobStatus_JOB_STATUS_RUNNING, snap.GetStatus())

	// The control: the same requests with the current credential are served.
	me := wireIdentity{name: "alice", session: "alice", cred: aliceCred}
	for _, kind := range kinds {
		req := kind(me)
		require.Nil(t, wireError(t, ask(me, req)), "%T with alice's current credential", req)
	}
	require.Equal(t, int64(1), p.cancels.Load(), "the authenticated kill reached the producer")
	// A request naming no session is a caller with no agent: alice's job is foreign to it.
	e := wireError(t, ask(wireIdentity{}, &messages.GetRequest{JobId: id}))
	require.Equal(t, string(messages.CodeForeign), e.GetCode())

	// Credentials leave no residue: one per registered instance (in its agent
	// record), none once they are gone.
	fp, err := jobs.Footprint(t.Context())
	require.NoError(t, err)
	require.Equal(t, 2, fp.Agents, "alice and bob are registered")
	for _, a := range []*owner.Agent{stale, alice, bob} {
		require.NoError(t, a.Dispose(t.Context()))
	}
	fp, err = jobs.Footprint(t.Context())
	require.NoError(t, err)
	require.Zero(t, fp.Agents, "a disposed instance's record (and credential) is kept")
}

// TestAuthzContinuationMatrix: every continuation operation × every forged
// identity — a stale (replaced, still live) incarnation of the parent, an
// unregistered instance of the parent's session, a stranger, a sibling, the
// target's own child, an ancestor that is not the direct parent, and a child whose
// id aliases an offline top-level session — is refused with its coded error, the
// runner never sees a refused message and no held turn is cut.
func TestAuthzContinuationMatrix(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	jobs := e.sys.Jobs()
	start := func(parent *owner.Agent, id string) *owner.Agent {
		t.Helper()
		_, _, err := e.m.Start(ctx, parent, "spawn", "label "+id, id, subagent.Request{Prompt: "hold: " + id})
		require.NoError(t, err)
		e.runner.awaitStarted(t, "hold: "+id)
		return e.kid(id)
	}
	// Q, offline, has a child q; X's child "Q" aliases Q's session.
	q, _ := e.parent(t, "Q")
	_, _, err := e.m.Start(ctx, q, "spawn", "q", "q", subagent.Request{Prompt: "q task"})
	require.NoError(t, err)
	e.settled(t)
	require.NoError(t, q.Dispose(ctx))

	stale, _ := e.parent(t, "P")
	c := start(stale, "c") // P → c → g, and c's sibling s
	g := start(c, "g")
	s := start(stale, "s")
	p, err := e.sys.NewAgent(nil, "P")
	require.NoError(t, err)
	require.NoError(t, jobs.ReplaceAgent(t.Context(), stale, p))
	x, _ := e.parent(t, "X")
	alias := start(x, "Q")
	forged, err := e.sys.NewAgent(nil, "P")
	require.NoError(t, err)

	type who struct {
		name  string
		agent *owner.Agent
	}
	forgedP := []who{{"P (stale, replaced)", stale}, {"P (unregistered instance)", forged}}
	strangers := []who{{"X (stranger)", x}, {"s (sibling of c)", s}, {"Q-alias (child id aliasing Q)", alias}}
	unauthorized := func(err error, what string) {
		t.Helper()
		require.Error(t, err, "%s was allowed", what)
		require.Equal(t, subagent.CodeUnauthorized, messages.CodeOf(err), "%s: %v", what, err)
	}
	refusedTexts := []string{}
	followup := func(from who, target string) {
		t.Helper()
		text := fmt.Sprintf("forged %s -> %s", from.name, target)
		refusedTexts = append(refusedTexts, text)
		_, err := e.m.Followup(ctx, from.agent, target, text, session.Source{Kind: "coordinator", Form: "relay", SenderSessionID: "P"})
		unauthorized(err, "followup "+text)
	}

	// Followup: only the exact live direct parent.
	for _, w := range append(append(forgedP, strangers...), who{"g (c's own child)", g}, who{"c (itself)", c}) {
		followup(w, "c")
	}
	for _, w := range append(append(forgedP, strangers...), who{"P (ancestor, not the parent)", p}, who{"g (itself)", g}) {
		followup(w, "g")
	}
	followup(who{"Q-alias", alias}, "q") // cold: q's parent of record is top-level Q

	// Interrupt: any live ancestor, nobody else.
	for _, w := range append(append(forgedP, strangers...), who{"g (itself)", g}) {
		unauthorized(e.m.Interrupt(ctx, "g", activation.Authority{Ancestor: w.agent}), "interrupt g by "+w.name)
	}
	unauthorized(e.m.Interrupt(ctx, "c", activation.Authority{ParentSession: "X"}), "user interrupt of c naming X")

	// Drain children: only the exact live direct parent.
	for _, w := range append(append(forgedP, strangers...), who{"P (ancestor of g)", p}) {
		err := e.m.DrainContinuableChildren(ctx, w.agent, []string{"c", "g"})
		unauthorized(err, "drain c, g by "+w.name)
	}
	// Drain descendants below a non-live instance is a no-op.
	require.NoError(t, e.m.DrainContinuableDescendants(ctx, []*owner.Agent{stale, forged}))

	// Start: the parent must be the exact live instance; a live session's id is taken.
	for _, w := range forgedP {
		_, _, err := e.m.Start(ctx, w.agent, "spawn", "x", "new-"+w.agent.PID().Id, subagent.Request{Prompt: "forged start"})
		unauthorized(err, "start by "+w.name)
	}
	_, _, err = e.m.Start(ctx, x, "spawn", "x", "P", subagent.Request{Prompt: "forged start"})
	require.Equal(t, subagent.CodeDuplicateChild, messages.CodeOf(err), "a child id naming a live session: %v", err)

	// Report: only a live continuable child.
	for _, w := range append(forgedP, who{"X (top-level)", x}) {
		_, err := e.m.Report(ctx, w.agent, "forged report", false)
		unauthorized(err, "report by "+w.name)
	}

	// List: only the exact live agent, and only its own namespace's children.
	for _, w := range forgedP {
		_, err := e.m.List(ctx, w.agent, true)
		unauthorized(err, "list by "+w.name)
	}
	listed, err := e.m.List(ctx, alias, true)
	require.NoError(t, err)
	require.Empty(t, listed, "the Q-alias child listed top-level Q's children")

	// Registration: a live instance is displaced only with its handle.
	require.Equal(t, messages.CodeAgentRegistered, messages.CodeOf(jobs.RegisterAgent(context.Background(), forged)))
	require.Equal(t, messages.CodeAgentRegistered, messages.CodeOf(jobs.ReplaceAgent(t.Context(), stale, forged)), "a stale handle displaces nobody")
	_, err = jobs.WireCredential(t.Context(), forged)
	require.Equal(t, messages.CodeOwnerNotLive, messages.CodeOf(err))

	// Nothing refused ran, and every held turn is still running.
	for _, id := range []string{"c", "g", "s", "Q"} {
		st, ok := e.m.Status(ctx, id)
		require.True(t, ok, "%s is no longer resident", id)
		require.Equal(t, activation.Running, st.Residency, "%s's held turn was cut", id)
	}
	// The controls: the live parent and a live recorded ancestor are obeyed (P's
	// replacement is in no recorded ancestry: g's records the stale P it was
	// started under).
	unauthorized(e.m.Interrupt(ctx, "g", activation.Authority{Ancestor: p}), "interrupt g by P's replacement")
	_, err = e.m.Followup(ctx, p, "c", "real followup", session.Source{Kind: "coordinator"})
	require.NoError(t, err)
	require.NoError(t, e.m.Interrupt(ctx, "g", activation.Authority{Ancestor: c}))
	e.runner.release()
	e.settled(t)
	for _, text := range refusedTexts {
		require.Zero(t, e.runner.saw(text), "the runner saw a refused followup: %q", text)
	}
	require.Equal(t, 1, e.runner.saw("real followup"))
}
