//go:build !troupe_mutation

package cluster

import (
	"context"

	"github.com/troupe-rt/troupe/session"
)

// The no-op twins of planted.go's hooks: outside troupe_mutation builds there are
// no planted bugs, $TROUPE_CLUSTER_PLANT is not read, and each hook inlines to
// nothing (test/mutation's build check finds no "planted" symbol in a default binary).

func plantFromEnv() {}

func (*grain) plantedWriteEpoch(context.Context) (uint64, bool) { return 0, false }

func plantedReaccept() bool { return false }

func plantedRestoreOrder(toRun []session.InboxMessage) []session.InboxMessage { return toRun }
