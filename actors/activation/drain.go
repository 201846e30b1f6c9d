package activation

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/scope"
	"github.com/troupe-rt/troupe/subagent"
)

// Drains (SPEC §6.7): admission while the manager or a parent's lineage drains,
// draining a parent's children or everything below it, and the waits for them.

// belowDrain is a drain below one exact parent (SPEC §6.7), in force until that
// parent leaves the registry. end is its effect in the parent's scope: the parent's
// disposal (its teardown, which itself closes admission below it) ends the record,
// so none is kept per drained incarnation.
type belowDrain struct {
	session string
	end     *scope.Effect
}

// belowOver says a drained parent's scope disposal has begun: its record goes.
type belowOver struct{ pid string }

// drainWait is a caller waiting until none of ids (nil: none at all) is resident.
type drainWait struct {
	ids  map[string]bool
	done func()
}

func draining() error {
	return messages.Errorf(subagent.CodeDraining, "continuable subagents are draining; the operation was not admitted")
}

func drainingBelow(parent string) error {
	return messages.Errorf(subagent.CodeDraining,
		"continuable subagents below parent %q are draining; the operation was not admitted", parent)
}

// admission is SPEC §6.7's admission for an operation of parent: closed while the
// manager drains, or while a drain below one of parent's lineage is in force.
func (d *directoryActor) admission(parent *owner.Agent) error {
	if d.draining {
		return draining()
	}
	if parent == nil {
		return nil
	}
	for a := parent; a != nil; {
		cur := a.PID().Id
		if b, ok := d.below[cur]; ok {
			if pid := d.m.registered(b.session); pid != nil && pid.Id == cur {
				return drainingBelow(b.session)
			}
			delete(d.below, cur) // that parent left the registry: the drain is over
			b.end.Detach()
		}
		e := d.entryOf(a)
		if e == nil {
			break
		}
		a = e.parent
	}
	return nil
}

// drainChildren is SPEC §6.7's drainContinuableChildren.
func (d *directoryActor) drainChildren(c actor.Context, m *drainChildrenReq) {
	if !d.m.live(context.Background(), m.parent) {
		m.reply <- unauthorized("selected child teardown requires the exact live parent agent")
		return
	}
	targets := map[string]bool{}
	for _, id := range m.ids {
		e := d.acts[id]
		if e == nil {
			continue // absent ids are no-ops
		}
		if e.parentSes() != m.parent.Session() || e.parentKind() != d.kindOf(m.parent) {
			m.reply <- unauthorized("subagent %q is not a direct child of agent %q", id, m.parent.Session())
			return
		}
		targets[id] = true
	}
	for id := range targets {
		d.disposeTree(c, id, false)
	}
	reply := m.reply
	d.wait(targets, func() { reply <- nil })
}

// drainBelow is SPEC §6.7's drainContinuableDescendants: admission closes below
// these exact parents (until each leaves the registry) and their strict
// descendants are disposed child-first.
func (d *directoryActor) drainBelow(c actor.Context, m *drainBelowReq) {
	targets := map[string]bool{}
	for _, p := range m.parents {
		if p == nil || !d.m.live(context.Background(), p) {
			continue
		}
		if key := p.PID().Id; d.below[key].end == nil {
			root, self := c.ActorSystem().Root, c.Self()
			end, err := p.Scope().Add("continuations.drainBelow()", func(context.Context) error {
				root.Send(self, &belowOver{pid: key})
				return nil
			})
			// A parent whose disposal has begun needs no record: disposingLineage
			// already closes admission below it.
			if err == nil {
				d.below[key] = belowDrain{session: p.Session(), end: end}
			}
		}
		for _, ch := range d.children(p) {
			d.subtree(ch.childID(), targets)
			d.disposeTree(c, ch.childID(), false)
		}
	}
	reply := m.reply
	d.wait(targets, func() { reply <- struct{}{} })
}

// wait calls done once none of ids (nil: no Activation at all) is resident.
func (d *directoryActor) wait(ids map[string]bool, done func()) {
	d.waits = append(d.waits, &drainWait{ids: ids, done: done})
	d.checkWaits()
}

func (d *directoryActor) checkWaits() {
	kept := d.waits[:0]
	for _, w := range d.waits {
		if d.resident(w.ids) {
			kept = append(kept, w)
			continue
		}
		w.done()
	}
	d.waits = kept
}

func (d *directoryActor) resident(ids map[string]bool) bool {
	if ids == nil {
		return len(d.acts) > 0
	}
	for id := range ids {
		if d.acts[id] != nil {
			return true
		}
	}
	return false
}
