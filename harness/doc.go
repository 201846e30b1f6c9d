// Package harness is troupe's test harness for concurrency: seeded schedules,
// seeded noise, one seed per run, and a linearizability model of job settlement.
// troupe's own suites use it (test/settle), and so can embedders testing their
// producers and agents against troupe.
//
// The contract:
//  1. Call Seed(t) first in a randomized test: it reads -seed or $TROUPE_SEED (or
//     picks one), logs it, and on failure logs the exact rerun command. Derive every
//     random choice of the test from it.
//  2. For a deterministic schedule, start troupe with a Dispatcher:
//     troupe.Config{Dispatcher: harness.NewDispatcher(seed)}. Every troupe actor then
//     runs on one worker goroutine that picks the next queued mailbox run with the
//     seeded RNG. Close the dispatcher after the System has shut down. See
//     Dispatcher for exactly what replays and what does not.
//  3. For a stress schedule, keep troupe's default dispatcher and add seeded scheduling
//     noise: Noise(seed, pct) at the test's own race points, and Chaos(t, seed, pct)
//     for troupe's internal ones.
//  4. Record each job's operations in a History (Call for a request and its reply,
//     Open for an outcome sent on Done, Instant for an observer call) and check it
//     with CheckSettlement: one terminal state, the first outcome wins, every later
//     observation agrees. A failing history is written under $TROUPE_ARTIFACTS as
//     porcupine's HTML timeline.
package harness
