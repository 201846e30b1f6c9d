package activation

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/internal/fault"
	"github.com/troupe-rt/troupe/internal/mailbox"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/supervision"
)

// Bringing an Activation to life under the per-child lock: a start (SPEC §6.2) or a
// cold resume, up to its first acceptance, and the directory's indexes (index and
// unindex, the only places that add or remove an entry).

// pending is an operation waiting for an Activation's first acceptance: a start
// (rolled back on failure) or a cold resume.
type pending struct {
	start  *startReq
	resume *followupReq
}

// parentEntry returns the Activation of a parent agent, if it is one.
func (d *directoryActor) parentEntry(parent *owner.Agent) *entry { return d.entryOf(parent) }

// entryOf returns the entry whose child agent is a, or nil (a is not the agent of
// a resident Activation of this directory).
func (d *directoryActor) entryOf(a *owner.Agent) *entry { return d.agentEntry(a.Session(), a.PID()) }

// agentEntry returns the entry whose child agent has PID pid and session s, or
// nil. A child agent's session is its child id (newChildAgent), so this is the
// entry of id s if its agent is that PID (by Id): the directory keeps no index by
// agent PID (≈ 55 B per Activation). A top-level agent whose session equals a
// child id is told apart by its PID.
func (d *directoryActor) agentEntry(s string, pid *actor.PID) *entry {
	if e := d.acts[s]; e != nil && e.agent.PID().Id == pid.Id {
		return e
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
	if err := d.closingLineage(m.parent); err != nil {
		fail(err)
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
	if pe := d.parentEntry(m.parent); pe != nil {
		parentDepth, cwd = int(pe.depth), pe.cwd()
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

// closingLineage is ACTIVATION_CLOSING if parent's Activation, or one of its
// lineage's, is being disposed (a child cannot be established under it), or nil.
func (d *directoryActor) closingLineage(parent *owner.Agent) error {
	if pe := d.parentEntry(parent); pe != nil && pe.closing {
		return messages.Errorf(subagent.CodeActivationClosing,
			"subagent parent %q is being disposed; the child was not established", pe.childID())
	}
	if a := d.disposingLineage(parent); a != nil {
		return messages.Errorf(subagent.CodeActivationClosing,
			"subagent parent %q is being disposed; the child was not established", a.Session())
	}
	return nil
}

// submitFirst sends an Activation's first message; its answer comes back to the
// directory as firstAccepted, and a cold resume's caller (s.to) has it from the
// Activation (submit.answer).
func (d *directoryActor) submitFirst(c actor.Context, e *entry, s *submit) {
	if pe := d.parentEntry(e.parent); pe != nil {
		c.Send(pe.pid, &ownChild{id: e.childID()}) // owned before its first message can be accepted
	}
	root, self, id := c.ActorSystem().Root, c.Self(), e.childID()
	s.toDirectory = func(r acceptRes) { root.Send(self, &firstAccepted{id: id, res: r}) }
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
	default: // the caller has its answer from the Activation (submit.answer)
		if m.res.err != nil && !e.closing {
			// A cold resume that accepted nothing: the Activation is settled.
			d.settled(c, e.childID())
		}
	}
	d.redispatch(c, e)
}

// materialize resumes the session (a new epoch; Store.Resume, not its log) and spawns its Activation with
// the child's own agent instance, registered under the child's session id.
func (d *directoryActor) materialize(c actor.Context, id string, parent *owner.Agent, label string) (*entry, error) {
	res, err := d.m.deps.Store.Resume(context.Background(), id)
	if err != nil {
		return nil, err
	}
	fault.Yield(PointDirectoryMaterialize)
	return d.newActivation(c, id, parent, label, res.Header, &res, nil, false)
}

// materializeCold resumes the session of a settled child that a followup
// restores and accepts the followup's message (msg) with the new epoch, in one
// commit (Store.ResumeAccept) whose transaction first runs k's refusals on the
// session's head (NOT_RESUMABLE if it has none to read), then spawns its
// Activation, which answers the followup with the message (submit.pre) before
// it can run it. If msg is then the session's only open message, the same
// commit records its turn start (the entries runTurn would append), and the
// Activation runs that turn without a commit of its own once it has answered
// (carry.recorded): one synced commit between the followup and its turn instead
// of two. If no Activation could be spawned, the message is discarded — or, its
// turn start recorded, logged aborted, as a crash right after the commit would
// have left it (it never ran) — and its caller is answered an error.
func (d *directoryActor) materializeCold(c actor.Context, id string, parent *owner.Agent, k *coldCheck,
	msg session.InboxMessage) (*entry, error) {
	ctx := context.Background()
	res, acc, started, err := d.m.deps.Store.ResumeAccept(ctx, id, msg, turnStart(msg), k.check)
	switch {
	case err == nil:
	case !k.decided: // no head to decide on
		return nil, messages.Errorf(subagent.CodeNotResumable, "subagent %q is unavailable", id)
	case k.refused != nil: // k's refusal, as is
		return nil, err
	default:
		return nil, notDurable(id, err)
	}
	fault.Yield(PointDirectoryMaterialize)
	res.ToRun = slices.DeleteFunc(res.ToRun, func(m session.InboxMessage) bool { return m.ID == acc.ID })
	e, err := d.newActivation(c, id, parent, k.label, res.Header, &res, &acc, started)
	if err != nil {
		end := session.Entry{Kind: session.EntryDiscarded, InboxID: acc.ID}
		if started {
			end = session.Entry{Kind: session.EntryTurnAborted, InboxID: acc.ID, StopReason: subagent.StopAborted}
		}
		if derr := d.m.deps.Store.Append(ctx, id, res.Header.Epoch, end); derr != nil {
			d.m.logger.Warn(fmt.Sprintf("subagent: %s: discarding a message no activation accepted failed: %s", id, derr.Error()))
		}
		return nil, err
	}
	return e, nil
}

// notDurable is the answer to a followup whose cold restore's commit failed (the
// message was not accepted, nothing was written): the store's own coded error, or
// PERSISTENCE_UNAVAILABLE, as an Activation answers a message it could not make
// durable — not the store's bare error.
func notDurable(id string, err error) error {
	if messages.CodeOf(err) != "" {
		return err
	}
	return messages.Errorf(subagent.CodePersistenceUnavailable,
		"subagent %q: the message could not be made durable (%v); it was not accepted", id, err)
}

// newActivation makes the child's agent (newChildAgent) and spawns its
// Activation with it (spawnActivation).
func (d *directoryActor) newActivation(c actor.Context, id string, parent *owner.Agent, label string,
	h session.Header, res *session.Resumed, pre *session.InboxMessage, started bool) (*entry, error) {
	agent, surface, err := d.newChildAgent(c, id)
	if err != nil {
		return nil, err
	}
	return d.spawnActivation(c, id, parent, label, agent, surface, h, res, pre, started)
}

// newChildAgent makes the agent instance of a new incarnation of child id, with
// the surface its Activation binds once spawned.
func (d *directoryActor) newChildAgent(c actor.Context, id string) (*owner.Agent, *childSurface, error) {
	surface := &childSurface{root: c.ActorSystem().Root}
	agent, err := d.m.deps.NewAgent(id, surface)
	if err != nil {
		if messages.CodeOf(err) == messages.CodeNoAgentRegistry {
			return nil, nil, unavailable()
		}
		return nil, nil, err
	}
	if agent.Session() != id { // the directory reads the child id off its agent (carry.childID)
		d.dropChildAgent(agent)
		return nil, nil, fmt.Errorf("activation: NewAgent made an agent of session %q for child %q", agent.Session(), id)
	}
	return agent, surface, nil
}

// dropChildAgent undoes newChildAgent for an Activation that was not spawned.
func (d *directoryActor) dropChildAgent(agent *owner.Agent) {
	_ = d.m.deps.Jobs.UnregisterAgent(context.Background(), agent)
	go func() { _ = agent.Dispose(context.Background()) }()
}

// spawnActivation spawns an Activation of session id (header h) with agent (made
// by newChildAgent; disposed here if the spawn fails) whose first incarnation
// starts from res; pre, if not nil, is a message accepted with res's epoch and
// left out of its ToRun, for the submit marked pre to answer and queue, and
// started says that its turn start is recorded already (carry.recorded).
func (d *directoryActor) spawnActivation(c actor.Context, id string, parent *owner.Agent, label string,
	agent *owner.Agent, surface *childSurface, h session.Header, res *session.Resumed, pre *session.InboxMessage,
	started bool) (*entry, error) {
	// Each Activation gets a name of its own: the previous one of the same session
	// may still be stopping (a name is free only once its actor has stopped).
	d.spawned++
	name := activationName(id, d.spawned)
	var up *carry
	if pe := d.parentEntry(parent); pe != nil {
		up = &pe.carry
	}
	e := &entry{carry: carry{label: label, agent: agent, parent: parent, up: up, pre: pre, depth: int32(h.DelegationDepth),
		rec: intern(parentage{parentSes: h.ParentSession, parentKind: h.ParentKind, cwd: h.Cwd})}}
	if started {
		e.carry.preState = preRecorded
	}
	// The first incarnation's restore reaches the producer through d.spawning (see
	// activationProps), for the span of this SpawnNamed.
	d.spawning = spawning{c: &e.carry, res: res}
	pid, err := c.SpawnNamed(d.activationProps(), name)
	d.spawning = spawning{}
	if err != nil {
		d.dropChildAgent(agent)
		return nil, err
	}
	if d.named == "" {
		d.named = strings.TrimSuffix(pid.Id, name)
	}
	surface.bind(pid)
	d.activationSpawned(c, pid, id)
	e.pid = pid
	d.index(e)
	return e, nil
}

// activationName is the name of the n-th Activation the directory spawns, of child
// id: unique per spawn, and the id can be read back (byActivation).
func activationName(id string, n uint64) string {
	return "activation-" + id + "-" + strconv.FormatUint(n, 10)
}

// byActivation returns the entry whose Activation is pid, or nil. It holds no
// index of its own: the child id is read off pid's name (activationName), and the
// entry of that id is the answer only if it is this very Activation (a newer one
// of the same child, or none, is nil).
func (d *directoryActor) byActivation(pid *actor.PID) *entry {
	name, ok := strings.CutPrefix(pid.Id, d.named)
	if !ok || d.named == "" {
		return nil
	}
	name, ok = strings.CutPrefix(name, "activation-")
	i := strings.LastIndexByte(name, '-')
	if !ok || i < 0 {
		return nil
	}
	if e := d.acts[name[:i]]; e != nil && e.pid != nil && e.pid.Id == pid.Id {
		return e
	}
	return nil
}

// spawning is what the producer of the Activation being spawned takes: its carry
// and the first incarnation's restore (activationActor.res); the carry's pre, if
// any, is the message that incarnation holds (activationActor.held).
type spawning struct {
	c   *carry
	res *session.Resumed
}

// activationProps returns the one Props every Activation of this directory is
// spawned with (made on first use): its producer takes each Activation's own data
// from d.spawning. That is race-free because the producer runs only inside
// spawnActivation's SpawnNamed, on the directory's goroutine: protoactor calls it
// synchronously there, and never again for an Activation, which is never
// re-created — the directory, its supervisor, resumes a crashed one and it resets
// itself in place (HandleFailure, activationActor.reincarnate). One Props for all
// rather than one per Activation (its Props and producer closures, ≈ 190 B each).
// Its mailbox is mailbox.NewLinked: a resident Activation is mostly idle, and that
// one holds 80 B and no node when empty (protoactor's lock-free one 176 B, its ring
// buffer ~240 B); it is FIFO as protoactor's are, so the mailbox stays the only FIFO
// of a child.
func (d *directoryActor) activationProps() *actor.Props {
	if d.props == nil {
		m := d.m
		d.props = actor.PropsFromProducer(func() actor.Actor {
			s := d.spawning
			if s.c == nil {
				panic("activation: an Activation's actor was re-created outside its spawn")
			}
			d.spawning = spawning{}
			return &activationActor{m: m, c: s.c, res: s.res, held: s.c.pre != nil}
		}, actor.WithMailbox(mailbox.NewLinked))
		if m.deps.Dispatcher != nil {
			d.props = d.props.Configure(actor.WithDispatcher(m.deps.Dispatcher))
		}
	}
	return d.props
}

// index adds e to the directory and to every index.
func (d *directoryActor) index(e *entry) {
	d.acts[e.childID()] = e
	parent := e.parent.PID().Id
	e.kidAt = int32(len(d.kids[parent]))
	d.kids[parent] = append(d.kids[parent], e)
}

// unindex removes e from the directory and from every index; an entry that is no
// longer the one recorded for its id (already replaced) leaves the new one alone.
func (d *directoryActor) unindex(e *entry) {
	delete(d.failures, e.pid.Id)
	if d.acts[e.childID()] == e {
		delete(d.acts, e.childID())
	}
	parent := e.parent.PID().Id
	if set := d.kids[parent]; int(e.kidAt) < len(set) && set[e.kidAt] == e {
		last := len(set) - 1
		if i := e.kidAt; int(i) != last {
			set[i] = set[last]
			set[i].kidAt = i
		}
		set[last] = nil
		if last == 0 {
			delete(d.kids, parent)
		} else {
			d.kids[parent] = set[:last] // its room stays, as a map's did, until the parent has none
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
		c.Send(pe.pid, &dropChild{id: e.childID()})
	}
}

// rollback undoes a start that failed before acceptance (SPEC §6.2): handle
// disposed, Activation removed, parent ownership released, session deleted, and
// no settlement notice.
func (d *directoryActor) rollback(c actor.Context, e *entry) {
	d.forget(c, e)
	d.stopping(e.pid, supervision.CauseTeardown)
	c.Stop(e.pid)
	_ = d.m.deps.Store.Delete(context.Background(), e.childID())
	d.checkWaits()
}
