package job

import (
	"context"
	"errors"
	"time"

	"github.com/troupe-rt/troupe/internal/mailbox"
	"github.com/troupe-rt/troupe/messages"
)

// The requests below are local Go values: the job registry routes them to the live
// job actor, or answers them itself once the job has settled. Each carries a reply
// channel with room for one value; whoever answers sends exactly one reply. A job
// actor serves one only with its registry's stamp (Route, route.go).
// (Their wire forms are messages.ReadRequest and friends.)

// Read asks for the output since the last read (stream kinds) and a snapshot.
type Read struct {
	Route
	ID, Caller string
	Ctx        context.Context // the caller's; once done, no read happens (nil: never done)
	Reply      chan<- ReadResult
}

// ReadResult answers Read.
type ReadResult struct {
	Text     string
	Snapshot *messages.JobSnapshot
	Err      error
	// Free reports that whoever answered holds no reference to the Read, nor to its
	// Reply, any more: the sender may reuse both for its next read. Only the
	// registry sets it, for a read its Client sent it that it answered itself (not
	// one it routed to a job actor, nor one a job actor forwarded back); every
	// other answer leaves it false, and a Read answered without it is never reused.
	Free bool
}

// Kill asks the producer to stop. NoClaim leaves the completion report unclaimed.
type Kill struct {
	Route
	ID, Caller string
	Reason     string
	NoClaim    bool
	Ctx        context.Context // the caller's; once done before Cancel starts, nothing changes (nil: never done)
	Reply      chan<- KillResult
	// Handoff, when set (a registry Client's kill with Config.CallerRuns), makes
	// the kill a mailbox.BySender message: routed to an idle job actor, the
	// actor's run is left in it for the killer, which takes it after its send and
	// runs it before waiting for the answer (registry Client.Kill) — the Cancel
	// (declared non-blocking, or handed to a runner), the landed kill's commit and
	// the settlement riding with it, the answer, the actor's stop. No worker is
	// woken, and the killer finds its answer in Reply.
	Handoff *mailbox.Handoff
}

// BySender offers an idle job actor's run to the killer (Handoff, when set).
func (k *Kill) BySender() (bool, *mailbox.Handoff) { return false, k.Handoff }

// KillResult answers Kill with the result and a snapshot taken in the same step.
type KillResult struct {
	Result   messages.KillResult
	Snapshot *messages.JobSnapshot
	Err      error
	// Free reports that whoever answered holds no reference to the Kill, nor to its
	// Reply, any more: the sender may reuse both for its next kill. Only the
	// registry sets it: for a kill its Client sent it that it answered without
	// routing, and for a landed kill it answers from the job actor's StopRequested
	// (the job actor has let go of the Kill when it sends that). Every other answer
	// (the job actor's own, a forwarded kill's) leaves it false, and a Kill
	// answered without it is never reused.
	Free bool
}

// Wait waits for settlement. Ctx carries the wait's own deadline (cause
// ErrWaitTimeout) and the caller's cancellation; Token names the wait for WaitEnd.
type Wait struct {
	Route
	ID, Caller string
	Timeout    time.Duration
	Token      uint64
	Ctx        context.Context
	Reply      chan<- WaitResult
}

// WaitResult answers Wait.
type WaitResult struct {
	Snapshot *messages.JobSnapshot
	Err      error
}

// WaitEnd tells the job that the wait's context ended; a still-pending wait is
// un-counted and answered as its timeout or abort.
type WaitEnd struct {
	Route
	ID    string
	Token uint64
}

// Teardown is the registry's cancel-for-teardown (SPEC §2.11): claim, then cancel.
type Teardown struct {
	Route
	Reason string
}

// Messages a job actor sends to the registry.

// StopRequested says a cancel landed: the job is stopping. If Kill is set, the registry
// answers it after committing the change. If Settled is set, the job actor settled
// the job in the same step (the outcome was held behind the Cancel, as when Cancel
// itself settles): the registry commits the settlement right after the stop — one
// message, one registry step — and answers Kill last, with the stopping snapshot.
type StopRequested struct {
	ID       string
	Reported bool
	Kill     *Kill
	Settled  *Settled
}

// HandledBySender makes StopRequested an internal/mailbox Inline message, as
// Settled is: sent to an idle registry, the job actor's goroutine runs the
// registry's step itself (the stop's commit, the settlement riding with it, the
// kill's answer; none of them blocks). A landed kill then wakes no registry
// worker, and the settlement's poison of this actor is queued to its own running
// mailbox, so the actor stops in the run it is in instead of in a run of its own
// on another worker, beside the killer's next request (issue 15: kill→settled's
// tail; that run and its hand-offs were what the slowest kills had in them).
func (*StopRequested) HandledBySender() bool { return true }

// Settled hands a settled job to the registry, which commits the record, releases
// Waiters with the settled snapshot, and calls the observers. From then on the
// registry answers for the job; the job actor forwards what it still receives.
type Settled struct {
	ID         string
	Decision   Decision
	FinishedAt int64
	Waiters    []chan<- WaitResult
	ReadOutput func() (string, error)
}

// HandledBySender makes Settled an internal/mailbox Inline message: sent to an idle
// registry, the job actor's goroutine runs the registry's commit itself (the
// registry's handlers never block), so no worker is woken for it.
func (*Settled) HandledBySender() bool { return true }

// Error texts of the wait path.
const (
	TextWaitAborted = "wait aborted"
)

// WaitAborted is the error of a wait ended by its caller's context.
func WaitAborted() error {
	return &messages.Error{Code: messages.CodeWaitAborted, Message: TextWaitAborted}
}

// WaitAbortedBy is WaitAborted carrying ctx's error and cause, so errors.Is matches
// context.Canceled or context.DeadlineExceeded as well as ErrWaitAborted.
func WaitAbortedBy(ctx context.Context) error {
	err := WaitAborted().(*messages.Error)
	if ctx != nil && ctx.Err() != nil {
		err.Cause = ctx.Err()
		if c := context.Cause(ctx); c != nil && c != err.Cause {
			err.Cause = errors.Join(err.Cause, c)
		}
	}
	return err
}

// CountWaiters asks how many waits are pending (test inspection, SPEC §1.3 rule 11).
type CountWaiters struct {
	Route
	ID    string
	Reply chan<- int
}
