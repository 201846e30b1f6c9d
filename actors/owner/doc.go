// Package owner holds the owner actor: one per live agent incarnation.
//
// An agent instance is its session id (reusable across restarts) plus the PID of its
// owner actor (unique per incarnation). The job registry fences read, list, kill and
// wait by session id, and ties lifecycle — teardown of the jobs an instance started,
// completion notices — to the exact PID, so an old incarnation's cleanup or notice
// never reaches a same-session replacement (SPEC §1.3 rules 26, 29).
//
// Authority: an *Agent is an unforgeable handle — only Spawn mints one, its fields
// are unexported — and it speaks for its session only while the job registry has it
// registered (registry.Client.RegisterAgent; a live registered instance is displaced
// only by ReplaceAgent with its handle). The owner actor's PID is not a secret
// (names are owner-N): no message that reaches the Surface or steers its lanes can
// be built outside troupe (they are in internal/deliver, or unexported), so knowing
// the PID grants nothing (docs/THREAT-MODEL.md).
//
// The caller's contract:
//  1. Spawn an Agent under the Scope it is composed in; it gets a Scope of its own.
//  2. Register it with the agent registry if it should own jobs.
//  3. Dispose the Agent (or its Scope) when the incarnation ends: its jobs are torn
//     down first, then the owner actor stops. An owner actor that stops for any other
//     reason tells the registry, which tears its jobs down the same way.
package owner
