package activation

import (
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/session"
)

// authorisedSession is the session a followup is authorised as: that of parent,
// the exact live incarnation that sent it, never the sender its source claims
// (in a troupe_mutation build, PlantedAuthzBySender trusts the claim).
func authorisedSession(parent *owner.Agent, src session.Source) string {
	if s, ok := plantedSender(src); ok {
		return s
	}
	return parent.Session()
}
