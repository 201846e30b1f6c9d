// Package activationsuites holds TESTING.md's activation, fifo and authz suites for
// continuable subagents (SPEC §6, §1.3 rules 35–38), run against the continuation
// manager's public API (actors/activation) on real actors.
//
// Every suite builds a world (world_test.go): a served troupe System, a recording
// session store wrapped around session.Memory, a recording TurnRunner, and a
// Manager whose child agents are made by the test (so each child's agent — its
// credential towards grandchildren — is captured, and each activation's end is
// observed by an effect on that agent's scope). What is recorded:
//
//   - Acquire: the store's Activate of a session (the call and return times, the
//     epoch it handed out). The epoch is the activation's nonce: Activate is called
//     once per materialization and bumps it by one.
//   - Release: the activation's child agent being disposed (the last step of its
//     disposal before the directory forgets it).
//   - Turn: a RunTurn call (entry and return), with the epoch of the activation that
//     started it (the store saw the turn/start append carrying that epoch and the
//     turn's unique input text).
//   - Enqueue/Dequeue: a Followup or Start (call, return, the inbox Seq the store
//     assigned) and the RunTurn entry of its turn.
//
// Times are a logical clock (one atomic counter), so porcupine orders operations
// exactly as they were observed.
//
// Modes: deterministic (every activation actor on harness.Dispatcher: one worker,
// seeded picks; the directory, the owners and the test's own goroutines run outside
// it, so a seed replays the dispatcher's decisions, not the whole interleaving) and
// stress (troupe's default dispatcher, seeded Gosched noise at the test's race
// points and troupe's fault points). Run both under -race for the race mode.
//
// Knobs: -seed / TROUPE_SEED (the run's seed, logged first; a failing schedule logs
// its rerun command), TROUPE_CHAOS_SCHEDULES (schedules per test and mode; defaults
// keep `go test -race ./test/activation_suites/` under a minute on 2 cores),
// TROUPE_ARTIFACTS (where failing histories and porcupine's HTML go).
package activationsuites

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
