//go:build troupe_mutation

package activation

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/internal/fault"
	"github.com/troupe-rt/troupe/session"
)

// Planted bugs of the continuation manager (TESTING.md's mutation check). This
// file is compiled only into troupe_mutation builds (planted_off.go is its no-op
// twin in every other build); even there each bug is inert: only a test that installs a fault injector with
// fault.Plant(name) turns it on. test/activation_suites shows its suites catch them.
const (
	// PlantedActivationWithoutClaim: a followup to a resident child does not use the
	// Activation the directory claimed for it: it resumes the child cold, as if
	// none were resident, and records the new Activation in place of the claimed
	// one, which keeps running unclaimed. Two Activations of one session then live
	// at once, each with its own epoch.
	PlantedActivationWithoutClaim = "activation-without-claim"

	// PlantedAuthzBySender: the parent-only check compares the parent of record with
	// the sender the message claims (its source's SenderSessionID, which any caller
	// sets) instead of the session of the exact live incarnation that sent it, so
	// any live agent that claims to be the parent is let through.
	PlantedAuthzBySender = "authz-by-sender"

	// PlantedFIFOByMapIteration: the next turn is taken by ranging over the pending
	// messages indexed by id — a map, whose iteration order Go randomizes — instead
	// of from the head of the queue in acceptance order.
	PlantedFIFOByMapIteration = "fifo-by-map-iteration"
)

// plantedResumeCold is PlantedActivationWithoutClaim, if planted (it reports
// whether it handled m): claimed is the child's resident Activation, fully
// materialized and not closing. It is forgotten, not disposed, and m cold-resumes
// the child as if it were absent.
func (d *directoryActor) plantedResumeCold(c actor.Context, m *followupReq, claimed *entry) bool {
	if !fault.Planted(PlantedActivationWithoutClaim) {
		return false
	}
	d.unindex(claimed)
	e, err := d.materialize(c, m.id, m.parent, claimed.label)
	if err != nil {
		d.index(claimed)
		m.refuse(err)
		return true
	}
	e.starting = &pending{resume: m}
	d.submitFirst(c, e, &m.submit)
	return true
}

// plantedTake is the next turn's pick with PlantedFIFOByMapIteration planted (ok
// false: not planted, take the queue's head).
func plantedTake(queue []session.InboxMessage) (next session.InboxMessage, rest []session.InboxMessage, ok bool) {
	if !fault.Planted(PlantedFIFOByMapIteration) {
		return next, nil, false
	}
	next, rest = takeByMapIteration(queue)
	return next, rest, true
}

// plantedSender is PlantedAuthzBySender: the session a followup's source claims
// (ok false: not planted, or no claim).
func plantedSender(src session.Source) (string, bool) {
	if fault.Planted(PlantedAuthzBySender) && src.SenderSessionID != "" {
		return src.SenderSessionID, true
	}
	return "", false
}

// takeByMapIteration is PlantedFIFOByMapIteration's pick: the first message a
// range over the pending messages by id yields, and the others in queue order.
func takeByMapIteration(queue []session.InboxMessage) (session.InboxMessage, []session.InboxMessage) {
	pending := make(map[string]int, len(queue))
	for i, m := range queue {
		pending[m.ID] = i
	}
	next := 0
	for _, i := range pending {
		next = i
		break
	}
	return queue[next], append(queue[:next:next], queue[next+1:]...)
}
