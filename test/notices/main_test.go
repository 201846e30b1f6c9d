// Package notices is TESTING.md's notices suite: completion notices of background
// jobs, end to end — registry settlement, the tool-jobs listener, the owner actor's
// lane choice and the agent's delivery surface — for owners that are busy, idle,
// torn down while their jobs run, torn down just as their jobs settle, or replaced
// by a same-session incarnation, and jobs that complete, fail, are killed by the
// model (job_kill), are killed by a human (job.kill: a reason and no claim), or
// outrun a model kill.
//
// Oracle, exact counters per round and in total:
//   - jobs settled == notices delivered + notices claimed, where claimed is the
//     snapshot's `reported` at settlement (SPEC §1.3 rules 4–5);
//   - each settled job's status, detail and claim are the ones SPEC predicts;
//   - no job is noticed twice (and the owner actor never had to drop a duplicate);
//   - no notice precedes its settlement's commit: a listing the surface queues at
//     the registry as the notice arrives shows the job settled;
//   - every notice reaches the exact incarnation that started the job (Rev A): never
//     a same-session replacement, never an incarnation whose teardown claimed the
//     job; a notice due before a teardown began is delivered before the actor stops;
//   - lanes: a busy owner or quiet delivery gets Inject; an idle owner under wakeup
//     gets Followup while its wake budget lasts, then Inject; the owner's SpentWakes
//     equals the model's and never exceeds maxConsecutiveWakes.
//
// "No notice" is asserted after a positive barrier: a Stats request to the owner
// actor sent after the job's settlement (and its observers) completed, or, for an
// owner being torn down, a probe effect that runs after its jobs were torn down and
// before its actor stops; for an owner torn down as its jobs settle, the actor's
// stop itself (no probe, which would flush its mailbox). Nothing sleeps.
//
// Knobs: -seed / TROUPE_SEED (the randomized variant's seed), TROUPE_NOTICE_ROUNDS
// (rounds per mode and delivery of the randomized variant, default 60).
package notices

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
