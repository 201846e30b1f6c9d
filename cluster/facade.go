package cluster

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"

	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/cluster/wire"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
)

// The facade mode (troupe.System.JoinCluster): every member runs the facade's
// continuation manager (activation.Manager) and the cluster places its
// children. A parent agent calls the Manager as in one process; the Manager's
// Placement (Node.Placement) sends Start, Followup and Interrupt to the member
// that owns the child's id, whose grain runs them on its own Manager
// (StartPlaced, FollowupHere, InterruptHere): the child's Activation, owner
// agent, jobs and turns are that member's. The parent is represented there by a
// stand-in agent (a proxy, registered under the parent's cluster name) whose
// surface forwards what the child's lineage sends it — settlement notices and
// reports — back to the parent: to the notice endpoint of a top-level parent's
// member, or through the cluster to a parent that is itself a cluster child.

// Local is what a facade member's Node needs from its troupe.System.
type Local struct {
	// NewProxy spawns and registers an agent of session (a remote parent's
	// stand-in on this member) with surface s.
	NewProxy func(session string, s owner.Surface) (*owner.Agent, error)
	// Deliver hands msg — a settlement notice of child, or a report (relay,
	// injected when quiet) — to the top-level agent of session parent on this
	// member.
	Deliver func(parent, child string, msg owner.Message, relay, quiet bool) error
}

// placed is the record a facade member keeps in a child's descriptor
// (activation.Descriptor.Cluster).
type placed struct {
	Parent     string `json:"parent"`               // the parent's session, as its own member names it
	ParentKind string `json:"parentKind,omitempty"` // "" or session.ParentSubagent
	ParentNode string `json:"parentNode,omitempty"` // a top-level parent's member
	Credential string `json:"credentialSha256"`     // hex SHA-256 of the parent's credential
	Key        string `json:"key"`                  // hex: this child's key for its own children's credentials
	StartID    string `json:"startId"`              // the Start's message id (a retried Start is answered)
}

// proxyName is a parent's name on the child's member: node-qualified for a
// top-level parent (top-level session ids are per member), "@cluster" for a
// cluster child (it moves; the name must be the same on every member).
func proxyName(parent, kind, node string) string {
	if kind == session.ParentSubagent {
		return parent + "@cluster"
	}
	return parent + "@" + node
}

// Bind attaches the member's continuation manager (facade mode); the grain
// answers CodeUnavailable until it is bound.
func (n *Node) Bind(m *activation.Manager) {
	n.system.Root.Send(n.proxies, &bindReq{m: m})
}

// Placement is the activation.Placement of this member's Manager.
func (n *Node) Placement() *activation.Placement {
	return &activation.Placement{Start: n.placeStart, Followup: n.placeFollowup, Interrupt: n.placeInterrupt}
}

// parentKey is the key the credentials of parent's children derive from: this
// member's own for a top-level agent (it lives and dies with the member), the
// cluster child's own (in its record in the store) for a parent that is one, so
// that the credentials survive its moves.
func (n *Node) parentKey(ctx context.Context, parent, kind string) ([]byte, error) {
	if kind != session.ParentSubagent {
		return n.key[:], nil
	}
	rec, err := n.record(ctx, parent)
	if err != nil {
		return nil, err
	}
	k, err := hex.DecodeString(rec.Key)
	if err != nil || len(k) != credentialBytes {
		return nil, messages.Errorf(CodeUnauthorized, "cluster child %q has no key for its children", bound(parent))
	}
	return k, nil
}

func credentialFor(key []byte, child string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(child))
	return h.Sum(nil)
}

func (n *Node) record(ctx context.Context, id string) (placed, error) {
	h, err := n.store.Head(ctx, id)
	if err != nil {
		if errors.Is(err, session.ErrNotFound) {
			return placed{}, messages.Errorf(subagent.CodeNotResumable, "subagent %q is unavailable", bound(id))
		}
		return placed{}, messages.Errorf(CodeStore, "session %q: %v", bound(id), err)
	}
	d, err := activation.ParseDescriptor(h.Descriptor)
	var rec placed
	if err != nil || len(d.Cluster) == 0 || json.Unmarshal(d.Cluster, &rec) != nil {
		return placed{}, messages.Errorf(CodeUnauthorized, "subagent %q was not placed by the cluster", bound(id))
	}
	return rec, nil
}

func (n *Node) placeStart(ctx context.Context, parent *owner.Agent, kind, provider, label, childID string, req subagent.Request) (string, string, error) {
	key, err := n.parentKey(ctx, parent.Session(), kind)
	if err != nil {
		return "", "", err
	}
	raw, err := json.Marshal(req)
	if err != nil {
		return "", "", messages.Errorf(CodeInvalid, "cluster: the request: %v", err)
	}
	sum := sha256.Sum256(credentialFor(key, childID))
	msg := &wire.Start{SessionId: childID, ParentSession: parent.Session(), ParentKind: kind, Content: req.Prompt,
		Label: label, MessageId: newID(), CredentialHash: sum[:], Provider: provider, Request: raw}
	if kind == "" {
		msg.ParentNode = n.Address()
	}
	ack, err := n.call(ctx, childID, msg)
	if err != nil {
		return "", "", err
	}
	return childID, ack.InboxId, nil
}

func (n *Node) placeFollowup(ctx context.Context, parent *owner.Agent, kind, childID, content string, src session.Source) (string, error) {
	return n.placeFollowupID(ctx, parent, kind, childID, content, src, newID())
}

// placeFollowupID sends the followup as message msgID: every hedged attempt of one
// call carries the same id, and the child's grain answers a repeat with the first
// acceptance (facade.recent).
func (n *Node) placeFollowupID(ctx context.Context, parent *owner.Agent, kind, childID, content string, src session.Source, msgID string) (string, error) {
	key, err := n.parentKey(ctx, parent.Session(), kind)
	if err != nil {
		return "", err
	}
	ack, err := n.call(ctx, childID, &wire.Followup{SessionId: childID, SenderSession: parent.Session(), Content: content,
		MessageId: msgID, Credential: credentialFor(key, childID), SourceKind: src.Kind, SourceForm: src.Form})
	if err != nil {
		return "", err
	}
	return ack.InboxId, nil
}

func (n *Node) placeInterrupt(ctx context.Context, parent *owner.Agent, kind, childID string) error {
	key, err := n.parentKey(ctx, parent.Session(), kind)
	if err != nil {
		return err
	}
	_, err = n.call(ctx, childID, &wire.Interrupt{SessionId: childID, SenderSession: parent.Session(),
		Credential: credentialFor(key, childID)})
	return err
}

// The proxies actor owns this member's stand-ins for remote parents (one per
// parent name, for the member's life) and the bound Manager.
type (
	bindReq  struct{ m *activation.Manager }
	proxyReq struct {
		parent, kind, node string
		reply              chan proxyRes
	}
	proxyRes struct {
		m   *activation.Manager
		a   *owner.Agent
		err error
	}
)

type proxies struct {
	n      *Node
	m      *activation.Manager
	agents map[string]*owner.Agent
}

func (p *proxies) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *bindReq:
		p.m = m.m
	case *proxyReq:
		if p.m == nil || p.n.local == nil {
			m.reply <- proxyRes{err: messages.Errorf(CodeUnavailable, "cluster: this member has no continuation manager")}
			return
		}
		if m.parent == "" {
			m.reply <- proxyRes{m: p.m}
			return
		}
		name := proxyName(m.parent, m.kind, m.node)
		a := p.agents[name]
		if a == nil {
			var err error
			a, err = p.n.local.NewProxy(name, &forwarder{n: p.n, parent: m.parent, kind: m.kind, node: m.node})
			if err != nil {
				m.reply <- proxyRes{err: messages.Errorf(CodeUnavailable, "cluster: the stand-in for %q: %v", bound(name), err)}
				return
			}
			p.agents[name] = a
		}
		m.reply <- proxyRes{m: p.m, a: a}
	}
}

// proxy returns the bound Manager and the stand-in of (parent, kind, node).
func (n *Node) proxy(parent, kind, node string) (*activation.Manager, *owner.Agent, error) {
	reply := make(chan proxyRes, 1)
	n.system.Root.Send(n.proxies, &proxyReq{parent: parent, kind: kind, node: node, reply: reply})
	r := <-reply
	return r.m, r.a, r.err
}

// forwarder is a stand-in's surface: what reaches it (a settlement notice, a
// report) goes to the real parent, from a goroutine (a surface verb must not block).
type forwarder struct {
	n                  *Node
	parent, kind, node string
}

func (f *forwarder) send(msg owner.Message, quiet bool) error {
	raw, err := json.Marshal(msg)
	for err == nil && len(raw) > maxNoticeMessage && len(msg.More) > 0 { // the closing message's tail goes first
		msg.More = msg.More[:len(msg.More)-1]
		raw, err = json.Marshal(msg)
	}
	if err != nil {
		return err
	}
	if len(raw) > maxNoticeMessage {
		return messages.Errorf(CodeInvalid, "cluster: a notice of %d bytes does not fit the wire", len(raw))
	}
	id := msg.ID
	if !validID(id) {
		id = newID()
	}
	content := msg.Text
	if len(content) > MaxContent || !utf8.ValidString(content) {
		content = bound(content)
	}
	child := msg.Source.SenderSessionID
	if child == "" {
		child = "unknown"
	}
	n := &wire.Notice{ParentSession: f.parent, ChildSession: child, NoticeId: id, Summary: bound(msg.Source.Summary),
		Content: content, Message: raw, Relay: msg.Source.Kind != "subagent-settled", Quiet: quiet}
	go f.n.deliver(f.kind, f.node, n)
	return nil
}

func (f *forwarder) Inject(m owner.Message) error   { return f.send(m, true) }
func (f *forwarder) Steer(m owner.Message) error    { return f.send(m, false) }
func (f *forwarder) Followup(m owner.Message) error { return f.send(m, false) }

// facadeTimeout bounds one grain call into the member's Manager.
const facadeTimeout = 10 * time.Second

func coded(err error) *wire.Ack {
	code := messages.CodeOf(err)
	if code == "" {
		code = CodeStore
	}
	return fail(code, "%s", err.Error())
}

// facade is the grain of a facade member: the child's Activation is the member
// Manager's; the grain checks the parent's credential and calls it.
type facade struct {
	n   *Node
	id  string
	rec *placed // read once from the store (it never changes)
	// recent are the last followups this grain accepted (message id → inbox id),
	// so a hedged attempt of one that was accepted is answered, not accepted again.
	// It covers attempts that reach the same grain; an acceptance whose member died
	// before answering is not known to the next grain (README "Cluster", Limits).
	recent []acceptedFollowup
}

// recentFollowups bounds facade.recent: hedged attempts of one call arrive within
// a few RequestTimeouts, far fewer than this many followups apart.
const recentFollowups = 32

type acceptedFollowup struct{ msg, inbox string }

func (g *facade) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *pcluster.ClusterInit:
		g.id = m.Identity.Identity
	case *wire.Start:
		c.Respond(g.start(m))
	case *wire.Followup:
		c.Respond(g.followup(m))
	case *wire.Interrupt:
		c.Respond(g.interrupt(m))
	case *wire.Notice:
		c.Respond(g.noticeIn(m))
	case *wire.Probe:
		c.Respond(&wire.Ack{Node: g.n.name})
	}
}

func (g *facade) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), facadeTimeout)
}

func (g *facade) start(m *wire.Start) *wire.Ack {
	if bad := valid(m.SessionId, m.Content); bad != nil {
		return bad
	}
	switch {
	case m.SessionId != g.id:
		return fail(CodeInvalid, "start for %q reached %q", bound(m.SessionId), g.id)
	case !validID(m.MessageId):
		return fail(CodeInvalid, "invalid message id")
	case m.ParentSession == "" || len(m.ParentSession) > 256 || !utf8.ValidString(m.ParentSession):
		return fail(CodeInvalid, "invalid parent session")
	case len(m.CredentialHash) != sha256.Size:
		return fail(CodeInvalid, "a start needs its parent's credential hash")
	case m.ParentKind != "" && m.ParentKind != session.ParentSubagent:
		return fail(CodeInvalid, "invalid parent kind")
	case m.ParentKind == "" && (m.ParentNode == "" || len(m.ParentNode) > 256 || !utf8.ValidString(m.ParentNode)):
		return fail(CodeInvalid, "a top-level parent's start needs its member's address")
	}
	var req subagent.Request
	if err := json.Unmarshal(m.Request, &req); err != nil {
		return fail(CodeInvalid, "the start's request is not JSON: %v", err)
	}
	req.Prompt = m.Content
	mgr, proxy, err := g.n.proxy(m.ParentSession, m.ParentKind, m.ParentNode)
	if err != nil {
		return coded(err)
	}
	var key [credentialBytes]byte
	_, _ = rand.Read(key[:])
	rec := placed{Parent: m.ParentSession, ParentKind: m.ParentKind, ParentNode: m.ParentNode,
		Credential: hex.EncodeToString(m.CredentialHash), Key: hex.EncodeToString(key[:]), StartID: m.MessageId}
	raw, _ := json.Marshal(rec)
	ctx, cancel := g.ctx()
	defer cancel()
	_, msgID, err := mgr.StartPlaced(ctx, proxy, m.Provider, m.Label, g.id, req, raw)
	if err != nil {
		if messages.CodeOf(err) == subagent.CodeDuplicateChild {
			if prev, perr := g.n.record(ctx, g.id); perr == nil && prev.StartID == m.MessageId {
				return &wire.Ack{Node: g.n.name} // this start's retry (a hedged attempt)
			}
		}
		return coded(err)
	}
	return &wire.Ack{Node: g.n.name, InboxId: msgID}
}

// authorised is grain.authorised for a facade child: the sender must be the
// parent of record and the credential its own.
func (g *facade) authorised(ctx context.Context, sender string, credential []byte) (*placed, *wire.Ack) {
	if g.rec == nil {
		rec, err := g.n.record(ctx, g.id)
		if err != nil {
			return nil, coded(err)
		}
		g.rec = &rec
	}
	if sender != g.rec.Parent {
		return nil, fail(CodeUnauthorized, "session %q is not the parent of %q", bound(sender), g.id)
	}
	if !credentialMatches(g.rec.Credential, credential) {
		return nil, fail(CodeUnauthorized, "the credential presented for %q's parent %q is not its parent's", g.id, bound(sender))
	}
	return g.rec, nil
}

func (g *facade) followup(m *wire.Followup) *wire.Ack {
	if bad := valid(m.SessionId, m.Content); bad != nil {
		return bad
	}
	ctx, cancel := g.ctx()
	defer cancel()
	rec, bad := g.authorised(ctx, m.SenderSession, m.Credential)
	if bad != nil {
		return bad
	}
	for _, a := range g.recent {
		if m.MessageId != "" && a.msg == m.MessageId {
			return &wire.Ack{Node: g.n.name, InboxId: a.inbox} // a hedged attempt of an accepted followup
		}
	}
	mgr, proxy, err := g.n.proxy(rec.Parent, rec.ParentKind, rec.ParentNode)
	if err != nil {
		return coded(err)
	}
	id, err := mgr.FollowupHere(ctx, proxy, g.id, m.Content,
		session.Source{Kind: bound(m.SourceKind), Form: bound(m.SourceForm), SenderSessionID: proxy.Session()})
	if err != nil {
		return coded(err)
	}
	if m.MessageId != "" {
		if len(g.recent) == recentFollowups {
			g.recent = append(g.recent[:0], g.recent[1:]...)
		}
		g.recent = append(g.recent, acceptedFollowup{msg: m.MessageId, inbox: id})
	}
	return &wire.Ack{Node: g.n.name, InboxId: id}
}

func (g *facade) interrupt(m *wire.Interrupt) *wire.Ack {
	if bad := valid(m.SessionId, ""); bad != nil {
		return bad
	}
	ctx, cancel := g.ctx()
	defer cancel()
	rec, bad := g.authorised(ctx, m.SenderSession, m.Credential)
	if bad != nil {
		return bad
	}
	mgr, proxy, err := g.n.proxy(rec.Parent, rec.ParentKind, rec.ParentNode)
	if err != nil {
		return coded(err)
	}
	if err := mgr.InterruptHere(ctx, g.id, activation.Authority{Ancestor: proxy}); err != nil {
		return coded(err)
	}
	return &wire.Ack{Node: g.n.name}
}

// noticeIn takes a notice (or report) of one of this child's own children:
// the child must be this session's child of record in the store; it becomes
// this child's next turn (as the local child surface makes a notice one), sent
// as this child's parent's stand-in (a cold child resumes here).
func (g *facade) noticeIn(m *wire.Notice) *wire.Ack {
	if bad := validNotice(m); bad != nil {
		return bad
	}
	if m.ParentSession != g.id {
		return fail(CodeInvalid, "notice for %q reached %q", bound(m.ParentSession), g.id)
	}
	ctx, cancel := g.ctx()
	defer cancel()
	child, err := g.n.record(ctx, m.ChildSession)
	if err != nil || child.Parent != g.id || child.ParentKind != session.ParentSubagent {
		return fail(CodeUnauthorized, "%q has no child %q", g.id, bound(m.ChildSession))
	}
	if g.rec == nil {
		rec, err := g.n.record(ctx, g.id)
		if err != nil {
			return coded(err)
		}
		g.rec = &rec
	}
	mgr, proxy, err := g.n.proxy(g.rec.Parent, g.rec.ParentKind, g.rec.ParentNode)
	if err != nil {
		return coded(err)
	}
	var msg owner.Message
	_ = json.Unmarshal(m.Message, &msg)
	text := m.Content
	for _, line := range msg.More {
		if len(text)+len(line)+1 > MaxContent {
			break
		}
		text += "\n" + line
	}
	kind := "subagent-settled"
	if m.Relay {
		kind = "subagent-report"
	}
	id, err := mgr.FollowupHere(ctx, proxy, g.id, text, session.Source{Kind: kind, Form: "notice", SenderSessionID: m.ChildSession})
	if err != nil {
		return coded(err)
	}
	return &wire.Ack{Node: g.n.name, InboxId: id}
}

// endpointFacade hands a notice for a top-level parent of this member to
// Local.Deliver.
func (n *Node) endpointFacade(m *wire.Notice) *wire.Ack {
	var msg owner.Message
	if err := json.Unmarshal(m.Message, &msg); err != nil {
		return fail(CodeInvalid, "the notice's message is not JSON: %v", err)
	}
	// What reaches the parent's surface is valid UTF-8 (JSON decoding replaced
	// any invalid byte) and bounded (maxNoticeMessage).
	if err := n.local.Deliver(m.ParentSession, m.ChildSession, msg, m.Relay, m.Quiet); err != nil {
		return coded(err)
	}
	return &wire.Ack{Node: n.name}
}
