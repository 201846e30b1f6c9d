package registry

import (
	"fmt"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/scope"
)

// The observer layers: controllers, OnJobDone and OnJobsChanged registrations per
// scope layer (SPEC §2.10), attached and detached, and the calls that fire them.

const (
	regController regKind = iota
	regJobDone
	regJobsChanged
	regAgents
)

type registration struct {
	kind    regKind
	scope   scope.ID
	done    JobDoneFunc
	changed JobsChangedFunc
}

// serves is the controller gate (SPEC §2.10): a global controller serves everyone;
// otherwise a controller somewhere on the owner's scope chain. Unowned jobs have
// no chain, so only a global controller serves them.
func (r *registryActor) serves(chain []scope.ID) bool {
	if r.controllers[r.cfg.RootScope.ID()] > 0 {
		return true
	}
	for _, id := range chain {
		if r.controllers[id] > 0 {
			return true
		}
	}
	return false
}

func ownerOf(o *ownerEntry) Owner {
	if o == nil {
		return Owner{}
	}
	return Owner{Session: o.session, PID: o.pid}
}

// layersFor returns the observer layers for an owner: the global layer, then the
// owner's scope chain from the farthest ancestor down (SPEC §1.3 rule 12).
func (r *registryActor) layersFor(o *ownerEntry) []scope.ID {
	root := r.cfg.RootScope.ID()
	if o == nil {
		return []scope.ID{root}
	}
	if len(o.chain) > 0 && o.chain[0] == root {
		return o.chain
	}
	return append([]scope.ID{root}, o.chain...)
}

func (r *registryActor) fireChanged(o *ownerEntry) {
	who := ownerOf(o)
	for _, layer := range r.layersFor(o) {
		for _, reg := range r.layers[layer] {
			if reg.kind != regJobsChanged {
				continue
			}
			if err := job.Protect(func() error { reg.changed(who); return nil }); err != nil {
				r.cfg.Logger.Warn("jobs: onJobsChanged listener threw: " + err.Error())
			}
		}
	}
}

func (r *registryActor) fireDone(rec *record) {
	who := ownerOf(rec.owner)
	for _, layer := range r.layersFor(rec.owner) {
		for _, reg := range r.layers[layer] {
			if reg.kind != regJobDone {
				continue
			}
			snap := rec.snapshot()
			if err := job.Protect(func() error { reg.done(snap, who); return nil }); err != nil {
				r.cfg.Logger.Warn(fmt.Sprintf("jobs: onJobDone listener threw for %s: %s", rec.ID, err.Error()))
			}
		}
	}
}

func (r *registryActor) attach(m *attachReq) error {
	reg := &registration{kind: m.kind, scope: m.scope.ID(), done: m.done, changed: m.changed}
	r.regs[m.token] = reg
	switch m.kind {
	case regController:
		r.controllers[reg.scope]++
	case regAgents:
		r.agentMounts++
	default:
		r.layers[reg.scope] = append(r.layers[reg.scope], reg)
	}
	return nil
}

func (r *registryActor) detach(token uint64) {
	reg := r.regs[token]
	if reg == nil {
		return
	}
	delete(r.regs, token)
	switch reg.kind {
	case regController:
		if r.controllers[reg.scope]--; r.controllers[reg.scope] <= 0 {
			delete(r.controllers, reg.scope)
		}
	case regAgents:
		if r.agentMounts--; r.agentMounts == 0 {
			clear(r.agents)
		}
	default:
		l := r.layers[reg.scope]
		for i, x := range l {
			if x == reg {
				l = append(l[:i:i], l[i+1:]...)
				break
			}
		}
		if len(l) == 0 {
			delete(r.layers, reg.scope)
		} else {
			r.layers[reg.scope] = l
		}
	}
}
