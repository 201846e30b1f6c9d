//go:build !troupe_mutation

package activation

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/session"
)

// The no-op twins of planted.go's hooks: outside troupe_mutation builds there are
// no planted bugs, and each hook inlines to nothing (test/mutation's build check
// finds no "planted" symbol in a default binary).

func (*directoryActor) plantedResumeCold(actor.Context, *followupReq, *entry) bool { return false }

func plantedTake([]session.InboxMessage) (session.InboxMessage, []session.InboxMessage, bool) {
	return session.InboxMessage{}, nil, false
}

func plantedSender(session.Source) (string, bool) { return "", false }
