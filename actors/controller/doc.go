// Package controller is the human control surface (SPEC §4, Rev C, as §1.3 rules
// 32–34 adopt it): the job-controller actor, which a UI or any actor — local or
// remote, since every message is protobuf — sends:
//
//   - JobKill {sessionId, jobId}: a kill with reason "cancelled by the user" that
//     never claims the completion report (so the model is told, with the reason);
//     an unknown or foreign job is job/not-found; a failing cancel comes back as is.
//   - JobListOpen {sessionId}: roster frames of the session's visible jobs, one at
//     once and one after each coalesced burst (ObserveFlush) of lifecycle changes.
//   - JobFollowOpen {sessionId?, jobId, from?}: an opened frame, output frames of the
//     job's record from `from` (lossy when it was evicted) of at most
//     ObserveMaxFrameBytes, then one terminal status frame after settlement.
//   - StreamClose {streamId}: ends a stream.
//
// None of them reads the model's output, registers a waiter or touches a claim.
package controller
