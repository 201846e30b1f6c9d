// Package activation is the continuation manager (SPEC §6): continuable children,
// each a durable session with at most one live Activation.
//
// The embedder's contract:
//  1. troupe.System.StartContinuations(store, runtime, runner, surface) (Start with
//     the Host the facade fills) makes the Manager of a System; the
//     agent registry must be mounted (Jobs().MountAgents) for parents to be live.
//     Without a store every start fails PERSISTENCE_UNAVAILABLE; a Manager built
//     with NewManager and no Deps.Jobs answers CONTINUATION_UNAVAILABLE.
//  2. Manager.Start returns once the first prompt is accepted — durable in the
//     child's inbox journal — before any model request. Its ctx governs only the
//     steps before acceptance: a failure (ctx's end included) rolls the child back.
//  3. Followup, Interrupt, Report, List and the drains address a child by session
//     id; the exact live agent instance passed in is the authority, never a sender.
//     A child's own agent reaches only its turns (TurnAgent(ctx)); no lookup by id
//     returns it. A parent of record is a session and a namespace (a top-level agent
//     or a continuable child, session.Header.ParentKind): a model-chosen child id
//     that equals a top-level session's id never speaks for that session's
//     children, nor the reverse (docs/THREAT-MODEL.md).
//  4. A child's turns run through the TurnRunner, one at a time, in acceptance
//     order. A child settles when no turn runs, no woken message waits and no child
//     of its own is resident; its parent then gets the settlement notice.
//  5. Shutting the System down drains every Activation, child-first.
//  6. With a Placement (WithPlacement; troupe.System.JoinCluster) Start, Followup
//     and Interrupt by an agent check the exact live parent here and go to the
//     cluster member that owns the child, whose Manager runs them with StartPlaced,
//     FollowupHere and InterruptHere; the other calls stay on this Manager.
//
// Actors and goroutines:
//   - the directory actor (one per Manager) owns session id → Activation, the
//     per-child lock (operations waiting on a starting or closing child), drains,
//     and supervises its Activations: a panicking one is reset in place (resumed,
//     its actor kept: every Activation shares one Props) and restores from the
//     store (the turn in flight recorded aborted, queued messages kept);
//   - an Activation actor (one per live child) owns the Core (fifo.go: the FIFO,
//     parking, owned children, disposal), the session history and the epoch;
//   - each running turn is a goroutine of its Activation, with a cancelable
//     context; its end comes back as a message and nothing else touches the state.
package activation
