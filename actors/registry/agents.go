package registry

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/messages"
)

// The agent registry (SPEC §1.3 rule 27): session id → the registered instance;
// its authority rules are in auth.go.

// agentRec is a session's registered instance and the number of its registration,
// from which its wire credential is derived (auth.go): one map entry per registered
// session, by value (32 B with its key; 56 B when it held the 32 B credential
// itself), instead of three maps (session → PID, PID Id → session, session →
// secret).
type agentRec struct {
	pid *actor.PID
	reg uint64
}

// agentPID returns the instance registered for session s, or nil.
func (r *registryActor) agentPID(s string) *actor.PID { return r.agents[s].pid }

// stoppedSession returns the session an owner actor that stopped (m) was
// registered for, if it still is: the session it named (Stopped.Session, known
// from its ownerInit), or — for one that stopped before its ownerInit, a PID no
// handle was ever used with — the registration whose PID it is, found by a scan
// of the registered sessions (a rare path: no index is kept for it).
func (r *registryActor) stoppedSession(m *owner.Stopped) string {
	if m.Session != "" {
		return m.Session
	}
	for s, rec := range r.agents {
		if rec.pid.Equal(m.PID) {
			return s
		}
	}
	return ""
}

// registerAgent makes pid the registered instance of session s, replacing any
// previous one — the caller has checked the registration rule (agent). A new
// instance gets a fresh wire credential (a new registration number); the old one's
// is revoked.
func (r *registryActor) registerAgent(s string, pid *actor.PID) {
	if old := r.agents[s].pid; old != nil && old.Equal(pid) {
		return // registered already: the credential stays
	}
	r.agents[s] = agentRec{pid: pid, reg: r.creds.next()}
}

// unregisterAgent removes pid from the agent registry if it is the instance
// registered for s (a same-session replacement stays).
func (r *registryActor) unregisterAgent(s string, pid *actor.PID) {
	if p := r.agents[s].pid; p != nil && p.Equal(pid) {
		delete(r.agents, s)
	}
}

// agent registers or unregisters an instance under the registration rule: a
// session's live registered instance is displaced only by a replace that holds its
// handle (ReplaceAgent); otherwise it must be unregistered (disposed) first.
func (r *registryActor) agent(c actor.Context, m *agentReq) error {
	s := m.agent.Session()
	if s == "" {
		return owner.ErrEmptySession() // "" is the no-caller identity, never an agent's
	}
	if m.unregister {
		r.unregisterAgent(s, m.agent.PID())
		return nil
	}
	if r.agentMounts == 0 {
		return &messages.Error{Code: messages.CodeNoAgentRegistry, Message: TextNoAgentRegistry}
	}
	if o := r.owners[m.agent.PID().Id]; (o != nil && o.tornDown) || m.agent.Scope().Disposed() || !r.alive(c, m.agent.PID()) {
		return messages.Errorf(messages.CodeOwnerNotLive, "agent %q has been torn down and cannot be registered again", s)
	}
	if err := r.mayRegister(s, m.agent.PID(), m.replaces); err != nil {
		return err
	}
	r.registerAgent(s, m.agent.PID())
	return nil
}

// alive reports whether pid's actor still runs on this node. An owner actor sends
// its Stopped once it is out of protoactor's process registry, so after that
// Stopped is processed, its incarnation reads dead here: the registry keeps no
// tombstone of its own.
func (r *registryActor) alive(c actor.Context, pid *actor.PID) bool {
	_, ok := c.ActorSystem().ProcessRegistry.GetLocal(pid.Id)
	return ok
}
