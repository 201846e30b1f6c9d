package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"

	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/cluster/wire"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
)

// Kind is the cluster kind of a continuable child.
const Kind = "troupe.child"

// turnDone is a running turn's end, sent back to its grain (never crosses the wire).
type turnDone struct {
	inbox    string
	epoch    uint64
	res      subagent.Result
	produced []subagent.Message
}

// grain is the Activation of one continuable child on this member: the thin
// shell around activation.Core (the FIFO, the parking) and the store's epoch.
type grain struct {
	n       *Node
	id      string
	active  bool
	epoch   uint64
	header  session.Header
	core    *activation.Core
	history []subagent.Message
	cancel  context.CancelFunc
	ended   uint64
	// seen maps every inbox message id of the session (stored or accepted by
	// this Activation) to its message: a retried send is answered, not re-accepted.
	seen map[string]session.InboxMessage
	// desc is the child's descriptor: its parent's member and credential hash.
	desc descriptor
	// announce: a turn ended (or was logged aborted) in this epoch since the last
	// settlement notice; stop and final are the last turn's stop reason and
	// closing text, for the next notice.
	announce    bool
	stop, final string
}

func (g *grain) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *pcluster.ClusterInit:
		g.id = m.Identity.Identity
	case *wire.Start:
		c.Respond(g.start(c, m))
	case *wire.Followup:
		c.Respond(g.followup(c, m))
	case *wire.Interrupt:
		c.Respond(g.interrupt(c, m))
	case *wire.Notice:
		c.Respond(g.noticeIn(c, m))
	case *wire.Probe:
		if ack := g.ensure(c); ack != nil {
			c.Respond(ack)
			return
		}
		c.Respond(g.ack(""))
	case *turnDone:
		g.turnDone(c, m)
	case *actor.Stopping:
		if g.cancel != nil {
			g.cancel()
		}
	}
}

func (g *grain) ack(inbox string) *wire.Ack {
	var queued uint64 = uint64(len(g.core.Queued()))
	return &wire.Ack{InboxId: inbox, Epoch: g.epoch, Node: g.n.name, TurnsEnded: g.ended,
		Running: g.core.Running() != nil, Queued: queued}
}

func fail(code messages.Code, format string, args ...any) *wire.Ack {
	return &wire.Ack{Code: string(code), Message: bound(fmt.Sprintf(format, args...))}
}

// storeFailed maps a store error to an Ack; a stale epoch stops the grain (a
// newer Activation owns the session; the caller's retry reaches it).
func (g *grain) storeFailed(c actor.Context, err error) *wire.Ack {
	switch {
	case errors.Is(err, session.ErrStaleEpoch):
		g.n.event("stale", g.id, g.epoch, "")
		g.active = false
		if g.cancel != nil {
			g.cancel()
		}
		c.Poison(c.Self())
		return fail(CodeStaleEpoch, "session %q moved: epoch %d is stale", g.id, g.epoch)
	case errors.Is(err, session.ErrNotFound):
		return fail(CodeNotFound, "no session %q", g.id)
	case messages.CodeOf(err) == CodeDuplicate:
		return fail(CodeDuplicate, "subagent %q already exists", g.id)
	}
	return fail(CodeStore, "session %q: %v", g.id, err)
}

// fence is the epoch every write of the Activation carries: its own, which the
// store compares with the session's in the same statement.
func (g *grain) fence(ctx context.Context) uint64 {
	if e, ok := g.plantedWriteEpoch(ctx); ok {
		return e
	}
	return g.epoch
}

func (g *grain) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), g.n.storeTimeout)
}

// ensure activates the session from the store if this grain has not yet: a new
// epoch, the cut-off turns logged aborted, the unstarted messages queued in order.
func (g *grain) ensure(c actor.Context) *wire.Ack {
	if g.active {
		return nil
	}
	ctx, cancel := g.ctx()
	defer cancel()
	snap, err := g.n.store.Activate(ctx, g.id)
	if err != nil {
		return g.storeFailed(c, err)
	}
	g.active, g.epoch, g.header, g.core = true, snap.Header.Epoch, snap.Header, activation.NewCore()
	g.desc, g.announce, g.stop, g.final = readDescriptor(snap.Log), false, "", ""
	g.history = g.history[:0]
	g.seen = make(map[string]session.InboxMessage, len(snap.Inbox))
	for _, m := range snap.Inbox {
		g.seen[m.ID] = m
	}
	for _, e := range snap.Log {
		if e.Kind == session.EntryMessage {
			g.history = append(g.history, subagent.Message{Role: e.Role, Content: toBlocks(e.Content)})
		}
		if e.Kind == session.EntryTurnEnd || e.Kind == session.EntryTurnAborted {
			g.ended++
		}
	}
	toRun, cutOff := snap.Pending()
	if len(cutOff) > 0 {
		aborted := make([]session.Entry, 0, len(cutOff))
		for _, m := range cutOff {
			aborted = append(aborted, session.Entry{Kind: session.EntryTurnAborted, InboxID: m.ID})
		}
		if err := g.n.store.Append(ctx, g.id, g.fence(ctx), aborted...); err != nil {
			return g.storeFailed(c, err)
		}
		g.ended += uint64(len(cutOff))
		// The cut-off turn is this epoch's news: the parent hears of the
		// settlement that follows (unless a later turn ends first).
		g.announce, g.stop = true, subagent.StopAborted
	}
	g.n.event("activated", g.id, g.epoch, "")
	g.apply(c, g.core.Restore(plantedRestoreOrder(toRun), nil))
	return nil
}

func valid(id, content string) *wire.Ack {
	switch {
	case id == "" || len(id) > 256 || !utf8.ValidString(id):
		return fail(CodeInvalid, "invalid session id")
	case len(content) > MaxContent || !utf8.ValidString(content):
		return fail(CodeInvalid, "content must be valid UTF-8 of at most %d bytes", MaxContent)
	}
	return nil
}

func (g *grain) start(c actor.Context, m *wire.Start) *wire.Ack {
	if bad := valid(m.SessionId, m.Content); bad != nil {
		return bad
	}
	if m.SessionId != g.id {
		return fail(CodeInvalid, "start for %q reached %q", m.SessionId, g.id)
	}
	if !validID(m.MessageId) {
		return fail(CodeInvalid, "invalid message id")
	}
	switch {
	case m.ParentSession == "" || len(m.ParentSession) > 256 || !utf8.ValidString(m.ParentSession):
		return fail(CodeInvalid, "invalid parent session")
	case len(m.CredentialHash) != sha256.Size:
		return fail(CodeInvalid, "a start needs its parent's credential hash")
	case m.ParentKind != "" && m.ParentKind != session.ParentSubagent:
		return fail(CodeInvalid, "invalid parent kind")
	case m.ParentKind == "" && (m.ParentNode == "" || len(m.ParentNode) > 256 || !utf8.ValidString(m.ParentNode)):
		return fail(CodeInvalid, "a top-level parent's start needs its member's address")
	}
	if g.active {
		return g.retried(m.MessageId)
	}
	desc, _ := json.Marshal(descriptor{Label: m.Label, Provider: "cluster", ParentNode: m.ParentNode,
		Credential: hex.EncodeToString(m.CredentialHash)})
	h := session.Header{ID: g.id, ParentSession: m.ParentSession, ParentKind: m.ParentKind, Origin: "subagent",
		CreatedAt: time.Now().UnixMilli(), Version: session.HeaderVersion}
	ctx, cancel := g.ctx()
	err := g.n.store.Create(ctx, h, []session.Entry{{Kind: session.EntryDescriptor, Descriptor: desc}})
	cancel()
	if err != nil && messages.CodeOf(err) != CodeDuplicate {
		return g.storeFailed(c, err)
	}
	if ack := g.ensure(c); ack != nil {
		return ack
	}
	if err != nil { // it existed: this start's retry, or a duplicate
		return g.retried(m.MessageId)
	}
	return g.accept(c, m.MessageId, m.Content, session.Source{Kind: "parent", SenderSessionID: m.ParentSession})
}

// authorised checks a request against the child's parent: the sender must be
// the parent of record and the credential its own (Credential: the stored hash
// compared in constant time). A member's word for the sender is not enough.
func (g *grain) authorised(sender string, credential []byte) *wire.Ack {
	if sender != g.header.ParentSession {
		return fail(CodeUnauthorized, "session %q is not the parent of %q", bound(sender), g.id)
	}
	if !credentialMatches(g.desc.Credential, credential) {
		return fail(CodeUnauthorized, "the credential presented for %q's parent %q is not its parent's", g.id, bound(sender))
	}
	return nil
}

func (g *grain) followup(c actor.Context, m *wire.Followup) *wire.Ack {
	if bad := valid(m.SessionId, m.Content); bad != nil {
		return bad
	}
	if ack := g.ensure(c); ack != nil {
		return ack
	}
	if bad := g.authorised(m.SenderSession, m.Credential); bad != nil {
		return bad
	}
	if !validID(m.MessageId) {
		return fail(CodeInvalid, "invalid message id")
	}
	if prev, ok := g.seen[m.MessageId]; ok && !plantedReaccept() {
		return g.ack(prev.ID)
	}
	return g.accept(c, m.MessageId, m.Content, session.Source{Kind: "parent", SenderSessionID: m.SenderSession})
}

// retried answers a Start on a session that exists: the first acceptance if
// this is its retry (the same message id), else DUPLICATE_CHILD.
func (g *grain) retried(messageID string) *wire.Ack {
	if prev, ok := g.seen[messageID]; ok {
		return g.ack(prev.ID)
	}
	return fail(CodeDuplicate, "subagent %q already exists", g.id)
}

func validID(id string) bool { return id != "" && len(id) <= 128 && utf8.ValidString(id) }

func (g *grain) accept(c actor.Context, id, content string, src session.Source) *wire.Ack {
	ctx, cancel := g.ctx()
	defer cancel()
	in, err := g.n.store.Accept(ctx, g.id, g.fence(ctx), session.InboxMessage{
		ID: id, Content: []session.Block{{Type: "text", Text: content}}, Source: src,
		AcceptedAt: time.Now().UnixMilli()})
	if err != nil {
		return g.storeFailed(c, err)
	}
	g.seen[in.ID] = in
	ack := g.ack(in.ID)
	g.apply(c, g.core.Admit(in, true))
	return ack
}

func (g *grain) interrupt(c actor.Context, m *wire.Interrupt) *wire.Ack {
	if bad := valid(m.SessionId, ""); bad != nil {
		return bad
	}
	if ack := g.ensure(c); ack != nil {
		return ack
	}
	if bad := g.authorised(m.SenderSession, m.Credential); bad != nil {
		return bad
	}
	g.apply(c, g.core.Interrupt())
	return g.ack("")
}

func (g *grain) apply(c actor.Context, eff activation.Effect) {
	if eff.CancelTurn && g.cancel != nil {
		g.cancel()
	}
	if eff.StartTurn != nil {
		g.runTurn(c, *eff.StartTurn)
	}
	if eff.Settle && g.announce {
		g.announce = false
		g.notify()
	}
}

func (g *grain) runTurn(c actor.Context, in session.InboxMessage) {
	ctx, cancel := g.ctx()
	err := g.n.store.Append(ctx, g.id, g.fence(ctx), session.Entry{Kind: session.EntryTurnStart, InboxID: in.ID})
	cancel()
	if err != nil {
		_ = g.storeFailed(c, err)
		return
	}
	g.n.event("turn", g.id, g.epoch, in.ID)
	turnCtx, stop := context.WithCancel(context.Background())
	g.cancel = stop
	input := subagent.Message{Role: "user", Content: toBlocks(in.Content)}
	turn := subagent.Turn{Session: g.id, History: subagent.HistoryOf(g.history), Input: input}
	self, epoch, runner, root := c.Self(), g.epoch, g.n.runner, c.ActorSystem().Root
	g.history = append(g.history, input)
	go func() {
		res, produced := subagent.RunOneTurn(turnCtx, runner, turn)
		root.Send(self, &turnDone{inbox: in.ID, epoch: epoch, res: res, produced: produced})
	}()
}

func (g *grain) turnDone(c actor.Context, m *turnDone) {
	if !g.active || m.epoch != g.epoch {
		return
	}
	g.cancel = nil
	entries := make([]session.Entry, 0, len(m.produced)+1)
	for _, p := range m.produced {
		entries = append(entries, session.Entry{Kind: session.EntryMessage, Role: p.Role, Content: fromBlocks(p.Content)})
	}
	entries = append(entries, session.Entry{Kind: session.EntryTurnEnd, InboxID: m.inbox, StopReason: m.res.StopReason})
	ctx, cancel := g.ctx()
	err := g.n.store.Append(ctx, g.id, g.fence(ctx), entries...)
	cancel()
	if err != nil {
		_ = g.storeFailed(c, err)
		return
	}
	g.history = append(g.history, m.produced...)
	g.ended++
	g.announce, g.stop, g.final = true, m.res.StopReason, m.res.Text()
	g.apply(c, g.core.TurnEnded())
	if g.core.Running() == nil && len(g.core.Queued()) == 0 {
		g.n.event("rest", g.id, g.epoch, m.inbox)
	}
}

func toBlocks(bs []session.Block) []subagent.Block {
	out := make([]subagent.Block, 0, len(bs))
	for _, b := range bs {
		out = append(out, subagent.Block{Type: b.Type, Text: b.Text})
	}
	return out
}

func fromBlocks(bs []subagent.Block) []session.Block {
	out := make([]session.Block, 0, len(bs))
	for _, b := range bs {
		out = append(out, session.Block{Type: b.Type, Text: b.Text})
	}
	return out
}
