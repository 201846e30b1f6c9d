package activation

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
)

// Messages the activation actor accepts (local values; the directory routes them).
type (
	// submit is a followup (or the first prompt). Parent is the credential: the
	// exact live parent incarnation; the sender PID is never looked at.
	submit struct {
		parent   *owner.Agent // nil only for the first prompt, checked by the directory
		content  []session.Block
		source   session.Source
		reply    chan<- acceptRes
		firstMsg bool
	}
	acceptRes struct {
		id  string
		err error
	}
	interrupt struct {
		auth  Authority
		reply chan<- error
	}
	report struct {
		content []session.Block
		quiet   bool
		reply   chan<- acceptRes
	}
	statusReq    struct{ reply chan<- Status }
	ownChild     struct{ id string }
	dropChild    struct{ id string }
	beginDispose struct{}
	turnEnded    struct {
		inbox    string
		res      subagent.Result
		produced []subagent.Message
	}
	agentGone struct{ err error }
)

// Status is an activation's listing view.
type Status struct {
	ID        string
	Residency Residency
	Header    session.Header
	Label     string
}

var msgIDs atomic.Uint64

// activationActor is one live continuable child: its session (header, history,
// epoch), the FIFO core, the turn in flight (run in a goroutine it owns, with a
// cancelable context — never inside Receive), and the child's own agent instance.
type activationActor struct {
	m        *Manager
	id       string
	label    string
	snap     session.Snapshot // restored from, at this epoch
	epoch    uint64
	header   session.Header
	history  []subagent.Message
	core     *Core
	agent    *owner.Agent
	ancestry map[string]bool // PIDs (String()) of the live ancestors at materialization
	cancel   context.CancelFunc
	quiet    chan struct{} // closed when the turn goroutine has returned
	announce bool          // some delivery was accepted in this epoch
	final    []session.Block
	stop     string
	opened   bool // this epoch opened a turn
	dir      *actor.PID
}

func (a *activationActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.start(c)
	case *submit:
		m.reply <- a.submit(c, m)
	case *interrupt:
		m.reply <- a.interrupt(m.auth)
	case *report:
		m.reply <- a.report(m)
	case *statusReq:
		m.reply <- Status{ID: a.id, Residency: a.core.Residency(), Header: a.header, Label: a.label}
	case *ownChild:
		a.core.Own(m.id)
	case *dropChild:
		a.apply(c, a.core.Release(m.id))
	case *turnEnded:
		a.turnEnded(c, m)
	case *beginDispose:
		a.core.Close()
		if a.cancel != nil {
			a.cancel()
			return // the turn's end continues the disposal
		}
		a.finish(c)
	case *agentGone:
		a.notify()
		c.Send(a.dir, &disposed{id: a.id, err: m.err})
	case *actor.Stopping:
		if a.cancel != nil {
			a.cancel()
		}
	}
}

// start restores the session: history from the log, cut-off turns logged aborted,
// pending messages queued in order.
func (a *activationActor) start(c actor.Context) {
	a.dir = c.Parent()
	a.header = a.snap.Header
	a.epoch = a.snap.Header.Epoch
	for _, e := range a.snap.Log {
		if e.Kind == session.EntryMessage {
			a.history = append(a.history, toMessage(e))
		}
	}
	toRun, cut := a.snap.Pending()
	for _, m := range cut {
		if err := a.m.deps.Store.Append(context.Background(), a.id, a.epoch,
			session.Entry{Kind: session.EntryTurnAborted, InboxID: m.ID, StopReason: subagent.StopAborted}); err != nil {
			a.m.logger.Warn(fmt.Sprintf("subagent: %s: recording a crashed turn as aborted failed: %s", a.id, err.Error()))
		}
	}
	a.snap = session.Snapshot{}
	a.apply(c, a.core.Restore(toRun))
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

func unauthorized(format string, args ...any) error {
	return messages.Errorf(subagent.CodeUnauthorized, format, args...)
}

// submit is SPEC §6.3's admission span: authority, closing, durable acceptance, queue.
func (a *activationActor) submit(c actor.Context, m *submit) acceptRes {
	if !m.firstMsg {
		if m.parent == nil || !a.m.live(m.parent) {
			return acceptRes{err: unauthorized("subagent %q delivery requires the exact live parent agent", a.id)}
		}
		if m.parent.Session() != a.header.ParentSession {
			return acceptRes{err: unauthorized("subagent %q belongs to another parent session", a.id)}
		}
	}
	if a.core.Closing() {
		return acceptRes{err: messages.Errorf(subagent.CodeActivationClosing,
			"subagent %q activation is being disposed; the message was not accepted", a.id)}
	}
	msg := session.InboxMessage{ID: "msg-" + strconv.FormatUint(msgIDs.Add(1), 10), Content: m.content,
		Source: m.source, AcceptedAt: a.m.now()}
	msg, err := a.m.deps.Store.Accept(context.Background(), a.id, a.epoch, msg)
	if err != nil {
		return acceptRes{err: err}
	}
	a.announce = true
	a.apply(c, a.core.Admit(msg))
	return acceptRes{id: msg.ID}
}

// interrupt is SPEC §6.4 at the target: authority, then cancel and return.
func (a *activationActor) interrupt(auth Authority) error {
	switch {
	case auth.Ancestor == nil && auth.ParentSession != a.header.ParentSession:
		return unauthorized("subagent %q belongs to another parent session", a.id)
	case auth.Ancestor != nil && !a.ancestry[auth.Ancestor.PID().String()]:
		return unauthorized("subagent %q is not a live descendant of agent %q", a.id, auth.Ancestor.Session())
	case a.core.Closing():
		return nil
	}
	if eff := a.core.Interrupt(); eff.CancelTurn && a.cancel != nil {
		a.cancel()
	}
	return nil
}

// report relays the child's report to its parent of record (SPEC §6.6).
func (a *activationActor) report(m *report) acceptRes {
	pid := a.m.deps.Jobs.RegisteredAgent(a.header.ParentSession)
	if pid == nil {
		return acceptRes{err: messages.Errorf(subagent.CodeParentUnavailable, "direct parent is not live; report was not delivered")}
	}
	id := "report-" + strconv.FormatUint(msgIDs.Add(1), 10)
	msg := owner.Message{ID: id, Role: "user", Text: "Background subagent " + a.id + " reported:",
		Source: owner.Source{Kind: "subagent-report", Form: "relay", SenderSessionID: a.id}}
	for _, b := range m.content {
		msg.More = append(msg.More, b.Text)
	}
	reply := make(chan error, 1)
	a.m.root.Send(pid, &owner.Relay{Message: msg, Quiet: m.quiet, Reply: reply})
	if err := <-reply; err != nil {
		return acceptRes{err: err}
	}
	return acceptRes{id: id}
}

// apply carries out a core effect.
func (a *activationActor) apply(c actor.Context, eff Effect) {
	switch {
	case eff.StartTurn != nil:
		a.runTurn(c, *eff.StartTurn)
	case eff.CancelTurn && a.cancel != nil:
		a.cancel()
	case eff.Settle:
		c.Send(a.dir, &settled{id: a.id})
	}
}

func (a *activationActor) runTurn(c actor.Context, in session.InboxMessage) {
	input := subagent.Message{Role: "user"}
	for _, b := range in.Content {
		input.Content = append(input.Content, subagent.Block{Type: b.Type, Text: b.Text})
	}
	if err := a.m.deps.Store.Append(context.Background(), a.id, a.epoch,
		session.Entry{Kind: session.EntryTurnStart, InboxID: in.ID},
		session.Entry{Kind: session.EntryMessage, Role: "user", Content: in.Content}); err != nil {
		// A stale epoch: another activation owns the session now. Stop appending.
		a.m.logger.Warn(fmt.Sprintf("subagent: %s: turn not started: %s", a.id, err.Error()))
		c.Stop(c.Self())
		return
	}
	a.opened = true
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel, a.quiet = cancel, make(chan struct{})
	turn := subagent.Turn{Session: a.id, Depth: a.header.DelegationDepth, History: append([]subagent.Message(nil), a.history...), Input: input}
	a.history = append(a.history, input)
	root, self, runner, quiet := c.ActorSystem().Root, c.Self(), a.m.deps.Runner, a.quiet
	go func() {
		defer close(quiet)
		res, produced := subagent.RunOneTurn(ctx, runner, turn)
		root.Send(self, &turnEnded{inbox: in.ID, res: res, produced: produced})
	}()
}

func (a *activationActor) turnEnded(c actor.Context, m *turnEnded) {
	a.cancel = nil
	entries := make([]session.Entry, 0, len(m.produced)+1)
	for _, p := range m.produced {
		entries = append(entries, session.Entry{Kind: session.EntryMessage, Role: p.Role, Content: fromBlocks(p.Content)})
	}
	entries = append(entries, session.Entry{Kind: session.EntryTurnEnd, InboxID: m.inbox, StopReason: m.res.StopReason})
	if err := a.m.deps.Store.Append(context.Background(), a.id, a.epoch, entries...); err != nil {
		a.m.logger.Warn(fmt.Sprintf("subagent: %s: recording the turn's end failed: %s", a.id, err.Error()))
	}
	a.history = append(a.history, m.produced...)
	a.final, a.stop = fromBlocks(m.res.Output), m.res.StopReason
	if a.core.Closing() {
		a.core.TurnEnded()
		a.finish(c)
		return
	}
	a.apply(c, a.core.TurnEnded())
}

// finish ends the epoch: the child's own agent is disposed (its jobs torn down) in
// a goroutine, then the notice is sent and the directory told (agentGone).
func (a *activationActor) finish(c actor.Context) {
	root, self, agent := c.ActorSystem().Root, c.Self(), a.agent
	go func() {
		var err error
		if agent != nil {
			err = agent.Dispose(context.Background())
		}
		root.Send(self, &agentGone{err: err})
	}()
}

// notify sends the settlement notice to the agent registered for the parent session,
// while this child is still owned (SPEC §6.5 steps 8–9).
func (a *activationActor) notify() {
	if !a.announce {
		return
	}
	pid := a.m.deps.Jobs.RegisteredAgent(a.header.ParentSession)
	if pid == nil {
		return // dropped silently
	}
	summary := SummaryLine(a.id, a.stop)
	msg := owner.Message{ID: "settled-" + a.id + "-" + strconv.FormatUint(a.epoch, 10), Role: "user", Text: summary,
		Source: owner.Source{Kind: "subagent-settled", Form: "notice", Summary: owner.BoundSummary(summary), SenderSessionID: a.id}}
	if a.opened && len(a.final) > 0 {
		msg.More = append(msg.More, "Its closing message:")
		for _, b := range a.final {
			msg.More = append(msg.More, b.Text)
		}
	} else {
		msg.More = []string{"It left no closing message."}
	}
	a.m.root.Send(pid, &owner.ChildNotice{ChildID: a.id, Message: msg, LineageClosing: a.m.lineageClosing(a.header.ParentSession)})
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

var _ = strings.Join
