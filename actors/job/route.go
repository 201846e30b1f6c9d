package job

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/messages"
)

// Routing: a job actor serves only the registry that spawned it.
//
// Job actors are named after their (guessable) job ids, and the requests they
// serve — Read, Kill, Wait, WaitEnd, CountWaiters, Teardown, ForceFail — are
// exported Go values whose Caller the registry filled in after its session
// fence. So the job actor does not trust the message: it serves one only if it
// carries the stamp of its own registry (Shared.Stamp), an unexported pointer to
// the Shared that registry hands its job actors and nobody else. No code outside
// this package can set it, and no Shared but that registry's matches, so a
// request sent straight to a job's PID — by any actor, the root context or a
// remote peer — is refused with job/unauthenticated (CodeUnauthenticated) when it
// has a reply channel, and dropped with a warning when it has none. The stamp
// also marks what a handed-off job actor forwards back, so the registry can tell
// its own job actors' forwards from a stranger's (Shared.Stamped).

// Route is a request's routing stamp, embedded in each request type: which
// registry routed it. Its zero value is "not routed".
type Route struct{ by *Shared }

func (r *Route) route() *Route { return r }

// Routable is a request a registry routes to its job actors.
type Routable interface{ route() *Route }

// Stamp marks m as routed by the registry whose job actors share s, and returns
// m. Only that registry holds s.
func (s *Shared) Stamp(m Routable) Routable {
	m.route().by = s
	return m
}

// Stamped reports whether m carries s's stamp (false for a nil s).
func (s *Shared) Stamped(m Routable) bool { return s != nil && m.route().by == s }

// TextNotRouted is the error text of a job request that did not come through the
// job's registry.
const TextNotRouted = "job request refused: job actors serve only their registry's routed requests; send it to the job registry"

// ErrNotRouted is the error answering a job request sent straight to a job actor
// (or to the registry posing as one of its job actors' forwards).
func ErrNotRouted(id string) error {
	return &messages.Error{Code: messages.CodeUnauthenticated, Message: TextNotRouted,
		Details: map[string]string{"jobId": CleanID(id)}}
}

// Refuse answers m, a request that does not carry the expected stamp, with
// ErrNotRouted on its reply channel; it reports whether m had one to answer (a
// WaitEnd, Teardown or ForceFail has none).
func Refuse(m Routable) bool {
	switch m := m.(type) {
	case *Read:
		m.Reply <- ReadResult{Err: ErrNotRouted(m.ID)}
	case *Kill:
		m.Reply <- KillResult{Err: ErrNotRouted(m.ID)}
	case *Wait:
		m.Reply <- WaitResult{Err: ErrNotRouted(m.ID)}
	default:
		return false
	}
	return true
}

// refuseWire answers a wire job request (messages.*Request) sent straight to a job
// actor: the registry serves those (it authenticates the caller's credential),
// never a job actor. It reports whether msg was one.
func refuseWire(c actor.Context, msg any) bool {
	info := func(id string) *messages.ErrorInfo { return ErrNotRouted(id).(*messages.Error).Proto() }
	switch m := msg.(type) {
	case *messages.GetRequest:
		c.Respond(&messages.GetReply{Error: info(m.JobId)})
	case *messages.ListRequest:
		c.Respond(&messages.ListReply{Error: &messages.ErrorInfo{Code: string(messages.CodeUnauthenticated), Message: TextNotRouted}})
	case *messages.ReadRequest:
		c.Respond(&messages.ReadReply{Error: info(m.JobId)})
	case *messages.KillRequest:
		c.Respond(&messages.KillReply{Error: info(m.JobId)})
	case *messages.WaitRequest:
		c.Respond(&messages.WaitReply{Error: info(m.JobId)})
	default:
		return false
	}
	return true
}
