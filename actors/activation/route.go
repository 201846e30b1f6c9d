package activation

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/internal/fault"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
)

// Routing to a live Activation: followups (SPEC §6.3; a cold resume when none is
// resident) and interrupts (§6.4), and the parent of record a report or notice goes to.

// kindOf is the namespace agent a speaks in as a parent: session.ParentSubagent for
// the agent of one of this directory's Activations (a continuable child), "" for
// any other (a top-level agent). Child ids and top-level session ids may collide as
// strings — a model chooses child ids — so a parent of record is its session and
// this kind together: a child whose id is "P" never speaks for top-level P's
// children, nor P for that child's (docs/THREAT-MODEL.md).
func (d *directoryActor) kindOf(a *owner.Agent) string {
	if d.entryOf(a) != nil {
		return session.ParentSubagent
	}
	return ""
}

// recipient returns the owner actor registered now for a parent of record (s,
// kind), or nil when none is or the registered one lives in the other namespace.
func (d *directoryActor) recipient(s, kind string) *actor.PID {
	pid := d.m.registered(s)
	if pid == nil {
		return nil
	}
	if child := d.agentEntry(s, pid) != nil; child != (kind == session.ParentSubagent) {
		return nil
	}
	return pid
}

// followup is SPEC §6.3's routing.
func (d *directoryActor) followup(c actor.Context, m *followupReq) {
	if err := d.admission(m.parent); err != nil {
		m.refuse(err)
		return
	}
	if e := d.acts[m.id]; e != nil {
		if e.starting == nil && !e.closing && d.plantedResumeCold(c, m, e) {
			return
		}
		if e.closing || e.starting != nil {
			if e.waiting == nil {
				e.waiting = new([]any)
			}
			*e.waiting = append(*e.waiting, m) // retried once the lock is free
			return
		}
		fault.Yield(PointDirectoryRoute)
		m.parentKind = d.kindOf(m.parent)
		c.Send(e.pid, &m.submit) // the Activation answers the caller
		return
	}
	// Cold resume from the store; the provider is not called.
	if m.ctx.Err() != nil {
		m.refuse(context.Cause(m.ctx))
		return
	}
	// The refusals after the head's read (SPEC §6.3: authority against the
	// persisted header, the descriptor, a disposal that won) run in the
	// transaction that then takes the epoch and accepts the message, one commit
	// (Store.ResumeAccept's check): no read of their own. What they need of the
	// directory and the registry is taken before it — the parent's liveness asks
	// the agent registry, which a store transaction must not wait on — and
	// applied in their order inside it (coldCheck).
	k := &coldCheck{id: m.id, live: d.m.live(context.Background(), m.parent),
		parentSes: authorisedSession(m.parent, m.source), parentKind: d.kindOf(m.parent), closing: d.closingLineage(m.parent)}
	// The submit that follows answers with the message, from the Activation.
	msg := session.InboxMessage{ID: newMessageID(), Content: m.content, Source: m.source, AcceptedAt: d.m.now()}
	e, err := d.materializeCold(c, m.id, m.parent, k, msg)
	if err != nil {
		if !k.decided && m.ctx.Err() != nil { // the head could not be read
			err = context.Cause(m.ctx)
		}
		m.refuse(err)
		return
	}
	e.starting = &pending{resume: m}
	m.parentKind, m.pre = k.parentKind, true
	d.submitFirst(c, e, &m.submit)
}

// coldCheck is a cold followup's refusals on the persisted head, in SPEC §6.3's
// order after the head's read (which fails NOT_RESUMABLE): the parent's
// liveness, its authority over the session, the descriptor, a parent being
// disposed. check is Store.ResumeAccept's check: it decides from the head and
// the values the directory fixed before the call alone, so it may run on a
// store's goroutine, and more than once.
type coldCheck struct {
	id                    string
	live                  bool   // the parent is the exact live agent of its session
	parentSes, parentKind string // the parent of record the caller speaks for
	closing               error  // ACTIVATION_CLOSING if the parent's lineage is being disposed
	decided               bool   // check ran (the head was read)
	refused               error  // what check returned last
	label                 string // the descriptor's label, once check accepted
}

func (k *coldCheck) check(head session.Head) error {
	k.decided = true
	k.refused = k.decide(head)
	return k.refused
}

func (k *coldCheck) decide(head session.Head) error {
	if !k.live {
		return unauthorized("subagent %q delivery requires the exact live parent agent", k.id)
	}
	if head.Header.ParentSession != k.parentSes || head.Header.ParentKind != k.parentKind {
		return unauthorized("subagent %q belongs to another parent session", k.id)
	}
	desc, err := ParseDescriptor(head.Descriptor)
	if err != nil || desc.Mode != "continuable" {
		if err != nil && desc.Version == DescriptorVersion {
			return err // a corrupt current-version descriptor
		}
		return messages.Errorf(subagent.CodeNotResumable,
			"subagent %q has no supported continuation state and cannot be resumed; do not retry send_message with this id", k.id)
	}
	if k.closing != nil {
		return k.closing
	}
	k.label = desc.Label
	return nil
}

// refuse answers the followup with err.
func (m *followupReq) refuse(err error) { answerTo(m.to, acceptRes{err: err}) }

// redispatch runs again the operations that waited on e's lock.
func (d *directoryActor) redispatch(c actor.Context, e *entry) {
	if e.waiting == nil {
		return
	}
	ops := *e.waiting
	e.waiting = nil
	for _, op := range ops {
		c.Send(c.Self(), op)
	}
}

// interrupt is SPEC §6.4's admission: ancestor checks before the lookup, then the
// target's own checks (in its Activation), which answers once admitted.
func (d *directoryActor) interrupt(c actor.Context, m *interruptReq) {
	if a := m.auth.Ancestor; a != nil {
		if !d.m.live(context.Background(), a) {
			m.reply <- unauthorized("interrupting %q requires the exact live ancestor agent", m.target)
			return
		}
		if a.Session() == m.target {
			m.reply <- unauthorized("agent %q cannot interrupt itself", a.Session())
			return
		}
	}
	e := d.acts[m.target]
	if e == nil {
		m.reply <- nil // an accepted no-op
		return
	}
	reply := m.reply
	c.Send(e.pid, &interrupt{auth: m.auth, reply: func(err error) { reply <- err }})
}

// children returns the resident entries a parent agent started.
func (d *directoryActor) children(parent *owner.Agent) []*entry {
	return append([]*entry(nil), d.kids[parent.PID().Id]...)
}
