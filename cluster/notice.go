package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/cluster/wire"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
)

// NoticeEndpoint is the name of the actor on every member that takes the
// settlement notices of children whose parent is a top-level agent of that
// member. A top-level parent lives on one member, which its children's Start
// recorded (Start.parent_node, kept in the child's descriptor); a parent that is
// itself a cluster child moves with its session, so its notices are routed
// through the cluster by its session id instead.
const NoticeEndpoint = "troupe-notices"

// maxNoticeMessage bounds a notice's owner.Message (JSON) on the wire.
const maxNoticeMessage = 4 * MaxContent

// noticeTimeout bounds how long a child's member keeps retrying one notice.
const noticeTimeout = 30 * time.Second

// Notice is a settlement notice as the parent's member hands it to Config.Notice.
type Notice struct {
	Parent, Child, ID, StopReason, Summary, Content string
}

// noticeText is the notice's content: the SPEC §6.5 summary line, then the
// child's closing message (or that it left none), bounded to MaxContent.
func noticeText(summary, final string) string {
	var b strings.Builder
	b.WriteString(summary)
	if final != "" {
		b.WriteString("\nIts closing message:\n")
		b.WriteString(final)
	} else {
		b.WriteString("\nIt left no closing message.")
	}
	s := b.String()
	if len(s) > MaxContent {
		s = s[:MaxContent]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
	}
	return s
}

// notify sends this child's settlement notice to its parent, from a goroutine
// of the member (the grain does not wait): retried until the parent's member or
// Activation acknowledges it or noticeTimeout passes. The notice id names the
// epoch and the turn count, so a retried notice is accepted once.
func (g *grain) notify() {
	stop := g.stop
	if stop == "" {
		stop = subagent.StopAborted
	}
	summary := activation.SummaryLine(g.id, stop)
	msg := &wire.Notice{ParentSession: g.header.ParentSession, ChildSession: g.id,
		NoticeId:   "settled-" + g.id + "-" + strconv.FormatUint(g.epoch, 10) + "-" + strconv.FormatUint(g.ended, 10),
		StopReason: stop, Summary: summary, Content: noticeText(summary, g.final)}
	n, kind, node := g.n, g.header.ParentKind, g.desc.ParentNode
	go n.deliver(kind, node, msg)
}

func (n *Node) deliver(kind, node string, msg *wire.Notice) {
	ctx, cancel := context.WithTimeout(n.ctx, noticeTimeout)
	defer cancel()
	var err error
	if kind == session.ParentSubagent {
		_, err = n.call(ctx, msg.ParentSession, msg)
	} else {
		err = n.toEndpoint(ctx, node, msg)
	}
	if err != nil && n.ctx.Err() == nil {
		n.logger.Warn("cluster: a settlement notice was not delivered", "child", msg.ChildSession,
			"parent", msg.ParentSession, "notice", msg.NoticeId, "err", err)
		n.event("notice-lost", msg.ChildSession, 0, msg.NoticeId)
	}
}

// toEndpoint sends msg to the notice endpoint of the member at address node,
// retrying until it answers an empty code or ctx ends.
func (n *Node) toEndpoint(ctx context.Context, node string, msg *wire.Notice) error {
	pid := actor.NewPID(node, NoticeEndpoint)
	var last error
	for {
		res, err := n.system.Root.RequestFuture(pid, msg, n.reqTimeout).Result()
		ack, ok := res.(*wire.Ack)
		switch {
		case err == nil && ok && ack.Code == "":
			return nil
		case err == nil && ok:
			return messages.Errorf(messages.Code(ack.Code), "%s", ack.Message)
		case err == nil:
			last = fmt.Errorf("unexpected reply %T", res)
		default:
			last = err
		}
		select {
		case <-ctx.Done():
			return errors.Join(messages.Errorf(CodeUnavailable, "cluster: the notice endpoint at %q did not answer", bound(node)), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// endpoint is the member's notice endpoint actor: it hands each notice for a
// top-level parent of this member to Config.Notice and acknowledges it.
type endpoint struct{ n *Node }

func (e *endpoint) Receive(c actor.Context) {
	m, ok := c.Message().(*wire.Notice)
	if !ok {
		return
	}
	if bad := validNotice(m); bad != nil {
		c.Respond(bad)
		return
	}
	if e.n.local != nil {
		c.Respond(e.n.endpointFacade(m))
		return
	}
	if e.n.notice == nil {
		c.Respond(fail(CodeNotFound, "no parent %q on this member", bound(m.ParentSession)))
		return
	}
	e.n.notice(Notice{Parent: m.ParentSession, Child: m.ChildSession, ID: m.NoticeId,
		StopReason: m.StopReason, Summary: m.Summary, Content: m.Content})
	c.Respond(&wire.Ack{Node: e.n.name})
}

func validNotice(m *wire.Notice) *wire.Ack {
	for _, s := range []string{m.ParentSession, m.ChildSession} {
		if s == "" || len(s) > 256 || !utf8.ValidString(s) {
			return fail(CodeInvalid, "invalid session id")
		}
	}
	if !validID(m.NoticeId) {
		return fail(CodeInvalid, "invalid notice id")
	}
	if len(m.Message) > maxNoticeMessage {
		return fail(CodeInvalid, "a notice's message must be at most %d bytes", maxNoticeMessage)
	}
	if len(m.Content) > MaxContent || len(m.Summary) > MaxContent || !utf8.ValidString(m.Content) ||
		!utf8.ValidString(m.Summary) || len(m.StopReason) > 64 || !utf8.ValidString(m.StopReason) {
		return fail(CodeInvalid, "notice content must be valid UTF-8 of at most %d bytes", MaxContent)
	}
	return nil
}

// noticeIn takes a child's settlement notice into this (parent) child's inbox:
// accepted once per notice id, waking it, as a message of source
// subagent-settled. The child must be this session's child of record in the
// store (its header names this session as a cluster-child parent).
func (g *grain) noticeIn(c actor.Context, m *wire.Notice) *wire.Ack {
	if bad := validNotice(m); bad != nil {
		return bad
	}
	if m.ParentSession != g.id {
		return fail(CodeInvalid, "notice for %q reached %q", bound(m.ParentSession), g.id)
	}
	if ack := g.ensure(c); ack != nil {
		return ack
	}
	if prev, ok := g.seen[m.NoticeId]; ok {
		return g.ack(prev.ID)
	}
	ctx, cancel := g.ctx()
	h, err := g.n.store.Head(ctx, m.ChildSession)
	cancel()
	if err != nil {
		if errors.Is(err, session.ErrNotFound) {
			return fail(CodeUnauthorized, "%q has no child %q", g.id, bound(m.ChildSession))
		}
		return fail(CodeStore, "session %q: %v", bound(m.ChildSession), err)
	}
	if h.Header.ParentSession != g.id || h.Header.ParentKind != session.ParentSubagent {
		return fail(CodeUnauthorized, "%q has no child %q", g.id, bound(m.ChildSession))
	}
	return g.accept(c, m.NoticeId, m.Content, session.Source{Kind: "subagent-settled", Form: "notice", SenderSessionID: m.ChildSession})
}
