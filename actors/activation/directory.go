package activation

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/internal/deliver"
	"github.com/troupe-rt/troupe/internal/fault"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/scope"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/supervision"
)

// DefaultRestartGrace is how long a crashed Activation's restart waits for its
// cancelled turn to return (Deps.RestartGrace).
const DefaultRestartGrace = time.Second

// CodeActivationFailed answers a message whose handling crashed the Activation;
// the Activation restarts from the store (the message may have been journaled).
const CodeActivationFailed messages.Code = "ACTIVATION_FAILED"

// Authority is who asks for an interrupt (SPEC §6.4): a user holding the durable
// parent address (ParentSession), or a live ancestor agent (Ancestor).
type Authority struct {
	ParentSession string
	Ancestor      *owner.Agent
}

// The directory's messages.
type (
	startReq struct {
		ctx        context.Context
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
		ctx     context.Context
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
	// liveReq asks for the resident entries of ids (one lookup each).
	liveReq struct {
		ids   []string
		reply chan<- map[string]liveEntry
	}
	drainReq struct {
		reply chan<- struct{}
	}
	drainChildrenReq struct {
		parent *owner.Agent
		ids    []string
		reply  chan<- error
	}
	drainBelowReq struct {
		parents []*owner.Agent
		reply   chan<- struct{}
	}
	firstAccepted struct {
		id  string
		res acceptRes
	}
	settled  struct{ id string }
	refused  struct{ id string }
	disposed struct {
		id       string
		err      error
		notice   *owner.Message
		runID    string
		provider string
		stop     string
		last     string
	}
	gaugeReq struct{ reply chan<- int }
	// inspectReq runs fn on the directory's goroutine, between two messages (the
	// package's tests read its indexes with it).
	inspectReq struct{ fn func(*directoryActor) }
)

// liveEntry is a resident Activation as the directory reports it.
type liveEntry struct {
	pid     *actor.PID
	agent   *owner.Agent
	closing bool
}

// Listed is one child in list_agents.
type Listed struct {
	ID         string
	Status     string // running | idle | ready
	Label      string
	Parent     string
	Depth      int
	Diagnostic string // corrupt | unsupported | unavailable, when it could not be read
}

// pending is an operation waiting for an Activation's first acceptance: a start
// (rolled back on failure) or a cold resume.
type pending struct {
	start  *startReq
	resume *followupReq
}

// entry is a live activation as the directory knows it.
type entry struct {
	id         string
	pid        *actor.PID
	agent      *owner.Agent
	parent     *owner.Agent // the parent incarnation that materialized it
	parentSes  string       // parent session of record
	parentKind string       // and its namespace (session.Header.ParentKind)
	depth      int
	cwd        string
	label      string
	carry      *carry   // what its actor keeps across restarts (the turn in flight's quiet and cancel)
	starting   *pending // the first acceptance is in flight: later operations wait
	closing    bool     // the disposal transaction is open: admission is closed
	forced     bool     // a drain disposes it, whatever it proposed
	waiting    []any    // operations that arrived while starting or closing
}

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

// directoryActor maps child session ids to at most one live Activation, spawns and
// disposes them, and routes every operation to the child's mailbox. It never waits
// on an Activation (a crashed one could not answer); continuations come back as
// messages, and operations on a child that is starting or closing wait in its entry
// (the per-child lock, SPEC §1.3 rule 38).
//
// Its indexes are kept in step by index and unindex, the only places that add or
// remove an entry: every step that finds an entry by its Activation, its child
// agent or its parent agent is a map lookup, never a scan of every entry.
type directoryActor struct {
	m        *Manager
	acts     map[string]*entry
	byAgent  map[string]string            // child agent PID Id → child id
	byPID    map[string]*entry            // Activation PID Id → its entry
	kids     map[string]map[string]*entry // parent agent PID Id → child id → entry
	draining bool
	below    map[string]belowDrain // parent PID Id → its drain: drains below exact parents
	waits    []*drainWait
	spawned  uint64 // Activations spawned, for their unique names
	life     lifecycle
	// failures holds each Activation's recent panics (by PID Id, which a restart
	// keeps), for the restart-intensity decision (supervision.Decide).
	failures map[string][]time.Time
}

func (d *directoryActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *startReq:
		d.start(c, m)
	case *firstAccepted:
		d.firstAccepted(c, m)
	case *followupReq:
		d.followup(c, m)
	case *interruptReq:
		d.interrupt(c, m)
	case *reportReq:
		id, ok := d.byAgent[m.child.PID().Id]
		if !ok || d.acts[id].closing || !d.m.live(context.Background(), m.child) {
			m.reply <- acceptRes{err: unauthorized("agent %q is not a live continuable subagent and cannot report", m.child.Session())}
			return
		}
		reply, e := m.reply, d.acts[id]
		c.Send(e.pid, &report{to: d.recipient(e.parentSes, e.parentKind), content: m.content, quiet: m.quiet,
			reply: func(r acceptRes) { reply <- r }})
	case *liveReq:
		out := make(map[string]liveEntry, len(m.ids))
		for _, id := range m.ids {
			if e := d.acts[id]; e != nil {
				out[id] = liveEntry{pid: e.pid, agent: e.agent, closing: e.closing}
			}
		}
		m.reply <- out
	case *settled:
		d.settled(c, m.id)
	case *refused:
		if e := d.acts[m.id]; e != nil && e.closing && !e.forced {
			e.closing = false
			d.redispatch(c, e)
		}
	case *disposed:
		d.release(c, m)
	case *retire:
		d.retire(c, m.pid)
	case *restartAfterTurn:
		d.restartAfterTurn(m)
	case *drainReq:
		d.draining = true
		for id, e := range d.acts {
			if _, nested := d.byAgent[e.parent.PID().Id]; !nested {
				d.disposeTree(c, id, true)
			}
		}
		reply := m.reply
		d.wait(nil, func() { reply <- struct{}{} })
	case *drainChildrenReq:
		d.drainChildren(c, m)
	case *drainBelowReq:
		d.drainBelow(c, m)
	case *gaugeReq:
		m.reply <- len(d.acts)
	case *footprintReq:
		m.reply <- d.footprint()
	case *belowOver:
		delete(d.below, m.pid)
	case *inspectReq:
		m.fn(d)
	case *actor.Terminated:
		d.terminated(c, m.Who)
		d.activationStopped(c, m.Who)
	case *actor.Started, *actor.Stopping, *actor.Stopped:
		d.ownLifecycle(c)
	}
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
	for cur := parent.PID().Id; cur != ""; {
		if b, ok := d.below[cur]; ok {
			if pid := d.m.registered(b.session); pid != nil && pid.Id == cur {
				return drainingBelow(b.session)
			}
			delete(d.below, cur) // that parent left the registry: the drain is over
			b.end.Detach()
		}
		id, ok := d.byAgent[cur]
		if !ok {
			break
		}
		cur = d.acts[id].parent.PID().Id
	}
	return nil
}

// kindOf is the namespace agent a speaks in as a parent: session.ParentSubagent for
// the agent of one of this directory's Activations (a continuable child), "" for
// any other (a top-level agent). Child ids and top-level session ids may collide as
// strings — a model chooses child ids — so a parent of record is its session and
// this kind together: a child whose id is "P" never speaks for top-level P's
// children, nor P for that child's (docs/THREAT-MODEL.md).
func (d *directoryActor) kindOf(a *owner.Agent) string {
	if _, ok := d.byAgent[a.PID().Id]; ok {
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
	if _, child := d.byAgent[pid.Id]; child != (kind == session.ParentSubagent) {
		return nil
	}
	return pid
}

// parentEntry returns the Activation of a parent agent, if it is one.
func (d *directoryActor) parentEntry(parent *owner.Agent) *entry {
	if id, ok := d.byAgent[parent.PID().Id]; ok {
		return d.acts[id]
	}
	return nil
}

// start is SPEC §6.2 steps 10–12 under the per-child lock: re-check admission, the
// parent and the id, create the session, materialize, submit the first prompt.
// The answer comes with firstAccepted; any failure rolls the child back entirely.
func (d *directoryActor) start(c actor.Context, m *startReq) {
	fail := func(err error) { m.reply <- startRes{err: err} }
	if err := d.admission(m.parent); err != nil {
		fail(err)
		return
	}
	if !d.m.live(context.Background(), m.parent) {
		fail(unauthorized("subagent %q requires the exact live parent agent to start it", m.id))
		return
	}
	pe := d.parentEntry(m.parent)
	if pe != nil && pe.closing {
		fail(messages.Errorf(subagent.CodeActivationClosing,
			"subagent parent %q is being disposed; the child was not established", pe.id))
		return
	}
	if a := d.disposingLineage(m.parent); a != nil {
		fail(messages.Errorf(subagent.CodeActivationClosing,
			"subagent parent %q is being disposed; the child was not established", a.Session()))
		return
	}
	if m.ctx.Err() != nil {
		fail(context.Cause(m.ctx))
		return
	}
	if _, ok := d.acts[m.id]; ok || d.m.registered(m.id) != nil {
		fail(messages.Errorf(subagent.CodeDuplicateChild, "subagent %q already exists", m.id))
		return
	}
	parentDepth, cwd := 0, ""
	if pe != nil {
		parentDepth, cwd = pe.depth, pe.cwd
	} else if d.m.deps.Cwd != nil {
		cwd = d.m.deps.Cwd(m.parent)
	}
	depth := max(parentDepth, m.req.Parent.Depth, m.req.Parent.SubagentDepth) + 1
	if m.req.MaxDepth != nil && int64(depth) > *m.req.MaxDepth {
		fail(&subagent.DepthError{AttemptedDepth: depth, MaxDepth: *m.req.MaxDepth})
		return
	}
	ctx := context.Background()
	var entries []session.Entry
	for _, h := range m.seed {
		entries = append(entries, session.Entry{Kind: session.EntryMessage, Role: h.Role, Content: fromBlocks(h.Content)})
	}
	seedLen := len(entries)
	entries = append(entries, session.Entry{Kind: session.EntryDescriptor, Descriptor: m.descriptor})
	h := session.Header{ID: m.id, ParentSession: m.parent.Session(), ParentKind: d.kindOf(m.parent),
		Origin: "subagent", DelegationDepth: depth,
		SeedLength: seedLen, Cwd: cwd, CreatedAt: d.m.now()}
	if err := d.m.deps.Store.Create(ctx, h, entries); err != nil {
		fail(err)
		return
	}
	e, err := d.materialize(c, m.id, m.parent, m.label)
	if err != nil {
		_ = d.m.deps.Store.Delete(ctx, m.id)
		fail(err)
		return
	}
	e.starting = &pending{start: m}
	d.submitFirst(c, e, &submit{parent: m.parent, parentKind: d.kindOf(m.parent), content: m.content,
		source: session.Source{Kind: "user"}, ctx: m.ctx, first: true})
}

// submitFirst sends an Activation's first message; its answer comes back to the
// directory as firstAccepted.
func (d *directoryActor) submitFirst(c actor.Context, e *entry, s *submit) {
	if pe := d.parentEntry(e.parent); pe != nil {
		c.Send(pe.pid, &ownChild{id: e.id}) // owned before its first message can be accepted
	}
	root, self, id := c.ActorSystem().Root, c.Self(), e.id
	s.reply = func(r acceptRes) { root.Send(self, &firstAccepted{id: id, res: r}) }
	c.Send(e.pid, s)
}

func (d *directoryActor) firstAccepted(c actor.Context, m *firstAccepted) {
	e := d.acts[m.id]
	if e == nil || e.starting == nil {
		return
	}
	p := e.starting
	e.starting = nil
	switch {
	case p.start != nil && m.res.err != nil:
		d.rollback(c, e)
		p.start.reply <- startRes{err: m.res.err}
	case p.start != nil:
		p.start.reply <- startRes{childID: m.id, messageID: m.res.id}
	default:
		p.resume.reply <- m.res
		if m.res.err != nil && !e.closing {
			// A cold resume that accepted nothing: the Activation is settled.
			d.settled(c, e.id)
		}
	}
	d.redispatch(c, e)
}

// materialize activates the session (a new epoch) and spawns its Activation with
// the child's own agent instance, registered under the child's session id.
func (d *directoryActor) materialize(c actor.Context, id string, parent *owner.Agent, label string) (*entry, error) {
	snap, err := d.m.deps.Store.Activate(context.Background(), id)
	if err != nil {
		return nil, err
	}
	fault.Yield(PointDirectoryMaterialize)
	// Each Activation gets a name of its own: the previous one of the same session
	// may still be stopping (a name is free only once its actor has stopped).
	d.spawned++
	name := "activation-" + id + "-" + strconv.FormatUint(d.spawned, 10)
	pidID := c.Self().Id + "/" + name
	agent, err := d.m.deps.NewAgent(id, &childSurface{root: c.ActorSystem().Root,
		pid: actor.NewPID(c.Self().Address, pidID)})
	if err != nil {
		if messages.CodeOf(err) == messages.CodeNoAgentRegistry {
			return nil, unavailable()
		}
		return nil, err
	}
	ancestry := map[string]bool{parent.PID().Id: true}
	for cur := parent.PID().Id; ; {
		pid, ok := d.byAgent[cur]
		if !ok {
			break
		}
		cur = d.acts[pid].parent.PID().Id
		ancestry[cur] = true
	}
	cr := &carry{id: id, label: label, agent: agent, parent: parent, ancestry: ancestry, owned: map[string]bool{}}
	first := true
	props := actor.PropsFromProducer(func() actor.Actor {
		a := &activationActor{m: d.m, c: cr, core: NewCore()}
		if first { // a restart re-creates the actor, which restores from the store
			a.snap, first = snap, false
		}
		return a
	})
	if d.m.deps.Dispatcher != nil {
		props = props.Configure(actor.WithDispatcher(d.m.deps.Dispatcher))
	}
	pid, err := c.SpawnNamed(props, name)
	if err != nil {
		_ = d.m.deps.Jobs.UnregisterAgent(context.Background(), agent)
		go func() { _ = agent.Dispose(context.Background()) }()
		return nil, err
	}
	d.activationSpawned(c, pid, id)
	e := &entry{id: id, pid: pid, carry: cr, agent: agent, parent: parent, parentSes: snap.Header.ParentSession,
		parentKind: snap.Header.ParentKind, depth: snap.Header.DelegationDepth, cwd: snap.Header.Cwd, label: label}
	d.index(e)
	return e, nil
}

// index adds e to the directory and to every index.
func (d *directoryActor) index(e *entry) {
	d.acts[e.id] = e
	d.byAgent[e.agent.PID().Id] = e.id
	d.byPID[e.pid.Id] = e
	parent := e.parent.PID().Id
	if d.kids[parent] == nil {
		d.kids[parent] = map[string]*entry{}
	}
	d.kids[parent][e.id] = e
}

// unindex removes e from the directory and from every index; an entry that is no
// longer the one recorded for its id (already replaced) leaves the new one alone.
func (d *directoryActor) unindex(e *entry) {
	delete(d.failures, e.pid.Id)
	if d.acts[e.id] == e {
		delete(d.acts, e.id)
	}
	if d.byAgent[e.agent.PID().Id] == e.id {
		delete(d.byAgent, e.agent.PID().Id)
	}
	if d.byPID[e.pid.Id] == e {
		delete(d.byPID, e.pid.Id)
	}
	parent := e.parent.PID().Id
	if set := d.kids[parent]; set[e.id] == e {
		delete(set, e.id)
		if len(set) == 0 {
			delete(d.kids, parent)
		}
	}
}

// forget removes an entry whose Activation is gone or going: the child agent is
// unregistered at once (no caller sees it after this message) and disposed in the
// background, and the parent Activation releases it.
func (d *directoryActor) forget(c actor.Context, e *entry) {
	d.unindex(e)
	_ = d.m.deps.Jobs.UnregisterAgent(context.Background(), e.agent)
	agent := e.agent
	go func() { _ = agent.Dispose(context.Background()) }()
	if pe := d.parentEntry(e.parent); pe != nil {
		c.Send(pe.pid, &dropChild{id: e.id})
	}
}

// rollback undoes a start that failed before acceptance (SPEC §6.2): handle
// disposed, Activation removed, parent ownership released, session deleted, and
// no settlement notice.
func (d *directoryActor) rollback(c actor.Context, e *entry) {
	d.forget(c, e)
	d.stopping(e.pid, supervision.CauseTeardown)
	c.Stop(e.pid)
	_ = d.m.deps.Store.Delete(context.Background(), e.id)
	d.checkWaits()
}

// followup is SPEC §6.3's routing.
func (d *directoryActor) followup(c actor.Context, m *followupReq) {
	if err := d.admission(m.parent); err != nil {
		m.reply <- acceptRes{err: err}
		return
	}
	if e := d.acts[m.id]; e != nil {
		if e.starting == nil && !e.closing && d.plantedResumeCold(c, m, e) {
			return
		}
		if e.closing || e.starting != nil {
			e.waiting = append(e.waiting, m) // retried once the lock is free
			return
		}
		reply := m.reply
		fault.Yield(PointDirectoryRoute)
		c.Send(e.pid, &submit{parent: m.parent, parentKind: d.kindOf(m.parent), content: m.content, source: m.source, ctx: m.ctx,
			reply: func(r acceptRes) { reply <- r }})
		return
	}
	// Cold resume from the store; the provider is not called.
	if m.ctx.Err() != nil {
		m.reply <- acceptRes{err: context.Cause(m.ctx)}
		return
	}
	head, err := d.m.deps.Store.Head(m.ctx, m.id) // the log is read once, by Activate
	if err != nil {
		if m.ctx.Err() != nil {
			m.reply <- acceptRes{err: context.Cause(m.ctx)}
			return
		}
		m.reply <- acceptRes{err: messages.Errorf(subagent.CodeNotResumable, "subagent %q is unavailable", m.id)}
		return
	}
	if !d.m.live(context.Background(), m.parent) {
		m.reply <- acceptRes{err: unauthorized("subagent %q delivery requires the exact live parent agent", m.id)}
		return
	}
	if head.Header.ParentSession != authorisedSession(m.parent, m.source) || head.Header.ParentKind != d.kindOf(m.parent) {
		m.reply <- acceptRes{err: unauthorized("subagent %q belongs to another parent session", m.id)}
		return
	}
	desc, err := ParseDescriptor(head.Descriptor)
	if err != nil || desc.Mode != "continuable" {
		if err != nil && desc.Version == DescriptorVersion {
			m.reply <- acceptRes{err: err} // a corrupt current-version descriptor
			return
		}
		m.reply <- acceptRes{err: messages.Errorf(subagent.CodeNotResumable,
			"subagent %q has no supported continuation state and cannot be resumed; do not retry send_message with this id", m.id)}
		return
	}
	if pe := d.parentEntry(m.parent); pe != nil && pe.closing {
		m.reply <- acceptRes{err: messages.Errorf(subagent.CodeActivationClosing,
			"subagent parent %q is being disposed; the child was not established", pe.id)}
		return
	}
	if a := d.disposingLineage(m.parent); a != nil {
		m.reply <- acceptRes{err: messages.Errorf(subagent.CodeActivationClosing,
			"subagent parent %q is being disposed; the child was not established", a.Session())}
		return
	}
	e, err := d.materialize(c, m.id, m.parent, desc.Label)
	if err != nil {
		m.reply <- acceptRes{err: err}
		return
	}
	e.starting = &pending{resume: m}
	d.submitFirst(c, e, &submit{parent: m.parent, parentKind: d.kindOf(m.parent), content: m.content, source: m.source, ctx: m.ctx})
}

// redispatch runs again the operations that waited on e's lock.
func (d *directoryActor) redispatch(c actor.Context, e *entry) {
	ops := e.waiting
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
	set := d.kids[parent.PID().Id]
	out := make([]*entry, 0, len(set))
	for _, e := range set {
		out = append(out, e)
	}
	return out
}

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
		d.disposeTree(c, ch.id, keep)
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
		d.subtree(ch.id, into)
	}
}

// lineageClosing reports whether the agent with this PID (a, its handle, if known)
// is tearing down its lineage: the manager drains, a drain below it (or an
// ancestor) is in force, it or an ancestor Activation is being disposed, or the
// scope disposal — the teardown (SPEC §1.3 rule 26) — of it or of an agent above it
// has begun (SPEC §6.5's inject lane).
func (d *directoryActor) lineageClosing(pidID string, a *owner.Agent) bool {
	if d.draining || (a != nil && a.Scope().Disposed()) {
		return true
	}
	for cur := pidID; cur != ""; {
		if _, ok := d.below[cur]; ok {
			return true
		}
		id, ok := d.byAgent[cur]
		if !ok {
			return false
		}
		e := d.acts[id]
		if e.closing || e.agent.Scope().Disposed() || e.parent.Scope().Disposed() {
			return true
		}
		cur = e.parent.PID().Id
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
		id, ok := d.byAgent[cur.PID().Id]
		if !ok {
			return nil
		}
		cur = d.acts[id].parent
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
	pid := d.recipient(e.parentSes, e.parentKind)
	if pid == nil {
		return
	}
	var recipient *owner.Agent // its handle, when the directory has it
	if id, ok := d.byAgent[pid.Id]; ok {
		recipient = d.acts[id].agent
	} else if e.parent.PID().Equal(pid) {
		recipient = e.parent
	}
	closing := d.lineageClosing(pid.Id, recipient)
	if id, ok := d.byAgent[pid.Id]; ok {
		c.Send(d.acts[id].pid, &inboxIn{msg: msg, wake: !closing})
		return
	}
	c.Send(pid, &deliver.ChildNotice{ChildID: e.id, Message: msg, LineageClosing: closing})
}

// retire stops an Activation that asked to (its epoch was fenced or its restore
// failed): admission to it closes — new operations wait in its entry and run again,
// as a cold resume, once it has terminated — and it is poisoned, so the submits
// already sent to it are answered (refused) before it stops.
func (d *directoryActor) retire(c actor.Context, pid *actor.PID) {
	if e := d.byPID[pid.Id]; e != nil && e.pid.Equal(pid) {
		e.closing, e.forced = true, true
		c.Poison(pid)
	}
}

// terminated handles an Activation that stopped without completing a disposal (a
// restart intensity exceeded, a restore that failed): it is forgotten, and its
// pending and waiting operations are answered.
func (d *directoryActor) terminated(c actor.Context, who *actor.PID) {
	e := d.byPID[who.Id]
	if e == nil {
		return // released or rolled back before it stopped
	}
	d.m.logger.Warn(fmt.Sprintf("subagent: activation %s stopped unexpectedly; its child agent is disposed", e.id))
	d.forget(c, e)
	if p := e.starting; p != nil {
		err := messages.Errorf(CodeActivationFailed, "subagent %q activation failed; the message was not accepted", e.id)
		if p.start != nil {
			_ = d.m.deps.Store.Delete(context.Background(), e.id)
			p.start.reply <- startRes{err: err}
		} else {
			p.resume.reply <- acceptRes{err: err}
		}
	}
	d.redispatch(c, e)
	d.checkWaits()
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
		if e.parentSes != m.parent.Session() || e.parentKind != d.kindOf(m.parent) {
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
			d.subtree(ch.id, targets)
			d.disposeTree(c, ch.id, false)
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

// HandleFailure makes the directory its Activations' supervisor (DESIGN
// "Supervision"): the message being handled is answered with ACTIVATION_FAILED,
// and the Activation restarts — its actor is re-created and restores from the
// store, with the turn in flight recorded aborted and the queued messages kept —
// unless its restart intensity is spent (Deps.Restarts, by default more than 3
// failures within 10 s, decided by supervision.Decide); then it stops.
func (d *directoryActor) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID,
	rs *actor.RestartStatistics, reason any, message any) {
	id := ""
	if e := d.byPID[child.Id]; e != nil {
		id = e.id
	}
	err := messages.Errorf(CodeActivationFailed,
		"subagent %q activation failed while handling the message (%v); it restarts from its persisted session", id, reason)
	switch m := message.(type) {
	case *submit:
		m.reply(acceptRes{err: err})
	case *interrupt:
		m.reply(err)
	case *report:
		m.reply(acceptRes{err: err})
	}
	restart, recent := supervision.Decide(d.failures[child.Id], time.UnixMilli(d.m.now()), d.m.deps.Restarts)
	if !restart {
		delete(d.failures, child.Id)
		d.m.logger.Warn(fmt.Sprintf("subagent: activation %s failed too often and stops: %v", id, reason))
		d.stopping(child, supervision.CausePanic)
		sup.StopChildren(child)
		return
	}
	if d.failures == nil {
		d.failures = map[string][]time.Time{}
	}
	d.failures[child.Id] = recent
	d.m.logger.Warn(fmt.Sprintf("subagent: activation %s panicked and restarts from its persisted session: %v", id, reason))
	if e := d.byPID[child.Id]; e != nil && e.carry.quiet != nil {
		select {
		case <-e.carry.quiet:
		default:
			// A turn is in flight: cancel it and restart once it has returned, so the
			// new incarnation takes its epoch after the old turn is over (the failed
			// actor stays suspended meanwhile; its mailbox keeps what arrives). A
			// runner that ignores cancellation gets RestartGrace; then the restart goes
			// ahead and holds turns until the old one returns (start: Hold).
			e.carry.cancel(&Cancel{Kind: "parent"})
			q, root, self, grace := e.carry.quiet, d.m.root, d.m.pid, d.m.deps.RestartGrace
			if grace <= 0 {
				grace = DefaultRestartGrace
			}
			go func() {
				t := time.NewTimer(grace)
				defer t.Stop()
				select {
				case <-q:
				case <-t.C:
				}
				root.Send(self, &restartAfterTurn{pid: child, sup: sup, reason: reason})
			}()
			return
		}
	}
	d.activationRestarted(child, reason)
	sup.RestartChildren(child)
}

// restartAfterTurn restarts a crashed Activation whose cancelled turn has returned
// (see HandleFailure), unless it stopped meanwhile.
type restartAfterTurn struct {
	pid    *actor.PID
	sup    actor.Supervisor
	reason any
}

func (d *directoryActor) restartAfterTurn(m *restartAfterTurn) {
	if d.byPID[m.pid.Id] == nil {
		return // stopped (a drain or a disposal) while it waited
	}
	d.activationRestarted(m.pid, m.reason)
	m.sup.RestartChildren(m.pid)
}

// list is list_agents: parent's continuable children (or all its descendants) from
// the store, with the residency of the live ones. It runs on the caller's goroutine.
// The store's heads are read once (every session, in id order) into an index of children by
// parent session, so descendants cost one pass, not one pass per level or child.
func (m *Manager) list(ctx context.Context, parent *owner.Agent, kind string, descendants bool) ([]Listed, error) {
	ids, err := m.deps.Store.IDs(ctx)
	if err != nil {
		return nil, err
	}
	byParent := map[string][]session.Head{}
	for _, id := range ids {
		if h, err := m.deps.Store.Head(ctx, id); err == nil {
			byParent[h.Header.ParentSession] = append(byParent[h.Header.ParentSession], h)
		}
	}
	out := []Listed{}
	seen := map[string]bool{parent.Session(): true} // a corrupt store's cycle is walked once
	var walk func(parent, kind string)
	walk = func(parent, kind string) {
		for _, s := range byParent[parent] {
			id := s.Header.ID
			if seen[id] || s.Header.ParentKind != kind { // a same-named parent in the other namespace
				continue
			}
			seen[id] = true
			out = append(out, listed(s, parent))
			if descendants {
				walk(id, session.ParentSubagent)
			}
		}
	}
	walk(parent.Session(), kind)
	if err := ctx.Err(); err != nil {
		return nil, job.Aborted(ctx)
	}
	m.addResidency(ctx, out)
	return out, nil
}

// listed is a stored child as list_agents shows it before residency: ready, with
// its label, or a diagnostic when its descriptor cannot be read.
func listed(s session.Head, parent string) Listed {
	l := Listed{ID: s.Header.ID, Status: "ready", Parent: parent, Depth: s.Header.DelegationDepth}
	desc, err := ParseDescriptor(s.Descriptor)
	switch {
	case err != nil && desc.Version == DescriptorVersion:
		l.Diagnostic = "corrupt"
	case err != nil || desc.Mode != "continuable":
		l.Diagnostic = "unsupported"
	default:
		l.Label = desc.Label
	}
	return l
}

// addResidency marks the listed children that have a resident Activation idle or
// running, asking the directory about these ids only.
func (m *Manager) addResidency(ctx context.Context, out []Listed) {
	if len(out) == 0 {
		return
	}
	ids := make([]string, len(out))
	for i, l := range out {
		ids[i] = l.ID
	}
	live := m.resident(ctx, ids...)
	for i := range out {
		e, ok := live[out[i].ID]
		if !ok {
			continue
		}
		if st, ok := m.status(e.pid); ok {
			out[i].Status = "idle"
			if st.Residency == Running {
				out[i].Status = "running"
			}
		}
	}
}

// The directory's part of the supervision tree (package supervision): its own
// spawn and stop, and each Activation's spawn, restarts and stop — every event of an
// Activation comes from the directory, its supervisor, so they arrive in order.
// Nothing is sent when Deps.Inspector is nil.

// lifecycle is what the directory keeps to report its Activations' stops.
type lifecycle struct {
	prefix   string                       // "directory/": an Activation's PID id is prefix + its node id
	shutdown bool                         // the directory is stopping: its Activations stop with it
	causes   map[string]supervision.Cause // Activation PID id → why the directory is stopping it
}

func (d *directoryActor) inspector() *actor.PID { return d.m.deps.Inspector }

func (d *directoryActor) activationRef(pid *actor.PID) supervision.Ref {
	return supervision.Ref{Kind: supervision.KindActivation, ID: strings.TrimPrefix(pid.Id, d.life.prefix)}
}

// ownLifecycle reports the directory's own spawn and stop.
func (d *directoryActor) ownLifecycle(c actor.Context) {
	self := supervision.Ref{Kind: supervision.KindDirectory, ID: c.Self().Id}
	switch c.Message().(type) {
	case *actor.Started:
		d.life.prefix = c.Self().Id + "/"
		supervision.Emit(c, d.inspector(), supervision.Event{Kind: supervision.Spawned, Node: self, Actor: c.Self().Id})
	case *actor.Stopping:
		d.life.shutdown = true
	case *actor.Stopped:
		supervision.Emit(c, d.inspector(), supervision.Event{Kind: supervision.Stopped, Node: self, Cause: supervision.CauseTeardown})
	}
}

func (d *directoryActor) activationSpawned(c actor.Context, pid *actor.PID, session string) {
	supervision.Emit(c, d.inspector(), supervision.Event{Kind: supervision.Spawned, Node: d.activationRef(pid),
		Parent: supervision.Ref{Kind: supervision.KindDirectory, ID: c.Self().Id}, Actor: pid.Id, Session: session})
}

// activationRestarted is called from HandleFailure, on the directory's goroutine
// between two messages: the root context sends in the same order as c would.
func (d *directoryActor) activationRestarted(pid *actor.PID, reason any) {
	supervision.Emit(d.m.root, d.inspector(), supervision.Event{Kind: supervision.Restarted, Node: d.activationRef(pid),
		Cause: supervision.CausePanic, Detail: fmt.Sprint(reason)})
}

// stopping records why the directory stops an Activation: a crash past the restart
// intensity (panic), a forced disposal or a rollback (teardown). An Activation that
// settled and was released stops with cause none.
func (d *directoryActor) stopping(pid *actor.PID, cause supervision.Cause) {
	if d.inspector() == nil {
		return
	}
	if d.life.causes == nil {
		d.life.causes = map[string]supervision.Cause{}
	}
	d.life.causes[pid.Id] = cause
}

func (d *directoryActor) activationStopped(c actor.Context, pid *actor.PID) {
	if d.inspector() == nil {
		return
	}
	cause, ok := d.life.causes[pid.Id]
	delete(d.life.causes, pid.Id)
	if !ok && d.life.shutdown {
		cause = supervision.CauseTeardown
	}
	supervision.Emit(c, d.inspector(), supervision.Event{Kind: supervision.Stopped, Node: d.activationRef(pid), Cause: cause})
}
