package cluster

import "github.com/troupe-rt/troupe/messages"

// Stable error codes of the cluster (an Ack's code, a Node call's *messages.Error).
const (
	CodeNotFound     messages.Code = "cluster/not-found"     // no session with that id in the store
	CodeUnauthorized messages.Code = "cluster/unauthorized"  // the sender is not the child's parent
	CodeStaleEpoch   messages.Code = "cluster/stale-epoch"   // the Activation lost its epoch (a newer one took over)
	CodeUnavailable  messages.Code = "cluster/unavailable"   // the child could not be reached (no member, timeout)
	CodeInvalid      messages.Code = "cluster/invalid"       // an empty id, oversized content or invalid UTF-8
	CodeStore        messages.Code = "cluster/store"         // the store failed a read or write
	CodeDuplicate    messages.Code = "DUPLICATE_CHILD"       // Start on an id that exists (SPEC §6.2 step 5)
	CodeInsecureBind messages.Code = "cluster/insecure-bind" // a non-loopback listener without TLS
	CodeConfig       messages.Code = "cluster/config"        // a missing store, secret or runner
)

// MaxContent bounds a message's content on the wire and in the store.
const MaxContent = 64 << 10
