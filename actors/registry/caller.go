package registry

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/internal/userauth"
	"github.com/troupe-rt/troupe/messages"
)

// Caller is the authority a Client request acts with. Its fields are unexported, so
// no code outside this package can forge one; it is minted only as:
//   - AsAgent(a): an agent incarnation. The registry checks, when it takes the
//     request up, that a is the registered instance of a.Session(); a stale,
//     replaced, disposed or never-registered incarnation is refused with
//     job/unauthenticated (the code the wire path uses) before any lookup, and no
//     producer hook runs.
//   - NoCaller (the zero Caller{}): no agent; it sees unowned jobs only (SPEC's "no
//     caller").
//   - the human controller's user authority over a session (SPEC §4), which only
//     troupe's own code can mint (internal/userauth; actors/controller uses it).
//
// A session string is never authority in the Go API.
type Caller struct {
	agent *owner.Agent
	user  bool   // the controller acting for the user over session
	sess  string // user authority's session ("" for no session)
}

// NoCaller is the caller with no agent: it sees only unowned jobs.
var NoCaller = Caller{}

// AsAgent is agent instance a's authority (nil: NoCaller). It is checked against
// the agent registry at each request, never at minting.
func AsAgent(a *owner.Agent) Caller {
	if a == nil {
		return Caller{}
	}
	return Caller{agent: a}
}

// Agent is the agent instance c was minted for, nil for no agent or user authority.
func (c Caller) Agent() *owner.Agent { return c.agent }

func init() {
	userauth.ForSession = func(session string) any { return Caller{user: true, sess: session} }
}

// resolve returns the session c speaks for ("" for none), or job/unauthenticated
// if c is an agent incarnation that is not its session's registered instance now.
func (r *registryActor) resolve(c Caller) (string, error) {
	switch {
	case c.agent != nil:
		s := c.agent.Session()
		if p := r.agentPID(s); s != "" && p != nil && p.Equal(c.agent.PID()) {
			return s, nil
		}
		return "", &messages.Error{Code: messages.CodeUnauthenticated,
			Message: "request for session " + quote(s) + " is not authenticated: its agent instance is not the session's registered one (stale, replaced, disposed or never registered)",
			Details: map[string]string{"sessionId": bounded(s)}}
	case c.user:
		return c.sess, nil
	default:
		return "", nil
	}
}

// accessAs is access for the session c speaks for, after resolve's check.
func (r *registryActor) accessAs(id string, c Caller) (*record, error) {
	s, err := r.resolve(c)
	if err != nil {
		return nil, err
	}
	return r.access(id, s)
}

// listAs is the jobs visible to the session c speaks for.
func (r *registryActor) listAs(c Caller) ([]*record, error) {
	s, err := r.resolve(c)
	if err != nil {
		return nil, err
	}
	return r.idx.list(s), nil
}

// asCaller carries a Client's Read, Kill or Wait with its Caller: the registry
// resolves the caller and fills in the message's session before routing it. It
// also carries the Client's WaitEnd and CountWaiters, which name no session (a
// wait's end names its token; the count is an inspection). Only this package can
// build one, so a bare job message naming a session, sent to the registry's PID
// by any other code, is never served as a request (forwarded refuses it).
type asCaller struct {
	caller Caller
	msg    job.Routable // *job.Read, *job.Kill, *job.Wait, *job.WaitEnd or *job.CountWaiters
	byCaller
	onCaller bool // HandledBySender answered true: the handler may be on the caller's goroutine
}

// HandledBySender is the embedded byCaller's answer, noted in onCaller. The
// mailbox asks only when the registry is idle, just before it hands the caller
// the run (mailbox.Inline), so onCaller says the handler may be running on the
// caller's goroutine: it is, unless a system message suspended the registry
// first, and then a worker runs it later with onCaller still set, which only
// makes the handler take the worker's path for it (handOff).
func (m *asCaller) HandledBySender() bool {
	m.onCaller = bool(m.byCaller)
	return m.onCaller
}

// handOff reports whether serveAs must hand the read m carries to the registry's
// worker instead of answering it here: it may be running on its caller (onCaller),
// its ctx can end, and its answer would call a producer's ReadOutput not declared
// non-blocking (job.Hooks.ReadNonBlocking) — a live stream job's, or a settled
// one's. A read answered from the record (a final-output job's, a refused one) or
// routed to the job actor calls no hook on the caller and is never handed off.
func (r *registryActor) handOff(m *asCaller, jm *job.Read) bool {
	if !m.onCaller || jm.Ctx == nil || jm.Ctx.Done() == nil {
		return false
	}
	rec := r.idx.get(jm.ID)
	return rec != nil && !rec.readInline() && (rec.live() && rec.readOutput != nil || !rec.live() && rec.stream())
}

func (r *registryActor) serveAs(c actor.Context, m *asCaller) {
	switch jm := m.msg.(type) {
	case *job.WaitEnd:
		r.waitEnd(c, jm)
		return
	case *job.CountWaiters:
		r.countWaiters(c, jm)
		return
	}
	s, err := r.resolve(m.caller)
	switch jm := m.msg.(type) {
	case *job.Read:
		if err != nil {
			answerRead(jm, true, job.ReadResult{Err: err})
			return
		}
		if r.handOff(m, jm) {
			// Re-posted to the registry itself, which is running now (this run), so
			// the worker takes it up after whatever was posted meanwhile, and before
			// anything its caller sends next: the caller waits for this read's answer
			// or for its ctx's end, and a read whose ctx ended by then reads nothing
			// (readLive; a settled stream's read likewise). The re-post's own answer
			// is a worker's: it may block in the hook without holding the caller.
			m.byCaller, m.onCaller = false, false
			c.Send(c.Self(), m)
			return
		}
		jm.Caller = s
		r.read(c, jm, true)
	case *job.Kill:
		if err != nil {
			jm.Reply <- job.KillResult{Err: err, Free: true}
			return
		}
		jm.Caller = s
		r.kill(c, jm, true)
	case *job.Wait:
		if err != nil {
			jm.Reply <- job.WaitResult{Err: err}
			return
		}
		jm.Caller = s
		r.wait(c, jm)
	}
}

// forwarded serves a job request that reached the registry bare: one of its own
// job actors, having handed its job off, forwards what it still receives, stamped
// by this registry when it was routed (job.Route) and fenced then. Any other bare
// request — sent to the registry's PID by code that is not this package, with a
// Caller it asserts — is refused with job/unauthenticated (job.ErrNotRouted), or
// dropped and logged when it has no reply channel.
func (r *registryActor) forwarded(c actor.Context, m job.Routable) {
	if !r.shared.Stamped(m) {
		if !job.Refuse(m) {
			r.cfg.Logger.Warn(fmt.Sprintf("jobs: the registry dropped a %T it did not route", m))
		}
		return
	}
	switch m := m.(type) {
	case *job.Read:
		r.read(c, m, false)
	case *job.Kill:
		r.kill(c, m, false)
	case *job.Wait:
		r.wait(c, m)
	case *job.WaitEnd:
		r.waitEnd(c, m)
	case *job.CountWaiters:
		r.countWaiters(c, m)
	}
}

// waitEnd routes a wait's end to its live job (a settled job has no pending wait).
func (r *registryActor) waitEnd(c actor.Context, m *job.WaitEnd) {
	if rec := r.idx.get(m.ID); rec != nil && rec.live() {
		c.Send(rec.pid, r.shared.Stamp(m))
	}
}

// countWaiters routes the count to the live job; a settled job has none.
func (r *registryActor) countWaiters(c actor.Context, m *job.CountWaiters) {
	if rec := r.idx.get(m.ID); rec != nil && rec.live() {
		c.Send(rec.pid, r.shared.Stamp(m))
		return
	}
	m.Reply <- 0
}
