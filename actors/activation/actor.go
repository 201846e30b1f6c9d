package activation

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync/atomic"
	"unique"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/internal/fault"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
)

// Cancel is the cause a turn's context is cancelled with (DSH's agent.cancel): kind
// "user" for a user interrupt, "parent" for an ancestor's interrupt and for the
// top-down stop of a disposal or a restart. The queue is always kept (keepInbox).
type Cancel struct{ Kind string }

func (c *Cancel) Error() string { return "subagent turn cancelled ({kind:" + c.Kind + "})" }

// Messages the activation actor accepts (local values; the directory routes them).
type (
	// submit is a followup (or the first prompt). parent is the credential: the
	// exact live parent incarnation; the sender PID is never looked at. ctx is the
	// caller's: it governs everything up to acceptance and nothing after.
	submit struct {
		parent *owner.Agent
		// parentKind is the namespace parent speaks in (directory.kindOf), checked
		// with its session against the header's parent of record.
		parentKind string
		content    []session.Block
		source     session.Source
		ctx        context.Context
		first      bool // the first prompt: the directory checked the parent
		// pre: the followup that cold-restored this Activation, whose message
		// (carry.pre) the directory checked and accepted with the epoch.
		pre bool
		// to is the caller's answer channel (capacity 1), nil for a start's first
		// prompt; toDirectory, if set, hands the answer of an Activation's first
		// message to the directory (firstAccepted). answer reaches both.
		to          chan<- acceptRes
		toDirectory func(acceptRes)
	}
	acceptRes struct {
		id  string
		err error
	}
	interrupt struct {
		auth  Authority
		reply func(error)
	}
	report struct {
		to      *actor.PID // the parent of record's owner actor (directory.recipient); nil: none live
		content []session.Block
		quiet   bool
		reply   func(acceptRes)
	}
	// inboxIn is a message for this child agent's own loop: a settlement notice or
	// report of one of its children, or a job notice. wake is false for inject.
	inboxIn struct {
		msg  owner.Message
		wake bool
	}
	statusReq    struct{}
	ownChild     struct{ id string }
	dropChild    struct{ id string }
	oldTurnDone  struct{}                   // a crashed incarnation's turn has returned
	beginDispose struct{ force, keep bool } // keep: a manager shutdown keeps queued messages
	turnEnded    struct {
		quiet    chan struct{} // the turn's (carry.quiet): its identity
		inbox    string
		res      subagent.Result
		produced []subagent.Message
		state    json.RawMessage // the turn runner's TurnResult.State (nil: none)
	}
	agentGone struct{ err error }
	// historyLoaded is the part of the history the runner of the turn whose
	// channel is quiet read from the store (its first len(msgs) messages), and
	// that turn's input, for the actor to keep.
	historyLoaded struct {
		quiet chan struct{}
		msgs  []subagent.Message
		input subagent.Message
	}
	// retire asks the directory to stop an Activation that can no longer run its
	// session (its epoch was fenced, or its restore failed). The directory holds new
	// operations for the session and poisons the Activation: every submit it had
	// already forwarded is answered first, by the retired Activation, in mailbox order.
	retire struct{ pid *actor.PID }
)

// answer answers m: first the directory, for an Activation's first message (so
// the directory takes its firstAccepted before anything the answered caller sends
// next), then the caller, who reads only the first answer — a submit whose handler
// answered and then panicked is answered again by HandleFailure, and that second
// answer never blocks the directory (answerTo). The caller of a cold resume is
// answered here, by the Activation, not through the directory: one hand-off fewer
// before it returns.
func (m *submit) answer(r acceptRes) {
	if m.toDirectory != nil {
		m.toDirectory(r)
	}
	if m.to != nil {
		answerTo(m.to, r)
	}
}

// answerTo sends r to ch (capacity 1) unless an answer is already there: the
// caller gets the first answer, and a later one never blocks its sender.
func answerTo(ch chan<- acceptRes, r acceptRes) {
	select {
	case ch <- r:
	default:
	}
}

// Status is an activation's view for listings and tests.
type Status struct {
	ID        string
	Residency Residency
	Header    session.Header
	Label     string
	Queued    int  // accepted messages waiting to run
	Parked    bool // an interrupt parked the queue
}

var msgIDs atomic.Uint64

// carry is what an Activation keeps across supervisor restarts of its actor: the
// incarnation of the child agent and what this epoch has announced. Everything else
// is restored from the store. Only the actor (one instance at a time) touches it.
// It holds no copy of the child id (its agent's session, childID) and no set of
// owned children (the core's, which a reincarnation keeps): a directory entry,
// which embeds the carry, fits the 160 B size class (TestEntryFitsItsSizeClass).
type carry struct {
	label  string
	agent  *owner.Agent // the child's own agent: its session is the child id
	parent *owner.Agent // the parent incarnation that materialized it (event scope)
	// up is the carry of the parent's own Activation, if the parent is a continuable
	// child resident at materialization (nil: it is not): the live ancestors then
	// are parent, up.parent, up.up.parent… (hasAncestor). A pointer, not a copy of
	// their PIDs: 8 B, and nothing allocated.
	up    *carry
	runID string           // the subagent/start event's run id, once announced
	final []session.Block  // the last turn's output
	stop  interned[string] // the last turn's stop reason (one of a few: interned)
	// rec is the session header's identity as the directory read it before the
	// spawn (a restore reads the same): its parent of record, that parent's
	// namespace and the cwd — interned together, since the children of one parent
	// share all three (one copy, and 8 B here instead of 32).
	rec interned[parentage]
	// pre is the message of the followup that cold-restored this Activation,
	// accepted with its first epoch (Store.ResumeAccept) and answered by the
	// submit marked pre (preAnswered, set then); nil once answered and, if its
	// turn start is recorded, once that turn has run. A restarted incarnation's
	// restore queues it from the store.
	pre *session.InboxMessage
	// quiet is closed when the last turn's goroutine has returned; while it runs,
	// it is also the turn's identity (turnEnded.quiet: each turn makes its own).
	quiet chan struct{}
	// cancel cancels the last turn's context: the actor's way to stop its running
	// turn (activationActor.turning says whether one runs), and the directory's (with
	// quiet) once the actor has crashed: the crashed actor no longer runs, so it is
	// read safely.
	cancel   context.CancelCauseFunc
	depth    int32 // the header's DelegationDepth (32 bits: 4 B, beside the flags)
	announce bool  // some delivery was accepted in this epoch
	opened   bool  // this epoch opened a turn
	started  bool  // the first incarnation has started
	preState preState
}

// preState is what has become of the carry's pre message.
type preState uint8

const (
	// preAnswered: the submit marked pre has been answered.
	preAnswered preState = 1 << iota
	// preRecorded: pre's turn start and input are in the store already
	// (Store.ResumeAccept recorded them with its acceptance) but its turn has not
	// run yet: runTurn does not record them again, and a restarted incarnation's
	// restore queues it first rather than logging it cut off — it never ran.
	preRecorded
)

// recorded is the inbox id of the message whose turn start is recorded but
// whose turn has not run (preRecorded), or "".
func (c *carry) recorded() string {
	if c.preState&preRecorded == 0 || c.pre == nil {
		return ""
	}
	return c.pre.ID
}

// parentage is the part of a session header that the children of one parent
// share: the parent of record (ParentSession), the namespace it speaks in
// (ParentKind, "" or session.ParentSubagent) and the working directory (Cwd).
type parentage struct{ parentSes, parentKind, cwd string }

// childID is the child's session id: its own agent's session (newChildAgent
// makes the agent of child id with session id).
func (c *carry) childID() string { return c.agent.Session() }

// parentSes, parentKind and cwd read the header's identity (rec).
func (c *carry) parentSes() string  { return c.rec.get().parentSes }
func (c *carry) parentKind() string { return c.rec.get().parentKind }
func (c *carry) cwd() string        { return c.rec.get().cwd }

// hasAncestor reports whether pid (a PID Id) is one of c's live ancestors at its
// materialization: its parent, its parent's parent if that one is a continuable
// child too, and so on.
func (c *carry) hasAncestor(pid string) bool {
	for ; c != nil; c = c.up {
		if c.parent.PID().Id == pid {
			return true
		}
	}
	return false
}

// activationActor is one live continuable child: its session (header, history,
// epoch), the FIFO core, and the turn in flight, run in a goroutine it owns with a
// cancelable context — never inside Receive.
type activationActor struct {
	m     *Manager
	c     *carry
	res   *session.Resumed // the first incarnation's; a restart resumes again
	epoch uint64
	// born is the rest of the session header (its identity fields are the
	// carry's, its epoch is epoch): what Status reports of it.
	born headerRest
	desc turnDesc
	// The model history. Its first base messages are in the store only (the
	// log's first base EntryMessage entries, read on demand: subagent.LazyHistory)
	// and hist holds the messages after them (kept). Until a runner has read the
	// history (historyLoaded: base is 0 from then on and hist is the whole
	// history) or the store has missed some of it, hist is nil: each message is
	// counted in base once the store has it (a turn's input at its start, its
	// output at its end), so an Activation holds no copy of a history its runner
	// never read — and no slice for it (8 B, not 24: the Activation fits 160 B).
	hist  *[]subagent.Message
	state json.RawMessage // the latest provider/state entry (subagent.Turn.State)
	core  Core            // by value: one allocation fewer per Activation

	retired *messages.Error // non-nil once retiring: every request is answered with it
	base    int32           // see hist (32 bits: the Activation fits 160 B)
	crashed bool            // a handler is running, or panicked (see Receive)
	// turning says a turn runs: the one whose carry.quiet is the carry's (an end
	// of another, an earlier incarnation's, is ignored); its cancel is the carry's.
	turning bool
	// held says that carry.pre is the first incarnation's to queue, kept out of
	// its restore until the submit marked pre has been answered (case 146: the
	// caller hears of acceptance before the turn can start). A flag, not a second
	// pointer to the message: the carry has it.
	held bool
}

// headerRest is the part of session.Header an Activation keeps besides the
// carry's copy of its identity (parent of record, depth, cwd), its origin (in
// turnDesc's names) and its epoch.
type headerRest struct {
	createdAt  int64
	seedLength int32 // session.Header's ints, 32 bits here (an Activation fits 160 B)
	version    int32
}

// interned is a value most Activations share (a stop reason; a header's origin
// with a descriptor's provider and model names; the parent of record with its
// namespace and cwd): one copy for all (unique.Make), and 8 B each. The zero
// interned reads as T's zero value.
type interned[T comparable] struct{ h unique.Handle[T] }

func intern[T comparable](v T) interned[T] { return interned[T]{unique.Make(v)} }

func (n interned[T]) get() T {
	if n.h == (unique.Handle[T]{}) {
		var zero T
		return zero
	}
	return n.h.Value()
}

// header returns the session header as of this incarnation's restore.
func (a *activationActor) header() session.Header {
	rec, names := a.c.rec.get(), a.desc.names.get()
	return session.Header{ID: a.c.childID(), ParentSession: rec.parentSes, ParentKind: rec.parentKind,
		Origin: names.origin, DelegationDepth: int(a.c.depth), SeedLength: int(a.born.seedLength), Cwd: rec.cwd,
		CreatedAt: a.born.createdAt, Version: int(a.born.version), Epoch: a.epoch}
}

// turnDesc is the part of the Descriptor an Activation keeps: what its turns and
// events read (not its version, mode, label or cluster record: an idle resident
// Activation holds only what it uses).
type turnDesc struct {
	names interned[descNames]
	more  *turnMore // nil: neither a persona nor a tool filter
}

// descNames are the names most Activations share: the header's origin
// ("subagent", for every child this directory started) and the descriptor's
// provider and agent options. Interned together: 8 B for the four, not 32.
type descNames struct{ origin, provider, agentProvider, agentModel string }

// turnMore is what few descriptors have, held apart so that the rest do not pay
// for it.
type turnMore struct {
	Persona    string
	ToolFilter *subagent.ToolFilter
}

// turnDescOf keeps d's turn fields and the header's origin; a descriptor that
// did not parse keeps what ParseDescriptor returned with its error (nothing, for a
// malformed one).
func turnDescOf(origin string, d Descriptor) turnDesc {
	t := turnDesc{names: intern(descNames{origin: origin, provider: d.Provider, agentProvider: d.AgentProvider, agentModel: d.AgentModel})}
	if d.Persona != "" || d.ToolFilter != nil {
		t.more = &turnMore{Persona: d.Persona, ToolFilter: d.ToolFilter}
	}
	return t
}

// persona returns the descriptor's persona ("" for none).
func (t *turnDesc) persona() string {
	if t.more == nil {
		return ""
	}
	return t.more.Persona
}

// toolFilter returns the descriptor's tool filter (nil for none).
func (t *turnDesc) toolFilter() *subagent.ToolFilter {
	if t.more == nil {
		return nil
	}
	return t.more.ToolFilter
}

// Receive handles one message. A handler that panicked leaves crashed set: the
// directory, the Activation's supervisor, then either stops it or resumes it
// (HandleFailure, resume), delivering Started to it again as a system message
// first. A crashed Activation takes that Started as its reincarnation: it resets
// itself in place (reincarnate) — what protoactor's restart does by re-creating the
// actor and invoking Started before any queued message, without re-creating it
// (every Activation shares one Props, see directoryActor.activationProps).
//
// The reset runs on a system message, never on a queued one: a reset that panics
// (its restore crashed) must not consume a message it was not handling — a
// beginDispose or agentGone lost there left its Activation resident for good and
// the followups waiting on its disposal unanswered.
func (a *activationActor) Receive(c actor.Context) {
	if _, ok := c.Message().(*actor.Started); ok && a.crashed {
		a.reincarnate(c)
		a.crashed = false
		return
	}
	a.crashed = true
	a.receive(c)
	a.crashed = false
}

// reincarnate resets a crashed Activation in place, as a new incarnation of its
// actor: its cut-off turn is cancelled (the directory has cancelled it already),
// everything but its carry and the children it owns is dropped, and it restores
// from the store with a new epoch (start), holding turns until the crashed turn
// has returned. A panic in start leaves crashed set, and the next resume
// reincarnates it again — still owning its children: the set is kept as it is
// (the core's own map, which ownChild and dropChild change in one step each), not
// rebuilt by start, so no crash in between can lose it.
func (a *activationActor) reincarnate(c actor.Context) {
	a.stopTurn(&Cancel{Kind: "parent"})
	*a = activationActor{m: a.m, c: a.c, crashed: true, core: a.core.owning()}
	a.start(c)
}

func (a *activationActor) receive(c actor.Context) {
	if a.retired != nil {
		a.refuse(c.Message())
		return
	}
	switch m := c.Message().(type) {
	case *actor.Started:
		a.start(c)
	case *submit:
		a.submit(c, m)
	case *interrupt:
		m.reply(a.interrupt(c, m.auth))
	case *report:
		a.report(m)
	case *inboxIn:
		a.inbox(c, m)
	case *statusReq:
		c.Respond(Status{ID: a.c.childID(), Residency: a.core.Residency(), Header: a.header(), Label: a.c.label,
			Queued: len(a.core.Queued()), Parked: a.core.Parked()})
	case *ownChild:
		a.core.Own(m.id)
	case *dropChild:
		a.apply(c, a.core.Release(m.id))
	case *turnEnded:
		a.turnEnded(c, m)
	case *oldTurnDone:
		a.apply(c, a.core.Unhold())
	case *beginDispose:
		fault.Yield(PointActivationDispose)
		if !m.force && a.core.Residency() != Settled && !a.core.Closing() {
			c.Send(c.Parent(), &refused{id: a.c.childID()}) // it took work since it proposed settling
			return
		}
		if m.keep {
			a.apply(c, a.core.Suspend())
		} else {
			a.apply(c, a.core.Close())
		}
	case *agentGone:
		c.Send(c.Parent(), a.disposed(m.err))
	case *historyLoaded:
		a.loaded(m)
	case *actor.Stopping:
		a.stopTurn(&Cancel{Kind: "parent"})
	}
}

// retire stops this Activation for good without losing an answer: it asks the
// directory to poison it (see retire) and from now on answers every request with
// ACTIVATION_FAILED. A plain Stop would drop the submits already in its mailbox,
// and their callers would wait forever.
func (a *activationActor) retire(c actor.Context, cause error) {
	a.retired = messages.Errorf(CodeActivationFailed,
		"subagent %q activation can no longer run its session (%v); the message was not accepted", a.c.childID(), cause)
	c.Send(c.Parent(), &retire{pid: c.Self()})
}

// refuse answers a request that reached a retired Activation; anything else
// (turn ends, notices for its own loop, status probes) is dropped with it.
func (a *activationActor) refuse(msg any) {
	switch m := msg.(type) {
	case *submit:
		m.answer(acceptRes{err: a.retired})
	case *interrupt:
		m.reply(a.retired)
	case *report:
		m.reply(acceptRes{err: a.retired})
	case *actor.Stopping:
		a.stopTurn(&Cancel{Kind: "parent"})
	}
}

// start restores the session from Store.Resume — not its log: the history stays
// in the store until a runner reads it — turns cut off by a crash logged aborted,
// journaled messages that never ran queued in order. A restarted incarnation
// takes a new epoch from the store first, fencing its predecessor.
func (a *activationActor) start(c actor.Context) {
	var res session.Resumed
	if a.res != nil {
		res, a.res = *a.res, nil
	}
	if a.c.started {
		// A restart: the crashed incarnation's turn was cancelled. Until its goroutine
		// has returned, no turn starts (messages are still accepted), so two turns of
		// one session never overlap.
		if q := a.c.quiet; q != nil {
			select {
			case <-q:
			default:
				a.core.Hold()
				root, self := c.ActorSystem().Root, c.Self()
				go func() {
					<-q
					root.Send(self, &oldTurnDone{})
				}()
			}
		}
		var err error
		if res, err = a.m.deps.Store.Resume(context.Background(), a.c.childID()); err != nil {
			a.m.logger.Warn(fmt.Sprintf("subagent: %s: restoring after a restart failed: %s", a.c.childID(), err.Error()))
			a.retire(c, err)
			return
		}
	}
	a.c.started = true
	h := res.Header
	a.born, a.epoch = headerRest{seedLength: int32(h.SeedLength), createdAt: h.CreatedAt, version: int32(h.Version)}, h.Epoch
	d, _ := ParseDescriptor(res.Descriptor)
	a.desc = turnDescOf(h.Origin, d)
	a.base, a.hist, a.state = int32(res.Messages), nil, res.State
	toRun := res.ToRun
	for _, m := range res.CutOff {
		if m.ID == a.c.recorded() { // its turn start is logged, but the turn never ran
			toRun = append([]session.InboxMessage{m}, toRun...)
			// Its input, logged with its turn start, is the log's last message: not
			// its turn's history (runTurn counts it, as the first incarnation did,
			// whose restore was as of before it).
			a.base--
			continue
		}
		if err := a.m.deps.Store.Append(context.Background(), a.c.childID(), a.epoch,
			session.Entry{Kind: session.EntryTurnAborted, InboxID: m.ID, StopReason: subagent.StopAborted}); err != nil {
			a.m.logger.Warn(fmt.Sprintf("subagent: %s: recording a cut-off turn as aborted failed: %s", a.c.childID(), err.Error()))
		}
		a.c.opened, a.c.final, a.c.stop = true, nil, intern(subagent.StopAborted)
	}
	a.apply(c, a.core.Restore(toRun, nil)) // a reincarnation's core still owns its children
}

// history is the Turn.History of the turn quiet names, whose input is input (not
// counted yet): in memory once loaded, else read from the store on demand (the
// log's first base messages: the log is append-only, and what it holds after
// them — this turn's input, later turns — is left out) and followed by the
// messages held in memory; a read is sent back to the actor (historyLoaded),
// which keeps it, so it is read at most once per incarnation while runners keep
// asking.
func (a *activationActor) history(c actor.Context, quiet chan struct{}, input subagent.Message) subagent.History {
	if a.base == 0 {
		return subagent.HistoryOf(slices.Clip(a.kept()))
	}
	store, id, base, tail := a.m.deps.Store, a.c.childID(), int(a.base), slices.Clip(a.kept())
	root, self := c.ActorSystem().Root, c.Self()
	return subagent.LazyHistory(base+len(tail), func(ctx context.Context) ([]subagent.Message, error) {
		entries, err := store.History(ctx, id, math.MaxUint64)
		if err != nil {
			return nil, err
		}
		n := min(len(entries), base) // fewer: the history read reports the mismatch
		msgs := make([]subagent.Message, n, n+len(tail))
		for i, e := range entries[:n] {
			msgs[i] = toMessage(e)
		}
		if n == base {
			root.Send(self, &historyLoaded{quiet: quiet, msgs: msgs[:base:base], input: input})
		}
		return append(msgs, tail...), nil
	})
}

// loaded keeps a history a runner read (see hist): the read's messages are the
// log's first ones (any read of the first n is the same: the log is
// append-only), so it is kept if they are all the store holds apart from hist —
// base of them, or, while hist is empty, base less the input of the turn that
// read them, counted at its start.
func (a *activationActor) loaded(m *historyLoaded) {
	switch n := len(m.msgs); {
	case a.hist != nil && a.base > 0 && n == int(a.base):
		*a.hist = append(m.msgs, *a.hist...)
	case a.hist == nil && a.turning && m.quiet == a.c.quiet && n+1 == int(a.base):
		h := append(m.msgs, m.input) // msgs has no room: a copy of its own
		a.hist = &h
	default:
		return
	}
	a.base = 0
}

// kept returns the history's messages held in memory (see hist).
func (a *activationActor) kept() []subagent.Message {
	if a.hist == nil {
		return nil
	}
	return *a.hist
}

// keep holds ms in memory after the history's other messages, and every later
// message with them (see hist).
func (a *activationActor) keep(ms ...subagent.Message) {
	if a.hist == nil {
		a.hist = new([]subagent.Message)
	}
	*a.hist = append(*a.hist, ms...)
}

func toMessage(e session.Entry) subagent.Message {
	m := subagent.Message{Role: e.Role}
	for _, b := range e.Content {
		m.Content = append(m.Content, subagent.Block{Type: b.Type, Text: b.Text})
	}
	return m
}

func fromBlocks(bs []subagent.Block) []session.Block {
	out := make([]session.Block, len(bs))
	for i, b := range bs {
		out[i] = session.Block{Type: b.Type, Text: b.Text}
	}
	return out
}

// apply carries out a core effect.
func (a *activationActor) apply(c actor.Context, eff Effect) {
	for _, d := range eff.Discarded {
		if err := a.m.deps.Store.Append(context.Background(), a.c.childID(), a.epoch,
			session.Entry{Kind: session.EntryDiscarded, InboxID: d.ID}); err != nil {
			a.m.logger.Warn(fmt.Sprintf("subagent: %s: recording a discarded message failed: %s", a.c.childID(), err.Error()))
		}
	}
	if eff.CancelTurn {
		a.stopTurn(&Cancel{Kind: "parent"})
	}
	if eff.StartTurn != nil {
		a.runTurn(c, *eff.StartTurn)
	}
	if eff.Settle {
		c.Send(c.Parent(), &settled{id: a.c.childID()})
	}
	if eff.Finish {
		a.finish(c)
	}
}

func (a *activationActor) stopTurn(cause error) {
	if a.turning && a.c.cancel != nil {
		a.c.cancel(cause)
	}
}

// turnStart is what a turn's start records in the Session log: the turn start
// naming its inbox message, and the message as the turn's user input.
func turnStart(in session.InboxMessage) []session.Entry {
	return []session.Entry{{Kind: session.EntryTurnStart, InboxID: in.ID},
		{Kind: session.EntryMessage, Role: "user", Content: in.Content}}
}

// runTurn records the turn's start and its input in the Session log (unless the
// cold restore's commit recorded them: carry.recorded), then runs the turn in a
// goroutine; its end comes back as turnEnded.
func (a *activationActor) runTurn(c actor.Context, in session.InboxMessage) {
	input := subagent.Message{Role: "user"}
	for _, b := range in.Content {
		input.Content = append(input.Content, subagent.Block{Type: b.Type, Text: b.Text})
	}
	if in.ID == "" || in.ID != a.c.recorded() {
		if err := a.m.deps.Store.Append(context.Background(), a.c.childID(), a.epoch, turnStart(in)...); err != nil {
			// A stale epoch: another activation owns the session now. Stop appending.
			a.m.logger.Warn(fmt.Sprintf("subagent: %s: turn not started: %s", a.c.childID(), err.Error()))
			a.retire(c, err)
			return
		}
	}
	a.c.opened = true
	fault.Yield(PointActivationTurnStart)
	ctx, cancel := context.WithCancelCause(withTurnAgent(context.Background(), a.c.agent))
	a.turning, a.c.cancel = true, cancel // together: a crash after this cancels it
	quiet := make(chan struct{})
	names := a.desc.names.get()
	turn := subagent.Turn{Session: a.c.childID(), Depth: int(a.c.depth),
		History: a.history(c, quiet, input), Input: input,
		Persona: a.desc.persona(), ToolFilter: a.desc.toolFilter(),
		Provider: names.provider, Cwd: a.c.cwd(), State: a.state}
	if p, m := names.agentProvider, names.agentModel; p != "" || m != "" {
		turn.Options = &subagent.AgentOptions{Provider: p, Model: m}
	}
	if a.hist != nil {
		a.keep(input)
	} else {
		a.base++ // the store has it since its turn start (see hist)
	}
	a.c.agent.SetBusy(true)
	root, self, runner := c.ActorSystem().Root, c.Self(), a.m.deps.Runner
	a.c.quiet = quiet                           // only now: a restart waits for it to close (HandleFailure, start)
	if in.ID != "" && in.ID == a.c.recorded() { // it runs now: a restart from here on finds it cut off
		a.c.preState &^= preRecorded
		if a.c.preState&preAnswered != 0 {
			a.c.pre = nil
		}
	}
	go func() {
		defer close(quiet)
		res, produced, state := subagent.RunOneTurnState(ctx, runner, turn)
		cancel(nil)
		root.Send(self, &turnEnded{quiet: quiet, inbox: in.ID, res: res, produced: produced, state: state})
	}()
}

func (a *activationActor) turnEnded(c actor.Context, m *turnEnded) {
	if !a.turning || m.quiet != a.c.quiet {
		return // a turn of an earlier incarnation, already recorded aborted
	}
	a.turning = false
	// Its RunTurn has returned: a restart has no turn to cancel or wait for (and an
	// idle Activation keeps neither the turn's context nor its channel).
	a.c.quiet, a.c.cancel = nil, nil
	fault.Yield(PointActivationTurnEnd)
	entries := make([]session.Entry, 0, len(m.produced)+1)
	for _, p := range m.produced {
		entries = append(entries, session.Entry{Kind: session.EntryMessage, Role: p.Role, Content: fromBlocks(p.Content)})
	}
	entries = append(entries, session.Entry{Kind: session.EntryTurnEnd, InboxID: m.inbox, StopReason: m.res.StopReason})
	if m.state != nil { // log-only, in the same Append as the turn's end
		entries = append(entries, session.Entry{Kind: session.EntryProviderState, State: m.state})
		a.state = m.state
	}
	switch err := a.m.deps.Store.Append(context.Background(), a.c.childID(), a.epoch, entries...); {
	case err != nil:
		a.m.logger.Warn(fmt.Sprintf("subagent: %s: recording the turn's end failed: %s", a.c.childID(), err.Error()))
		a.keep(m.produced...) // the store misses them: hist holds them
	case a.hist != nil:
		a.keep(m.produced...)
	default:
		a.base += int32(len(m.produced)) // the store has them since this Append (see hist)
	}
	a.c.final, a.c.stop = fromBlocks(m.res.Output), intern(m.res.StopReason)
	a.c.agent.SetBusy(false)
	a.apply(c, a.core.TurnEnded())
}

// finish ends the epoch once no turn runs and no owned child is left: the child's
// own agent is disposed (its jobs torn down) in a goroutine, then the directory is
// told (agentGone → disposed), which sends the notice and releases ownership.
//
// A runner that is a subagent.SessionReleaser releases the session first, once per
// epoch (no turn runs any more); its failure is logged and joins the dispose's.
func (a *activationActor) finish(c actor.Context) {
	root, self, agent, id := c.ActorSystem().Root, c.Self(), a.c.agent, a.c.childID()
	rel, _ := a.m.deps.Runner.(subagent.SessionReleaser)
	logger := a.m.logger
	go func() {
		var relErr error
		if rel != nil {
			if relErr = rel.ReleaseSession(context.Background(), id); relErr != nil {
				logger.Warn(fmt.Sprintf("subagent: %s: releasing the session in its turn runner failed: %s", id, relErr.Error()))
			}
		}
		root.Send(self, &agentGone{err: errors.Join(relErr, agent.Dispose(context.Background()))})
	}()
}

// disposed is the activation's last word to the directory: the settlement notice
// (nil unless some delivery was accepted in this epoch) and the end event's data.
func (a *activationActor) disposed(err error) *disposed {
	stop := a.c.stop.get()
	if stop == "" {
		stop = subagent.StopAborted // it never finished a turn in this epoch
	}
	d := &disposed{id: a.c.childID(), err: err, runID: a.c.runID, provider: a.desc.names.get().provider, stop: stop}
	for _, b := range a.c.final {
		d.last += b.Text
	}
	if !a.c.announce {
		return d
	}
	summary := SummaryLine(a.c.childID(), stop)
	msg := owner.Message{ID: "settled-" + a.c.childID() + "-" + strconv.FormatUint(a.epoch, 10), Role: "user", Text: summary,
		Source: owner.Source{Kind: "subagent-settled", Form: "notice", Summary: owner.BoundSummary(summary), SenderSessionID: a.c.childID()}}
	if a.c.opened && len(a.c.final) > 0 {
		msg.More = append(msg.More, "Its closing message:")
		for _, b := range a.c.final {
			msg.More = append(msg.More, b.Text)
		}
	} else {
		msg.More = []string{"It left no closing message."}
	}
	d.notice = &msg
	return d
}

// SummaryLine is the notice's first line for a stop reason (SPEC §6.5).
func SummaryLine(id, stop string) string {
	switch stop {
	case subagent.StopCompleted:
		return "Background subagent " + id + " finished and will do no further work unless you send it more."
	case subagent.StopAborted:
		return "Background subagent " + id + " was stopped before it finished."
	case subagent.StopMaxTokens:
		return "Background subagent " + id + " ran out of room before it finished."
	case subagent.StopRefusal:
		return "Background subagent " + id + " declined the task."
	case subagent.StopError:
		return "Background subagent " + id + " failed before it finished."
	}
	return "Background subagent " + id + " ended abnormally (" + stop + ") before it finished."
}

// newMessageID mints an inbox message id unique across processes: the restore plan
// matches turn starts and ends to messages by id, so ids must never repeat within a
// session, whichever process accepted them.
// The 96 bits come from the runtime's per-thread ChaCha8 generator (math/rand/v2,
// seeded from the OS at start): unique, without a system call per message.
func newMessageID() string {
	var b [12]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint32(b[8:], rand.Uint32())
	return "msg-" + hex.EncodeToString(b[:])
}
