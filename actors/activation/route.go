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
	head, err := d.m.deps.Store.Head(m.ctx, m.id) // the log is read once, by Activate
	if err != nil {
		if m.ctx.Err() != nil {
			m.refuse(context.Cause(m.ctx))
			return
		}
		m.refuse(messages.Errorf(subagent.CodeNotResumable, "subagent %q is unavailable", m.id))
		return
	}
	if !d.m.live(context.Background(), m.parent) {
		m.refuse(unauthorized("subagent %q delivery requires the exact live parent agent", m.id))
		return
	}
	if head.Header.ParentSession != authorisedSession(m.parent, m.source) || head.Header.ParentKind != d.kindOf(m.parent) {
		m.refuse(unauthorized("subagent %q belongs to another parent session", m.id))
		return
	}
	desc, err := ParseDescriptor(head.Descriptor)
	if err != nil || desc.Mode != "continuable" {
		if err != nil && desc.Version == DescriptorVersion {
			m.refuse(err) // a corrupt current-version descriptor
			return
		}
		m.refuse(messages.Errorf(subagent.CodeNotResumable,
			"subagent %q has no supported continuation state and cannot be resumed; do not retry send_message with this id", m.id))
		return
	}
	if pe := d.parentEntry(m.parent); pe != nil && pe.closing {
		m.refuse(messages.Errorf(subagent.CodeActivationClosing,
			"subagent parent %q is being disposed; the child was not established", pe.id))
		return
	}
	if a := d.disposingLineage(m.parent); a != nil {
		m.refuse(messages.Errorf(subagent.CodeActivationClosing,
			"subagent parent %q is being disposed; the child was not established", a.Session()))
		return
	}
	// The epoch and the message in one commit (Store.ResumeAccept); the submit
	// that follows answers with it, from the Activation.
	msg := session.InboxMessage{ID: newMessageID(), Content: m.content, Source: m.source, AcceptedAt: d.m.now()}
	e, err := d.materializeCold(c, m.id, m.parent, desc.Label, msg)
	if err != nil {
		m.refuse(err)
		return
	}
	e.starting = &pending{resume: m}
	m.parentKind, m.pre = d.kindOf(m.parent), true
	d.submitFirst(c, e, &m.submit)
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
