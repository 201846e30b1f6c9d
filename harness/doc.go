// Package harness is troupe's test harness for concurrency: seeded schedules,
// seeded noise, named fault points, a fake clock, one seed per run, and
// linearizability models (porcupine) of job settlement, of the continuation
// directory and of an inbox's FIFO. troupe's own suites use it (test/settle,
// test/notices, test/activation_suites), and so can embedders testing their
// producers, providers and turn runners against troupe.
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
//     for troupe's named internal ones ("job.settle.before-decide",
//     "job.settle.after-decide", "job.done.deliver", "job.cancel.after-hook",
//     "registry.settle.commit"; the continuation directory's
//     "directory.followup.route", "directory.materialize.after-activate",
//     "directory.settle.close-admission", "directory.release"; the Activation's
//     "activation.accept.after-write", "activation.turn.start",
//     "activation.turn.end", "activation.dispose.decide"; the owner actor's
//     "owner.notice.deliver", "owner.child-notice.deliver", "owner.relay.deliver").
//     Chaos returns a hit counter per point name.
//  4. To test a producer for cancellation races, Race runs it as a job against
//     concurrent kills, waits, reads and gets and checks what everyone saw (and what
//     the producer sent on Done) against the settlement model. For finer control,
//     record each job's operations in a History (Call for a request and its reply,
//     Open for an outcome sent on Done, Instant for an observer call) and check it
//     with CheckSettlement: one terminal state, the first outcome wins, every later
//     observation agrees.
//  5. For continuable subagents, record DirectoryOp values (acquire, restart,
//     release, turn begin and end) and FIFOOp values (enqueue with the inbox's
//     sequence number, dequeue at a turn's start) and check them with CheckDirectory
//     (at most one live Activation per session, epochs only grow) and CheckFIFO
//     (turns in acceptance order, none lost or doubled).
//  6. Every Check* writes a failing history under $TROUPE_ARTIFACTS as porcupine's
//     HTML timeline, and returns a *LinearizabilityError with the history as text.
//  7. Clock is a fake clock for components that read the time (troupe.Config.Clock,
//     supervision.Restarting); for timers and sleeps use a testing/synctest bubble.
package harness
