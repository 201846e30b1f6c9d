// Package workflow is the workflow engine (WORKFLOW.md, which replaces SPEC §7):
// it runs short JavaScript programs the model writes, whose agent() calls fan out
// into children through the subagent seam, and settles each run with one JSON value.
//
// The caller's contract:
//  1. NewEngine(host, sc, rt, cfg) starts the engine actor. Children start through
//     rt with cfg.Provider ("spawn" by default). Disposing sc stops new starts
//     (troupe/stopped "workflow engine is stopped"); runs already returned go on.
//     Disposing host.Scope (the system's shutdown) cancels every live run with
//     "workflow engine stopped", disposes it, then stops the engine.
//  2. Engine.Prepare(req) runs every synchronous check (meta, parse, provider route,
//     caps, args) and publishes nothing; its error is a *messages.Error with the
//     workflow code (SCRIPT_PARSE, META_INVALID, INVALID_ARGUMENT, AGENT_START).
//     Prepared.Launch(ctx) mints the run id, dispatches workflow/start and returns
//     at once; ctx is the run's cancel signal. Engine.Start is both. A job registry
//     can sit between the two (the workflow tool registers the run as a job of kind
//     workflow, WORKFLOW.md 5.5, and launches it from the job's Run).
//  3. Run.Result(ctx) never fails for a run failure: the Result carries the stop
//     reason (completed, cancelled, error), the JSON value and AgentsStarted.
//     Run.Cancel(reason) resolves cancelled within DisposeGraceMs. Run.Dispose(ctx)
//     must be called on every path: it cancels, disposes every child, waits at most
//     the grace for quiescence, terminates the script, and returns once workflow/end
//     reached every listener.
//  4. Engine.Listen(sc, fn) hears the runs of parents composed under sc (every run
//     for the global scope); Request.Observe hears one run first. Listeners run on
//     the engine actor: they must not block or call the engine.
//
// # Actors (who owns what)
//
//	workflow-engine-*     one per engine: listeners by scope layer, the live runs, the
//	                      stopping flag; a top-level node (resume under its guardian);
//	                      supervises its runs with stop
//	workflow-run-<id>     one per live run: the settlement core (runCore: terminal claim,
//	                      cancel reason, child ledger, open agent-starts), pending
//	                      starts, the grace and dispose timers, the ctx watch; a panic
//	                      settles its run error "workflow run actor failed: …"
//	workflow-script       one per live run, the run actor's child: the goja runtime (the
//	                      only goroutine that runs its JS), the seq counter, the slots
//	                      and their FIFO, the current phase; supervised with stop — a
//	                      panic is the script failure "workflow script failed: …"
//
// All three report spawned/stopped to the supervision tree (kinds workflow-engine,
// workflow-run, workflow-script). Goroutines besides the actors, each owned by its run:
// a provider call per pending start, a result forwarder per published child (ends
// with its child's result or the run actor's stop), a dispose per child, and the
// slice budget's timer — the one thing that touches a runtime from another goroutine,
// through Runtime.Interrupt, as does the run actor's termination (budget guards that
// shared flag set with a lock of its own).
//
// # Limits, honestly
//
// goja has no per-runtime heap limit. What is bounded: each slice of JavaScript
// (SyncTimeoutMs, enforced with Runtime.Interrupt — which takes effect between JS
// instructions, not inside one native built-in such as String.prototype.repeat), the
// call depth (10 000 frames, "RangeError: Maximum call stack size exceeded"), accepted
// agent() calls (MaxTotalAgents), items per parallel()/pipeline() call
// (MaxItemsPerCall) and children in flight (MaxConcurrentAgents). What is not: what a
// script allocates within its budget — a script that keeps rebuilding a 100 MB string
// reaches several hundred MiB of host heap before its budget ends it, and a returned
// 100 MB value crosses the JSON boundary whole (the workflow tool bounds what the
// model reads). TestWorkflowHostileScripts measures the peak host heap of each hostile
// script. Scripts are trusted like the model's shell access; this is not a sandbox.
//
// The spawn provider's children end on Dispose, not on the start ctx, so a cancel of
// a run waiting on a spawn child resolves when the grace expires (DisposeGraceMs);
// providers that honour the start ctx resolve at once.
package workflow
