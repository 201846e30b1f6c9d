// Package owner holds the owner actor: one per live agent incarnation.
//
// An agent instance is its session id (reusable across restarts) plus the PID of its
// owner actor (unique per incarnation). The job registry fences read, list, kill and
// wait by session id, and ties lifecycle — teardown of the jobs an instance started,
// completion notices — to the exact PID, so an old incarnation's cleanup or notice
// never reaches a same-session replacement (SPEC §1.3 rules 26, 29).
//
// The caller's contract:
//  1. Spawn an Agent under the Scope it is composed in; it gets a Scope of its own.
//  2. Register it with the agent registry if it should own jobs.
//  3. Dispose the Agent (or its Scope) when the incarnation ends: its jobs are torn
//     down first, then the owner actor stops. An owner actor that stops for any other
//     reason tells the registry, which tears its jobs down the same way.
package owner
