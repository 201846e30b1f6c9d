// Package settle is TESTING.md's settle suite: seeded schedules that race a job's
// settle sources — producer done (completed, failed, killed, closed, an unknown or
// a live status, sent twice), a Cancel that settles, panics or does neither, kills that claim or not,
// owner teardown and service disposal — against waits, reads and gets, on real
// actors. Each schedule's history of one job is checked by porcupine against
// harness.SettlementModel, and by exact counters: one settlement commit, at most one
// onJobDone (exactly one unless the service was disposed), replies that agree with
// the winner, the admission slot released exactly once.
//
// Modes: deterministic (every troupe actor on harness.Dispatcher: one worker, seeded
// picks) and stress (troupe's default dispatcher). Both add seeded Gosched noise at ~10%
// of troupe's fault points and of the test's own race points. Both run under -race
// in the default count; -cpu 1,2 varies the rest. The producer, the Done watcher,
// wait timers and the test's goroutines run outside the dispatcher, so a
// deterministic schedule replays its dispatcher's decisions from the seed, not
// necessarily its whole interleaving (see harness.Dispatcher).
//
// The TestMutation_ tests are the mutation check (test/mutation): with a bug of
// the catalogue planted (check-then-act settlement, double slot release) the
// suite's schedules must fail, and the same schedules without it pass.
//
// Knobs: -seed / TROUPE_SEED (the run's seed), TROUPE_CHAOS_SCHEDULES (total
// schedules, default 3,000, split between the modes), TROUPE_SCHEDULE (run only the
// schedule with that index: what a failure's rerun command sets), TROUPE_ARTIFACTS
// (where failing histories and porcupine's HTML go).
package settle

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
