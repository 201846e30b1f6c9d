package activation

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/internal/deliver"
	"github.com/troupe-rt/troupe/internal/fault"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/supervision"
)

// Disposal and release (SPEC §6.5): an Activation's proposal to dispose itself,
// disposing a subtree child-first, the settlement notice before the release, and
// an Activation's stop.

// settled is an Activation's proposal to dispose itself (SPEC §6.5 watching). The
// directory opens the disposal transaction — closing admission — unless it knows
// the proposal is stale; the Activation confirms or refuses on beginDispose.
func (d *directoryActor) settled(c actor.Context, id string) {
	e := d.acts[id]
	if e == nil || e.closing || e.starting != nil || len(d.kids[e.agent.PID().Id]) > 0 {
		return
	}
	fault.Yield(PointDirectorySettle)
	e.closing = true
	c.Send(e.pid, &beginDispose{})
}

// disposeTree opens a forced disposal of id and everything below it: admission
// closes and turns are cancelled top-down at once; each Activation finishes only
// once its own children are released, so release is child-first.
func (d *directoryActor) disposeTree(c actor.Context, id string, keep bool) {
	e := d.acts[id]
	if e == nil {
		return
	}
	if !e.forced {
		e.closing, e.forced = true, true
		c.Send(e.pid, &beginDispose{force: true, keep: keep})
	}
	for _, ch := range d.children(e.agent) {
		d.disposeTree(c, ch.childID(), keep)
	}
}

// subtree returns id and the ids of every resident descendant.
func (d *directoryActor) subtree(id string, into map[string]bool) {
	e := d.acts[id]
	if e == nil || into[id] {
		return
	}
	into[id] = true
	for _, ch := range d.children(e.agent) {
		d.subtree(ch.childID(), into)
	}
}

// lineageClosing reports whether the agent with this PID (a, its handle, if known)
// is tearing down its lineage: the manager drains, a drain below it (or an
// ancestor) is in force, it or an ancestor Activation is being disposed, or the
// scope disposal — the teardown (SPEC §1.3 rule 26) — of it or of an agent above it
// has begun (SPEC §6.5's inject lane).
func (d *directoryActor) lineageClosing(s string, pid *actor.PID, a *owner.Agent) bool {
	if d.draining || (a != nil && a.Scope().Disposed()) {
		return true
	}
	if _, ok := d.below[pid.Id]; ok {
		return true
	}
	for e := d.agentEntry(s, pid); e != nil; e = d.entryOf(e.parent) {
		if e.closing || e.agent.Scope().Disposed() || e.parent.Scope().Disposed() {
			return true
		}
		if _, ok := d.below[e.parent.PID().Id]; ok {
			return true
		}
	}
	return false
}

// disposingLineage returns the first agent of a's lineage — a, then each agent
// whose Activation holds the one before, up to a top-level agent — whose scope
// disposal has begun: its teardown (SPEC §1.3 rule 26), which closes admission of
// new continuable children below it. nil if none has.
func (d *directoryActor) disposingLineage(a *owner.Agent) *owner.Agent {
	for cur := a; cur != nil; {
		if cur.Scope().Disposed() {
			return cur
		}
		e := d.entryOf(cur)
		if e == nil {
			return nil
		}
		cur = e.parent
	}
	return nil
}

// release completes a disposal (SPEC §6.5 steps 7–10): the Activation is removed,
// the notice is sent while the child is still owned, then its parent Activation
// releases it, the end event is emitted, and operations that waited run again (a
// followup cold-resumes).
func (d *directoryActor) release(c actor.Context, m *disposed) {
	e := d.acts[m.id]
	if e == nil {
		return
	}
	fault.Yield(PointDirectoryRelease)
	if m.err != nil {
		d.m.logger.Warn(fmt.Sprintf("subagent: ACTIVATION_TEARDOWN_FAILED for %s: %s", m.id, m.err.Error()))
	}
	d.unindex(e)
	if e.forced {
		d.stopping(e.pid, supervision.CauseTeardown)
	}
	c.Stop(e.pid)
	if m.notice != nil {
		d.notify(c, e, *m.notice)
	}
	if pe := d.parentEntry(e.parent); pe != nil {
		c.Send(pe.pid, &dropChild{id: m.id})
	}
	if rt := d.m.deps.Runtime; rt != nil && m.runID != "" {
		rt.Emit(subagent.Event{Type: subagent.EventEnd, Provider: m.provider, RunID: m.runID, ID: m.id, Local: true,
			StopReason: m.stop, LastAssistantMessage: m.last, Parent: subagent.RefOf(e.parent)})
	}
	d.redispatch(c, e)
	d.checkWaits()
}

// notify sends the settlement notice to the agent registered for the parent
// session now (dropped silently when there is none). A parent that is itself an
// Activation gets it in its own inbox, ahead of the release (same mailbox order);
// any other parent through its owner actor, which picks the lane.
func (d *directoryActor) notify(c actor.Context, e *entry, msg owner.Message) {
	pid := d.recipient(e.parentSes(), e.parentKind())
	if pid == nil {
		return
	}
	var recipient *owner.Agent // its handle, when the directory has it
	pe := d.agentEntry(e.parentSes(), pid)
	if pe != nil {
		recipient = pe.agent
	} else if e.parent.PID().Equal(pid) {
		recipient = e.parent
	}
	closing := d.lineageClosing(e.parentSes(), pid, recipient)
	if pe != nil {
		c.Send(pe.pid, &inboxIn{msg: msg, wake: !closing})
		return
	}
	c.Send(pid, &deliver.ChildNotice{ChildID: e.childID(), Message: msg, LineageClosing: closing})
}

// retire stops an Activation that asked to (its epoch was fenced or its restore
// failed): admission to it closes — new operations wait in its entry and run again,
// as a cold resume, once it has terminated — and it is poisoned, so the submits
// already sent to it are answered (refused) before it stops.
func (d *directoryActor) retire(c actor.Context, pid *actor.PID) {
	if e := d.byActivation(pid); e != nil {
		e.closing, e.forced = true, true
		c.Poison(pid)
	}
}

// terminated handles an Activation that stopped without completing a disposal (a
// restart intensity exceeded, a restore that failed): it is forgotten, and its
// pending and waiting operations are answered.
func (d *directoryActor) terminated(c actor.Context, who *actor.PID) {
	e := d.byActivation(who)
	if e == nil {
		return // released or rolled back before it stopped
	}
	d.m.logger.Warn(fmt.Sprintf("subagent: activation %s stopped unexpectedly; its child agent is disposed", e.childID()))
	d.forget(c, e)
	if p := e.starting; p != nil {
		err := messages.Errorf(CodeActivationFailed, "subagent %q activation failed; the message was not accepted", e.childID())
		if p.start != nil {
			_ = d.m.deps.Store.Delete(context.Background(), e.childID())
			p.start.reply <- startRes{err: err}
		} else {
			p.resume.refuse(err) // dropped if the Activation answered before it stopped
		}
	}
	d.redispatch(c, e)
	d.checkWaits()
}
