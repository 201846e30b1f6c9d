// Package registry is the job registry actor (SPEC §2) and the agent registry
// beside it (SPEC §1.3 rule 27): admission and ids, routing to job actors, listing,
// the observer layers, and session id → registered agent instance.
//
// Authority (docs/THREAT-MODEL.md). An agent incarnation's authority is its
// *owner.Agent handle — only owner.Spawn mints one — and it speaks for its session
// only while it is the registered instance. The registry's own rule for replacing
// one: a live registered instance is displaced only by ReplaceAgent, which needs
// its handle; RegisterAgent of any other instance fails job/agent-registered until
// the registered one leaves (unregistered, disposed, or its owner actor stopped).
//
// Wire requests (messages.GetRequest … WaitRequest) come from any actor or peer, so
// neither the session string they assert nor their sender PID — which
// RequestWithCustomSender and remote envelopes set freely — is authority. Each
// registration mints a 256-bit crypto/rand credential (WireCredential hands it to
// the registered instance's holder); a request that names a session must carry that
// session's current credential, or it is refused job/unauthenticated before any
// lookup. A replaced, unregistered or disposed incarnation's credential is revoked
// with its registration.
package registry
