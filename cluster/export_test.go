package cluster

import (
	"context"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/session"
)

// FollowupTwiceForTest sends one followup of parent to childID as the same message
// twice, one attempt after the other (what a hedged retry of an accepted followup
// is), and returns both answers' inbox ids. kind is the parent's session kind.
func (n *Node) FollowupTwiceForTest(ctx context.Context, parent *owner.Agent, kind, childID, content string) (string, string, error) {
	msg := newID()
	src := session.Source{Kind: "coordinator"}
	first, err := n.placeFollowupID(ctx, parent, kind, childID, content, src, msg)
	if err != nil {
		return "", "", err
	}
	second, err := n.placeFollowupID(ctx, parent, kind, childID, content, src, msg)
	return first, second, err
}
