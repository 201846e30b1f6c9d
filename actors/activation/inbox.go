package activation

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/internal/deliver"
	"github.com/troupe-rt/troupe/internal/fault"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
)

// What an Activation accepts: submits (authority checked on every message, then
// durable acceptance), journaled inbox messages, interrupts (SPEC §6.4) and reports
// to its parent (§6.6).

// relayTimeout bounds how long a report waits for the parent's owner actor to take
// it (an owner that stops in between never answers).
const relayTimeout = 5 * time.Second

func unauthorized(format string, args ...any) error {
	return messages.Errorf(subagent.CodeUnauthorized, format, args...)
}

func closingErr(id string) error {
	return messages.Errorf(subagent.CodeActivationClosing,
		"subagent %q activation is being disposed; the message was not accepted", id)
}

// submit is SPEC §6.3's final admission span: authority, closing, the caller's
// context, durable acceptance — then the reply, and only then the queue (so the
// caller is answered before any model request and before the Session log has the
// message, case 146).
func (a *activationActor) submit(c actor.Context, m *submit) {
	if m.pre && a.c.pre != nil && a.c.preState&preAnswered == 0 {
		a.preAccepted(c, m)
		return
	}
	if !m.first {
		if m.parent == nil || !a.m.live(context.Background(), m.parent) {
			m.answer(acceptRes{err: unauthorized("subagent %q delivery requires the exact live parent agent", a.c.childID())})
			return
		}
		if rec := a.c.rec.get(); authorisedSession(m.parent, m.source) != rec.parentSes || m.parentKind != rec.parentKind {
			m.answer(acceptRes{err: unauthorized("subagent %q belongs to another parent session", a.c.childID())})
			return
		}
	}
	if a.core.Closing() {
		m.answer(acceptRes{err: closingErr(a.c.childID())})
		return
	}
	if m.ctx != nil && m.ctx.Err() != nil {
		m.answer(acceptRes{err: context.Cause(m.ctx)})
		return
	}
	msg, err := a.accept(m.content, m.source, false)
	if err != nil {
		if errors.Is(err, session.ErrStaleEpoch) { // another activation owns the session now
			a.retire(c, err)
			m.answer(acceptRes{err: a.retired})
			return
		}
		m.answer(acceptRes{err: messages.Errorf(subagent.CodePersistenceUnavailable,
			"subagent %q: the message could not be made durable (%v); it was not accepted", a.c.childID(), err)})
		return
	}
	fault.Yield(PointActivationAccept)
	a.announce()
	m.answer(acceptRes{id: msg.ID})
	a.apply(c, a.core.Admit(msg, true))
}

// preAccepted answers the followup that cold-restored this Activation with its
// message, which the directory accepted with the epoch (Store.ResumeAccept), and
// then queues it. A restarted incarnation answers alone: its restore, from the
// store, queued the message.
func (a *activationActor) preAccepted(c actor.Context, m *submit) {
	held, pre := a.held, a.c.pre
	a.held, a.c.preState = false, a.c.preState|preAnswered
	if a.c.preState&preRecorded == 0 { // else kept until its turn runs (carry.recorded)
		a.c.pre = nil
	}
	fault.Yield(PointActivationAccept)
	a.announce()
	m.answer(acceptRes{id: pre.ID})
	if fault.Point(PointActivationRecordedCrash) {
		panic("activation: planted crash after a cold restore's answer (" + PointActivationRecordedCrash + ")")
	}
	if held {
		a.apply(c, a.core.Admit(*pre, true))
	}
}

// announce emits the subagent/start event once per epoch, at its first acceptance.
func (a *activationActor) announce() {
	if a.c.announce {
		return
	}
	a.c.announce = true
	if rt := a.m.deps.Runtime; rt != nil {
		a.c.runID = rt.Emit(subagent.Event{Type: subagent.EventStart, Provider: a.desc.names.get().provider,
			ID: a.c.childID(), Local: true, Parent: subagent.RefOf(a.c.parent)}).RunID
	}
}

// accept makes a message durable in the inbox journal at this epoch.
func (a *activationActor) accept(content []session.Block, src session.Source, quiet bool) (session.InboxMessage, error) {
	msg := session.InboxMessage{ID: newMessageID(), Content: content,
		Source: src, AcceptedAt: a.m.now(), Quiet: quiet}
	return a.m.deps.Store.Accept(context.Background(), a.c.childID(), a.epoch, msg)
}

// inbox takes a message for this child agent's own loop (its children's notices
// and reports, its jobs' notices): journaled, then queued, waking or not.
func (a *activationActor) inbox(c actor.Context, m *inboxIn) {
	if a.core.Closing() {
		return // the lineage is tearing down: nothing will read it
	}
	content := []session.Block{{Type: "text", Text: m.msg.Text}}
	for _, t := range m.msg.More {
		content = append(content, session.Block{Type: "text", Text: t})
	}
	msg, err := a.accept(content, session.Source{Kind: m.msg.Source.Kind, Form: m.msg.Source.Form,
		SenderSessionID: m.msg.Source.SenderSessionID}, !m.wake)
	if err != nil {
		a.m.logger.Warn(fmt.Sprintf("subagent: %s: an inbox message was not accepted: %s", a.c.childID(), err.Error()))
		return
	}
	a.apply(c, a.core.Admit(msg, m.wake))
}

// interrupt is SPEC §6.4 at the target: authority, then cancel and return.
func (a *activationActor) interrupt(c actor.Context, auth Authority) error {
	kind := "user"
	switch {
	case auth.Ancestor == nil && auth.ParentSession != a.c.parentSes():
		return unauthorized("subagent %q belongs to another parent session", a.c.childID())
	case auth.Ancestor != nil && !a.c.hasAncestor(auth.Ancestor.PID().Id):
		return unauthorized("subagent %q is not a live descendant of agent %q", a.c.childID(), auth.Ancestor.Session())
	case a.core.Closing():
		return nil
	case auth.Ancestor != nil:
		kind = "parent"
	}
	if eff := a.core.Interrupt(); eff.CancelTurn {
		a.stopTurn(&Cancel{Kind: kind})
	}
	return nil
}

// report relays the child's report to its parent of record (SPEC §6.6). The wait
// for the parent's owner actor runs outside Receive.
func (a *activationActor) report(m *report) {
	pid := m.to
	if pid == nil {
		m.reply(acceptRes{err: parentUnavailable()})
		return
	}
	id := "report-" + strconv.FormatUint(msgIDs.Add(1), 10)
	msg := owner.Message{ID: id, Role: "user", Text: "Background subagent " + a.c.childID() + " reported:",
		Source: owner.Source{Kind: "subagent-report", Form: "relay", SenderSessionID: a.c.childID()}}
	for _, b := range m.content {
		msg.More = append(msg.More, b.Text)
	}
	reply := make(chan error, 1)
	a.m.root.Send(pid, &deliver.Relay{Message: msg, Quiet: m.quiet, Reply: reply})
	go func() {
		t := time.NewTimer(relayTimeout)
		defer t.Stop()
		select {
		case err := <-reply:
			if err != nil {
				m.reply(acceptRes{err: err})
				return
			}
			m.reply(acceptRes{id: id})
		case <-t.C:
			m.reply(acceptRes{err: parentUnavailable()})
		}
	}()
}

func parentUnavailable() error {
	return messages.Errorf(subagent.CodeParentUnavailable, "direct parent is not live; report was not delivered")
}
