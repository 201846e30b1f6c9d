package activation

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
)

// Authority is who asks for an interrupt (SPEC §6.4): a user holding the durable
// parent address (ParentSession), or a live ancestor agent (Ancestor).
type Authority struct {
	ParentSession string
	Ancestor      *owner.Agent
}

// The directory's messages.
type (
	startReq struct {
		parent     *owner.Agent
		id         string
		label      string
		descriptor json.RawMessage
		seed       []subagent.Message
		req        subagent.Request
		content    []session.Block
		reply      chan<- startRes
	}
	startRes struct {
		childID, messageID string
		err                error
	}
	followupReq struct {
		parent  *owner.Agent
		id      string
		content []session.Block
		source  session.Source
		reply   chan<- acceptRes
	}
	interruptReq struct {
		target string
		auth   Authority
		reply  chan<- error
	}
	reportReq struct {
		child   *owner.Agent
		content []session.Block
		quiet   bool
		reply   chan<- acceptRes
	}
	listReq struct {
		parent      *owner.Agent
		descendants bool
		reply       chan<- listRes
	}
	listRes struct {
		items []Listed
		err   error
	}
	drainReq struct{ reply chan<- struct{} }
	settled  struct{ id string }
	disposed struct {
		id  string
		err error
	}
	gaugeReq struct{ reply chan<- int }
)

// Listed is one child in list_agents.
type Listed struct {
	ID         string
	Status     string // running | idle | ready
	Label      string
	Parent     string
	Depth      int
	Diagnostic string // corrupt | unsupported | unavailable, when it could not be read
}

// entry is a live activation as the directory knows it.
type entry struct {
	pid       *actor.PID
	agent     *owner.Agent
	parent    string // parent session of record
	parentPID string // the parent incarnation that materialized it
	depth     int
	label     string
	closing   bool
	waiting   []any // operations that arrived during disposal, re-dispatched after it
}

// directoryActor maps child session ids to at most one live Activation, spawns and
// disposes them, and routes every operation to the child's mailbox.
type directoryActor struct {
	m        *Manager
	acts     map[string]*entry
	byAgent  map[string]string // child agent PID → child id
	draining bool
	drains   []chan<- struct{}
}

func (d *directoryActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *startReq:
		m.reply <- d.start(c, m)
	case *followupReq:
		d.followup(c, m)
	case *interruptReq:
		d.interrupt(c, m)
	case *reportReq:
		id, ok := d.byAgent[m.child.PID().String()]
		if !ok || d.acts[id].closing {
			m.reply <- acceptRes{err: unauthorized("agent %q is not a live continuable subagent and cannot report", m.child.Session())}
			return
		}
		c.Send(d.acts[id].pid, &report{content: m.content, quiet: m.quiet, reply: m.reply})
	case *listReq:
		m.reply <- d.list(c, m)
	case *settled:
		if e := d.acts[m.id]; e != nil && !e.closing {
			e.closing = true
			c.Send(e.pid, &beginDispose{})
		}
	case *disposed:
		d.release(c, m)
	case *drainReq:
		d.draining = true
		d.drains = append(d.drains, m.reply)
		for _, e := range d.acts {
			if !e.closing {
				e.closing = true
				c.Send(e.pid, &beginDispose{})
			}
		}
		d.checkDrained()
	case *gaugeReq:
		m.reply <- len(d.acts)
	}
}

func draining() error {
	return messages.Errorf(subagent.CodeDraining, "continuable subagents are draining; the operation was not admitted")
}

// parentDepth is the delegation depth of a parent agent: its activation's, or 0.
func (d *directoryActor) parentDepth(parent *owner.Agent) int {
	if id, ok := d.byAgent[parent.PID().String()]; ok {
		return d.acts[id].depth
	}
	return 0
}

// start is SPEC §6.2 steps 10–12 under the per-child lock (this actor): re-check
// admission and id, create the session, materialize, accept the first prompt. Any
// failure rolls the child back entirely.
func (d *directoryActor) start(c actor.Context, m *startReq) startRes {
	if d.draining {
		return startRes{err: draining()}
	}
	if !d.m.live(m.parent) {
		return startRes{err: unauthorized("subagent %q requires the exact live parent agent to start it", m.id)}
	}
	if id, ok := d.byAgent[m.parent.PID().String()]; ok && d.acts[id].closing {
		return startRes{err: messages.Errorf(subagent.CodeActivationClosing,
			"subagent parent %q is being disposed; the child was not established", id)}
	}
	if _, ok := d.acts[m.id]; ok {
		return startRes{err: messages.Errorf(subagent.CodeDuplicateChild, "subagent %q already exists", m.id)}
	}
	depth := max(d.parentDepth(m.parent), m.req.Parent.Depth, m.req.Parent.SubagentDepth) + 1
	if m.req.MaxDepth != nil && int64(depth) > *m.req.MaxDepth {
		return startRes{err: &subagent.DepthError{AttemptedDepth: depth, MaxDepth: *m.req.MaxDepth}}
	}
	ctx := context.Background()
	var entries []session.Entry
	for _, h := range m.seed {
		entries = append(entries, session.Entry{Kind: session.EntryMessage, Role: h.Role, Content: fromBlocks(h.Content)})
	}
	seedLen := len(entries)
	entries = append(entries, session.Entry{Kind: session.EntryDescriptor, Descriptor: m.descriptor})
	h := session.Header{ID: m.id, ParentSession: m.parent.Session(), Origin: "subagent", DelegationDepth: depth,
		SeedLength: seedLen, CreatedAt: d.m.now()}
	if err := d.m.deps.Store.Create(ctx, h, entries); err != nil {
		return startRes{err: err}
	}
	e, err := d.materialize(c, m.id, m.parent, m.label)
	if err != nil {
		_ = d.m.deps.Store.Delete(ctx, m.id)
		return startRes{err: err}
	}
	if pid, ok := d.parentActivation(m.parent); ok {
		c.Send(pid, &ownChild{id: m.id}) // owned before its first message can be accepted
	}
	reply := make(chan acceptRes, 1)
	c.Send(e.pid, &submit{content: m.content, source: session.Source{Kind: "user"}, reply: reply, firstMsg: true})
	res := <-reply
	if res.err != nil {
		d.rollback(c, m.id)
		return startRes{err: res.err}
	}
	return startRes{childID: m.id, messageID: res.id}
}

func (d *directoryActor) parentActivation(parent *owner.Agent) (*actor.PID, bool) {
	if id, ok := d.byAgent[parent.PID().String()]; ok {
		return d.acts[id].pid, true
	}
	return nil, false
}

// materialize activates the session (a new epoch) and spawns its Activation with
// the child's own agent instance, registered under the child's session id.
func (d *directoryActor) materialize(c actor.Context, id string, parent *owner.Agent, label string) (*entry, error) {
	snap, err := d.m.deps.Store.Activate(context.Background(), id)
	if err != nil {
		return nil, err
	}
	agent, err := d.m.deps.NewAgent(id)
	if err != nil {
		return nil, err
	}
	ancestry := map[string]bool{parent.PID().String(): true}
	for pidStr := d.byAgent[parent.PID().String()]; pidStr != ""; {
		e := d.acts[pidStr]
		ancestry[e.parentPID] = true
		pidStr = d.byAgent[e.parentPID]
	}
	a := &activationActor{m: d.m, id: id, label: label, snap: snap, core: NewCore(), agent: agent, ancestry: ancestry}
	props := actor.PropsFromProducer(func() actor.Actor { return a })
	if d.m.deps.Dispatcher != nil {
		props = props.Configure(actor.WithDispatcher(d.m.deps.Dispatcher))
	}
	pid, err := c.SpawnNamed(props, "activation-"+id)
	if err != nil {
		_ = agent.Dispose(context.Background())
		return nil, err
	}
	e := &entry{pid: pid, agent: agent, parent: snap.Header.ParentSession, parentPID: parent.PID().String(),
		depth: snap.Header.DelegationDepth, label: label}
	d.acts[id] = e
	d.byAgent[agent.PID().String()] = id
	return e, nil
}

func (d *directoryActor) rollback(c actor.Context, id string) {
	e := d.acts[id]
	delete(d.acts, id)
	delete(d.byAgent, e.agent.PID().String())
	c.Stop(e.pid)
	go func() { _ = e.agent.Dispose(context.Background()) }()
	if parentID, ok := d.byAgent[e.parentPID]; ok {
		c.Send(d.acts[parentID].pid, &dropChild{id: id})
	}
	_ = d.m.deps.Store.Delete(context.Background(), id)
}

// followup is SPEC §6.3's routing.
func (d *directoryActor) followup(c actor.Context, m *followupReq) {
	if d.draining {
		m.reply <- acceptRes{err: draining()}
		return
	}
	if e := d.acts[m.id]; e != nil {
		if e.closing {
			e.waiting = append(e.waiting, m) // retried (a cold resume) once disposal is done
			return
		}
		c.Send(e.pid, &submit{parent: m.parent, content: m.content, source: m.source, reply: m.reply})
		return
	}
	// Cold resume from the store; the provider is not called.
	snap, err := d.m.deps.Store.Load(context.Background(), m.id)
	if err != nil {
		m.reply <- acceptRes{err: messages.Errorf(subagent.CodeNotResumable, "subagent %q is unavailable", m.id)}
		return
	}
	if !d.m.live(m.parent) {
		m.reply <- acceptRes{err: unauthorized("subagent %q delivery requires the exact live parent agent", m.id)}
		return
	}
	if snap.Header.ParentSession != m.parent.Session() {
		m.reply <- acceptRes{err: unauthorized("subagent %q belongs to another parent session", m.id)}
		return
	}
	desc, err := ParseDescriptor(snap.FirstDescriptor())
	if err != nil || desc.Mode != "continuable" {
		if err != nil && desc.Version == DescriptorVersion {
			m.reply <- acceptRes{err: err} // a corrupt current-version descriptor
			return
		}
		m.reply <- acceptRes{err: messages.Errorf(subagent.CodeNotResumable,
			"subagent %q has no supported continuation state and cannot be resumed; do not retry send_message with this id", m.id)}
		return
	}
	e, err := d.materialize(c, m.id, m.parent, desc.Label)
	if err != nil {
		m.reply <- acceptRes{err: err}
		return
	}
	if pid, ok := d.parentActivation(m.parent); ok {
		c.Send(pid, &ownChild{id: m.id})
	}
	c.Send(e.pid, &submit{parent: m.parent, content: m.content, source: m.source, reply: m.reply})
}

// interrupt is SPEC §6.4's admission: ancestor checks before the lookup, then the
// target's own checks; returns once admitted.
func (d *directoryActor) interrupt(c actor.Context, m *interruptReq) {
	if a := m.auth.Ancestor; a != nil {
		if !d.m.live(a) {
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
	c.Send(e.pid, &interrupt{auth: m.auth, reply: m.reply})
}

// release completes a disposal: the activation is gone, its parent activation (if
// any) releases it, and operations that waited run again (a followup cold-resumes).
func (d *directoryActor) release(c actor.Context, m *disposed) {
	e := d.acts[m.id]
	if e == nil {
		return
	}
	if m.err != nil {
		d.m.logger.Warn(fmt.Sprintf("subagent: ACTIVATION_TEARDOWN_FAILED for %s: %s", m.id, m.err.Error()))
	}
	delete(d.acts, m.id)
	delete(d.byAgent, e.agent.PID().String())
	c.Stop(e.pid)
	if parentID, ok := d.byAgent[e.parentPID]; ok {
		c.Send(d.acts[parentID].pid, &dropChild{id: m.id})
	}
	for _, op := range e.waiting {
		c.Send(c.Self(), op)
	}
	d.checkDrained()
}

func (d *directoryActor) checkDrained() {
	if d.draining && len(d.acts) == 0 {
		for _, r := range d.drains {
			r <- struct{}{}
		}
		d.drains = nil
	}
}

// list is list_agents: the caller's continuable children (or all descendants) from
// the store, with the residency of the live ones.
func (d *directoryActor) list(c actor.Context, m *listReq) listRes {
	ctx := context.Background()
	ids, err := d.m.deps.Store.IDs(ctx)
	if err != nil {
		return listRes{err: err}
	}
	headers := map[string]session.Snapshot{}
	for _, id := range ids {
		if s, err := d.m.deps.Store.Load(ctx, id); err == nil {
			headers[id] = s
		}
	}
	var out []Listed
	var walk func(parent string)
	walk = func(parent string) {
		for _, id := range ids {
			s, ok := headers[id]
			if !ok || s.Header.ParentSession != parent {
				continue
			}
			l := Listed{ID: id, Status: "ready", Parent: parent, Depth: s.Header.DelegationDepth}
			desc, err := ParseDescriptor(s.FirstDescriptor())
			switch {
			case err != nil && desc.Version == DescriptorVersion:
				l.Diagnostic = "corrupt"
			case err != nil || desc.Mode != "continuable":
				l.Diagnostic = "unsupported"
			default:
				l.Label = desc.Label
			}
			if e := d.acts[id]; e != nil {
				reply := make(chan Status, 1)
				c.Send(e.pid, &statusReq{reply: reply})
				if st := <-reply; st.Residency == Running {
					l.Status = "running"
				} else {
					l.Status = "idle"
				}
			}
			out = append(out, l)
			if m.descendants {
				walk(id)
			}
		}
	}
	walk(m.parent.Session())
	return listRes{items: out}
}
