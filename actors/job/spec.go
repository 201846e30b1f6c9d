package job

import (
	"errors"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/messages"
)

// Status is a job's lifecycle state.
type Status = messages.JobStatus

// The job statuses (SPEC §2.1).
const (
	Running   = messages.JobStatus_JOB_STATUS_RUNNING
	Stopping  = messages.JobStatus_JOB_STATUS_STOPPING
	Completed = messages.JobStatus_JOB_STATUS_COMPLETED
	Killed    = messages.JobStatus_JOB_STATUS_KILLED
	Failed    = messages.JobStatus_JOB_STATUS_FAILED
)

// Outcome is what a producer settles its job with. Status must be Completed, Killed
// or Failed. An empty Detail or Output means "not given".
type Outcome struct {
	Status Status
	Detail string // a kind-specific phrase such as "exit code: 0"
	Output string // the final output of a final-output kind (one without ReadOutput)
}

// Hooks are what a producer's Run returns.
//
// Cancel is called for the job actor on a goroutine troupe owns (the job actor's
// own when CancelNonBlocking), one call at a time and never together with
// ReadOutput; it should not block, must be idempotent and must eventually make the
// producer send its outcome on Done. A returned error (or a panic) means the
// cancel failed and changes nothing. A Cancel that blocks (not declared
// CancelNonBlocking) holds up only its own job: its kills and reads wait (until
// their callers' ctx ends), while its waits, every other job and the registry go on. A Done that never sends
// keeps the job stopping until Shutdown's deadline or the opt-in SettleTimeout
// settles it failed.
//
// Done carries exactly one Outcome, sent after the producer released its
// resources. troupe reads one value; a channel closed without one settles failed.
//
// OnSettle, set in place of Done (a producer sets exactly one of them), is the
// channel-free settlement: troupe calls it once, on the job actor, as the job's
// actor starts, with the settle function to call with the producer's one Outcome
// (after releasing its resources), from any goroutine, at most once (troupe takes
// the first call; settle never blocks). Settler implements it for a producer,
// including an outcome settled before troupe called OnSettle. It costs the job no
// watcher shard: a Done channel is one of up to 64 a shared goroutine selects over,
// and every outcome wakes that select.
//
// ReadOutput, if set, makes the job a stream kind: each call returns the output
// produced since the previous call (a consuming cursor). It is called on the
// registry (a read answered in one hop), except from the moment a kill, teardown
// or forced failure is sent to the job until it settles, when the job actor calls
// it; after settlement the registry calls it again. It must not block.
//
// CancelNonBlocking is the producer's promise that Cancel returns at once: it
// never waits on I/O, on a lock held for long or on the job's own progress (a
// non-blocking channel send, a context's cancel, a signal). troupe then calls
// Cancel on the job actor itself instead of on a goroutine of its own, which saves
// two goroutine hand-offs per kill (the runner's wake and its result's); the
// serialisation, the order of what arrives meanwhile and every result are the
// same. A Cancel so declared that blocks holds up its job actor — the job's waits
// too — and a dispatcher worker (the pool starts an escape worker after
// troupe.BlockedAfter) until it returns: leave it false when in doubt.
//
// ReadNonBlocking is the producer's promise that ReadOutput returns at once: it
// copies what is buffered under the producer's own short lock and never waits on
// I/O, on a lock held for long (across a write to a pipe, say) or on the job's
// progress. troupe may then call ReadOutput on the goroutine of a caller whose
// ctx can end (registry Config.CallerRuns, the registry idle), saving the
// registry worker's wake and the caller's; a read of an undeclared producer is
// called so only for a ctx that can never end, and otherwise on the registry's
// worker, so that its caller still returns at its ctx's end. A ReadOutput so
// declared that blocks holds up its caller past its ctx's end, and the registry
// with it: leave it false when in doubt. A Client's kill routed to an idle job
// actor may run that actor's step, a Cancel so declared included, on the
// killer's goroutine (Kill.Handoff), but only for a killer whose ctx can never
// end, which waits for the Cancel's return either way.
//
// SettleInline is the producer's promise that it calls OnSettle's settle function
// from a goroutine that holds no lock (and is inside no call) that its own hooks,
// the registry's listeners or an owner's surface could wait for, and that may be
// held up by the settlement's step: the producer's own supervising goroutine
// after it released its resources. troupe may then run the idle job actor's step
// on that goroutine (registry Config.CallerRuns: troupe's PoolDispatcher) — the
// settlement, the registry's commit, its onJobDone/onJobsChanged listeners, the
// notice to an owner whose surface enqueues only, the job actor's stop — instead
// of waking a worker for it (issue 15: the notice latency). Undeclared, settle
// only sends. A settle called inside the producer's Cancel, or before OnSettle,
// is never run so (the job actor is not idle then). It applies to OnSettle only.
type Hooks struct {
	Cancel            func(reason string) error
	CancelNonBlocking bool
	Done              <-chan Outcome
	OnSettle          func(settle func(Outcome))
	ReadOutput        func() (string, error)
	ReadNonBlocking   bool
	SettleInline      bool
}

// Spec is a request to start a background job (SPEC §2.1 JobStart).
type Spec struct {
	Kind  string // also the id prefix: bash → bash-1, bash-2, ...
	Label string // a one-line, model-facing description
	// OutputLimitBytes, if non-nil, must be a positive safe integer.
	OutputLimitBytes *int64
	// Owner is the agent instance that owns the job; nil for an unowned job.
	Owner *owner.Agent
	// Record, if set, is the job's non-consuming output record (what job.follow
	// streams); the producer appends to it. nil: the job declares no record.
	Record *Record
	// Run starts the work and returns its hooks. It runs inside the registry's start
	// message: it must return promptly and must not call the registry. An error or a
	// panic registers nothing and uses no id.
	Run func() (Hooks, error)
}

// ErrWaitTimeout is the context cause a wait's own deadline carries (SPEC's
// TASK_WAIT_TIMEOUT): a wait ended by it returns the live snapshot and claims nothing.
var ErrWaitTimeout = errors.New("TASK_WAIT_TIMEOUT")

// The kill reasons troupe itself uses.
const (
	ReasonOwnerDisposed   = "owner disposed"
	ReasonServiceDisposed = "jobs service disposed"
)
