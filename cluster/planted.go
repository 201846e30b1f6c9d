//go:build troupe_mutation

package cluster

import (
	"context"
	"os"
	"slices"
	"strings"

	"github.com/troupe-rt/troupe/internal/fault"
	"github.com/troupe-rt/troupe/session"
)

// The planted bugs of the cluster child (TESTING.md's mutation check). This file
// is compiled only into troupe_mutation builds (planted_off.go is its no-op twin
// in every other build); even there each bug is inert until planted. A node is
// its own OS process, so the multi-process suite plants a bug in its members
// through PlantEnv, which RunNode reads (only in these builds).

// PlantEnv names the environment variable through which a troupe_mutation node
// process plants the bug it names (a Planted… value) for its whole life.
const PlantEnv = "TROUPE_CLUSTER_PLANT"

// PlantedWriteWithoutEpoch names a planted bug: the Activation does not carry
// its own epoch on its writes; it reads the session's current epoch from the
// store just before each one (read-then-write), so a stale Activation's writes
// are accepted beside the current one's: two live Activations of one session.
const PlantedWriteWithoutEpoch = "cluster-write-without-epoch"

// PlantedRetryReaccepted names a planted bug: a followup whose message id the
// Activation has already accepted (a hedged or retried attempt of it) is
// accepted again instead of answered with the first acceptance: a duplicate.
const PlantedRetryReaccepted = "cluster-retry-reaccepted"

// PlantedRestoreByID names a planted bug: on activation, the accepted messages
// that never started are queued by message id (as if gathered into a map keyed
// by it) instead of in acceptance order.
const PlantedRestoreByID = "cluster-restore-by-id"

// plantFromEnv plants $TROUPE_CLUSTER_PLANT's bug for the process's life.
func plantFromEnv() {
	if name := os.Getenv(PlantEnv); name != "" {
		fault.Install(fault.New(0, fault.Plant(name)))
	}
}

// plantedWriteEpoch is the epoch the grain writes with under
// PlantedWriteWithoutEpoch (the store's current one), ok false otherwise.
func (g *grain) plantedWriteEpoch(ctx context.Context) (uint64, bool) {
	if !fault.Planted(PlantedWriteWithoutEpoch) {
		return 0, false
	}
	h, err := g.n.store.Head(ctx, g.id)
	if err != nil {
		return 0, false
	}
	return h.Header.Epoch, true
}

// plantedReaccept reports whether PlantedRetryReaccepted makes the grain accept
// a message id it has seen again.
func plantedReaccept() bool { return fault.Planted(PlantedRetryReaccepted) }

// plantedRestoreOrder reorders the unstarted messages under PlantedRestoreByID.
func plantedRestoreOrder(toRun []session.InboxMessage) []session.InboxMessage {
	if !fault.Planted(PlantedRestoreByID) {
		return toRun
	}
	out := slices.Clone(toRun)
	slices.SortFunc(out, func(a, b session.InboxMessage) int { return strings.Compare(a.ID, b.ID) })
	return out
}
