package harness

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/messages"
)

// OpKind names an operation of the settlement model.
type OpKind uint8

// The operations on one job that the settlement model knows.
const (
	// OpOffer: a settle source offers an outcome — the producer's Done value (or Done
	// closed, Input.Closed). It has no reply, so record it with History.Open: it takes
	// effect at some point after it was sent. The first offer (or teardown
	// force-failure) to take effect wins.
	OpOffer OpKind = iota
	// OpKill: Kill(id, caller, {Reason, NoClaim}); output: result + snapshot, or an error.
	OpKill
	// OpWait: Wait; output: a settled snapshot, a live snapshot (its timeout), aborted, or gone.
	OpWait
	// OpRead: Read of a final-output job (Input.Stream skips the text check).
	OpRead
	// OpGet: Get, a non-consuming snapshot.
	OpGet
	// OpAnnounce: an onJobDone observer call for the job; happens at most once.
	OpAnnounce
	// OpAwait: AwaitSettled's answer: the settled snapshot, non-claiming.
	OpAwait
	// OpTeardown: a cancel-for-teardown (owner or service disposal) reaching the job.
	// Output.Cancel says what the producer's Cancel did when called with Input.Reason:
	// not called (the job was terminal), returned, or panicked (which force-fails it).
	OpTeardown
	// OpRemove: the record is removed (owner disposal) or the service disposed: from
	// then on every query is Gone. It must follow settlement.
	OpRemove
)

var opNames = [...]string{"Offer", "Kill", "Wait", "Read", "Get", "Announce", "Await", "Teardown", "Remove"}

func (k OpKind) String() string {
	if int(k) < len(opNames) {
		return opNames[k]
	}
	return fmt.Sprintf("Op(%d)", k)
}

// Input is an operation's call.
type Input struct {
	Op      OpKind
	Source  string      // Offer: who offered ("producer", "cancel", ...); informational
	Outcome job.Outcome // Offer: the value sent on Done
	Closed  bool        // Offer: Done was closed without a value
	Reason  string      // Kill: the kill reason; Teardown: the cancel reason
	NoClaim bool        // Kill: a human kill that claims nothing
	Stream  bool        // Read: a stream job (its text is not checked)
}

// Snap is the part of a job snapshot the model checks.
type Snap struct {
	Status    job.Status
	Detail    string
	HasDetail bool
	Reported  bool
	Finished  bool // finishedAt present
}

// SnapOf projects a snapshot (nil gives the zero Snap).
func SnapOf(s *messages.JobSnapshot) Snap {
	if s == nil {
		return Snap{}
	}
	return Snap{Status: s.Status, Detail: s.GetDetail(), HasDetail: s.Detail != nil,
		Reported: s.Reported, Finished: s.FinishedAt != nil}
}

func (s Snap) String() string {
	var b strings.Builder
	b.WriteString(statusText(s.Status))
	if s.HasDetail {
		fmt.Fprintf(&b, " %q", s.Detail)
	}
	if s.Reported {
		b.WriteString(" reported")
	}
	if s.Finished {
		b.WriteString(" finished")
	}
	return b.String()
}

// ErrKind classifies an operation's error.
type ErrKind string

// The error classes the model distinguishes.
const (
	ErrNone         ErrKind = ""
	ErrGone         ErrKind = "gone"          // unknown job (removed) or service disposed
	ErrCancelFailed ErrKind = "cancel-failed" // Kill: the producer's Cancel failed
	ErrAborted      ErrKind = "aborted"       // Wait: the caller's context ended it
)

// ErrOf classifies err: nil, gone (job/not-found, job/disposed), cancel-failed,
// aborted; anything else is "other: <code> <message>", which no model step accepts.
func ErrOf(err error) ErrKind {
	switch messages.CodeOf(err) {
	case "":
		if err == nil {
			return ErrNone
		}
	case messages.CodeNotFound, messages.CodeDisposed:
		return ErrGone
	case messages.CodeCancelFailed:
		return ErrCancelFailed
	case messages.CodeWaitAborted:
		return ErrAborted
	}
	return ErrKind(fmt.Sprintf("other: %s %v", messages.CodeOf(err), err))
}

// CancelKind is what a teardown's call of the producer's Cancel did.
type CancelKind uint8

// Teardown cancel results.
const (
	CancelNotCalled CancelKind = iota
	CancelReturned
	CancelPanicked
)

// Output is an operation's result.
type Output struct {
	Err      ErrKind
	Kill     messages.KillResult // Kill
	HasSnap  bool
	Snap     Snap
	Text     string     // Read
	Cancel   CancelKind // Teardown
	PanicMsg string     // Teardown: the panic (or error) text of a failed Cancel
}

// SettleState is the model's state of one job. It is comparable.
type SettleState struct {
	Status    job.Status // running, stopping, or the terminal status
	Detail    string
	HasDetail bool
	Output    string
	Reported  bool   // the delivery claim (SPEC §1.3 rule 4)
	Claimed   bool   // a claiming kill returned requested while live
	Teardown  bool   // a teardown cancel has begun while live
	Reason    string // the last non-empty reason of a kill that landed
	Announced bool   // onJobDone has been called
	Gone      bool   // removed or disposed
}

// Terminal reports whether the job has settled in this state.
func (s SettleState) Terminal() bool { return terminal(s.Status) }

// The model shares no code with what it checks: the statuses, the names SPEC gives
// them and the "done rejected" rule below are the model's own reading of SPEC's
// text (§2.1, §1.3 rules 14–15), not calls into actors/job or messages.

// terminal: SPEC §2.1's terminal statuses are completed, killed and failed.
func terminal(st job.Status) bool {
	return st == job.Completed || st == job.Killed || st == job.Failed
}

// statusText is a status as SPEC's texts write it: its lower-case name, or, for a
// value that is no status at all, its number.
func statusText(st job.Status) string {
	switch st {
	case job.Running:
		return "running"
	case job.Stopping:
		return "stopping"
	case job.Completed:
		return "completed"
	case job.Killed:
		return "killed"
	case job.Failed:
		return "failed"
	}
	return strconv.Itoa(int(st))
}

// offered is the outcome an offer settles with (SPEC §1.3 rules 14–15, the "done
// rejected" rule): a valid outcome as sent; Done closed without a value, or a
// value whose status is not completed, killed or failed, settles failed with
// "Error: " and the contract violation as detail, and no output.
func offered(in Input) job.Outcome {
	switch {
	case in.Closed:
		return job.Outcome{Status: job.Failed, Detail: "Error: producer done channel closed without an outcome"}
	case !terminal(in.Outcome.Status):
		return job.Outcome{Status: job.Failed,
			Detail: `Error: producer outcome has unknown status "` + statusText(in.Outcome.Status) + `"`}
	}
	return in.Outcome
}

// snapshot is what every observation must show in state s.
func (s SettleState) snapshot() Snap {
	if !s.Terminal() {
		return Snap{Status: s.Status, Reported: s.Reported}
	}
	return Snap{Status: s.Status, Detail: s.Detail, HasDetail: s.HasDetail, Reported: s.Reported, Finished: true}
}

// settle applies an outcome to a live state: SPEC §2.9 with Rev B's merge rule and
// §1.3 rule 4's claim (the claim of a wait pending at settlement is the wait's own
// step, OpWait returning a settled snapshot).
func (s SettleState) settle(o job.Outcome) SettleState {
	s.Status = o.Status
	s.Output = o.Output
	s.HasDetail, s.Detail = false, ""
	switch {
	case o.Status == job.Killed && s.Reason != "":
		s.HasDetail, s.Detail = true, s.Reason
		if o.Detail != "" {
			s.Detail = o.Detail + "; " + s.Reason
		}
	case o.Detail != "":
		s.HasDetail, s.Detail = true, o.Detail
	}
	s.Reported = s.Teardown || (s.Claimed && o.Status == job.Killed)
	return s
}

// TeardownFailedDetail is the detail of a job force-failed because its teardown
// cancel failed with msg (SPEC §2.11).
func TeardownFailedDetail(msg string) string {
	return "cancel threw during teardown; work may be orphaned: Error: " + msg
}

// Step is the settlement model's sequential specification: one terminal state, the
// first outcome to take effect wins, and every later observation agrees with it —
// status, detail (kill reasons merged per SPEC §2.9), final output, the delivery
// claim, and onJobDone at most once.
func Step(s SettleState, in Input, out Output) (bool, SettleState) {
	if in.Op == OpOffer {
		if s.Gone || s.Terminal() {
			return true, s // a later outcome is ignored: first wins
		}
		return true, s.settle(offered(in))
	}
	if in.Op == OpRemove {
		return s.Terminal(), SettleState{Status: s.Status, Detail: s.Detail, HasDetail: s.HasDetail,
			Output: s.Output, Reported: s.Reported, Announced: s.Announced, Gone: true}
	}
	if in.Op == OpTeardown {
		if s.Gone || s.Terminal() {
			return out.Cancel == CancelNotCalled, s
		}
		switch out.Cancel {
		case CancelReturned:
			s.Teardown, s.Reported, s.Status = true, true, job.Stopping
			return true, s
		case CancelPanicked:
			s.Teardown = true
			return true, s.settle(job.Outcome{Status: job.Failed, Detail: TeardownFailedDetail(out.PanicMsg)})
		}
		return false, s
	}
	// Every other operation observes the record: gone exactly when it is gone.
	if s.Gone || out.Err == ErrGone {
		return s.Gone && out.Err == ErrGone, s
	}
	switch in.Op {
	case OpKill:
		if s.Terminal() {
			if !in.NoClaim {
				s.Reported = true
			}
			return out.Err == ErrNone && out.Kill == messages.KillResult_KILL_RESULT_ALREADY_FINISHED &&
				out.HasSnap && out.Snap == s.snapshot(), s
		}
		if out.Err == ErrCancelFailed {
			return true, s // a failed cancel changes nothing
		}
		s.Status = job.Stopping
		if in.Reason != "" {
			s.Reason = in.Reason
		}
		if !in.NoClaim {
			s.Claimed = true
		}
		s.Reported = s.Claimed || s.Teardown
		return out.Err == ErrNone && out.Kill == messages.KillResult_KILL_RESULT_REQUESTED &&
			out.HasSnap && out.Snap == s.snapshot(), s
	case OpWait:
		if out.Err == ErrAborted {
			return !s.Terminal(), s
		}
		if out.Err != ErrNone || !out.HasSnap {
			return false, s
		}
		if s.Terminal() {
			s.Reported = true // a wait pending at settlement, or one that found it settled, claims
		}
		return out.Snap == s.snapshot(), s
	case OpRead:
		if out.Err != ErrNone || !out.HasSnap {
			return false, s
		}
		if s.Terminal() {
			s.Reported = true
			if !in.Stream && out.Text != s.Output {
				return false, s
			}
		} else if !in.Stream && out.Text != "" {
			return false, s
		}
		return out.Snap == s.snapshot(), s
	case OpGet:
		return out.Err == ErrNone && out.HasSnap && out.Snap == s.snapshot(), s
	case OpAwait:
		return out.Err == ErrNone && out.HasSnap && s.Terminal() && out.Snap == s.snapshot(), s
	case OpAnnounce:
		if !s.Terminal() || s.Announced || !out.HasSnap || out.Snap != s.snapshot() {
			return false, s
		}
		s.Announced = true
		return true, s
	}
	return false, s
}

// SettlementModel is the porcupine model of one job's settlement (see Step). Its
// initial state is a running job. Histories of several jobs need one check each.
func SettlementModel() porcupine.Model {
	return porcupine.Model{
		Init: func() any { return SettleState{Status: job.Running} },
		Step: func(state, input, output any) (bool, any) {
			return Step(state.(SettleState), input.(Input), asOutput(output))
		},
		Equal:             func(a, b any) bool { return a.(SettleState) == b.(SettleState) },
		DescribeOperation: func(input, output any) string { return describeOp(input.(Input), asOutput(output)) },
		DescribeState:     func(state any) string { return describeState(state.(SettleState)) },
	}
}

// asOutput reads an operation's output; nil (an offer's) is the zero Output.
func asOutput(v any) Output {
	o, _ := v.(Output)
	return o
}

func describeOp(in Input, out Output) string {
	var call string
	switch in.Op {
	case OpOffer:
		if in.Closed {
			call = fmt.Sprintf("Offer[%s](closed)", in.Source)
		} else {
			call = fmt.Sprintf("Offer[%s](%s %q out=%q)", in.Source, statusText(in.Outcome.Status), in.Outcome.Detail, in.Outcome.Output)
		}
		return call
	case OpKill:
		call = fmt.Sprintf("Kill(reason=%q noClaim=%v)", in.Reason, in.NoClaim)
	case OpTeardown:
		call = fmt.Sprintf("Teardown(%q)", in.Reason)
		switch out.Cancel {
		case CancelNotCalled:
			return call + " -> cancel not called"
		case CancelReturned:
			return call + " -> cancel returned"
		default:
			return call + " -> cancel panicked: " + out.PanicMsg
		}
	default:
		call = in.Op.String() + "()"
	}
	var res []string
	if out.Err != ErrNone {
		res = append(res, "err="+string(out.Err))
	}
	if in.Op == OpKill && out.Err == ErrNone {
		res = append(res, out.Kill.Name())
	}
	if in.Op == OpRead && out.Err == ErrNone {
		res = append(res, fmt.Sprintf("text=%q", out.Text))
	}
	if out.HasSnap {
		res = append(res, "["+out.Snap.String()+"]")
	}
	return call + " -> " + strings.Join(res, " ")
}

func describeState(s SettleState) string {
	var b strings.Builder
	b.WriteString(s.snapshot().String())
	if s.Claimed {
		b.WriteString(" claimed")
	}
	if s.Teardown {
		b.WriteString(" teardown")
	}
	if s.Reason != "" {
		fmt.Fprintf(&b, " reason=%q", s.Reason)
	}
	if s.Announced {
		b.WriteString(" announced")
	}
	if s.Gone {
		b.WriteString(" GONE")
	}
	return b.String()
}

// History records one job's operations for the settlement model, with a logical
// clock: an operation's call stamp is taken before it is issued and its return
// stamp after its answer arrived, so real-time order is kept. Safe for concurrent use.
type History struct {
	clock atomic.Int64
	mu    struct {
		sync.Mutex
		ops  []porcupine.Operation
		open []int // indexes of ops recorded with Open: they return at the end
	}
}

// Call records the call of an operation now and returns the func that records its
// return (call it exactly once, with the output).
func (h *History) Call(client int, in Input) func(Output) {
	call := h.clock.Add(1)
	return func(out Output) {
		ret := h.clock.Add(1)
		h.mu.Lock()
		h.mu.ops = append(h.mu.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
		h.mu.Unlock()
	}
}

// Open records an operation that gets no answer (an offer): it takes effect at some
// point after now, up to the end of the history.
func (h *History) Open(client int, in Input) {
	call := h.clock.Add(1)
	h.mu.Lock()
	h.mu.open = append(h.mu.open, len(h.mu.ops))
	h.mu.ops = append(h.mu.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: Output{}})
	h.mu.Unlock()
}

// Instant records an operation observed at a single moment (an observer call).
func (h *History) Instant(client int, in Input, out Output) {
	t := h.clock.Add(1)
	h.mu.Lock()
	h.mu.ops = append(h.mu.ops, porcupine.Operation{ClientId: client, Input: in, Call: t, Output: out, Return: t})
	h.mu.Unlock()
}

// Operations returns the history so far; open operations return at its end.
func (h *History) Operations() []porcupine.Operation {
	end := h.clock.Add(1)
	h.mu.Lock()
	defer h.mu.Unlock()
	ops := append([]porcupine.Operation(nil), h.mu.ops...)
	for _, i := range h.mu.open {
		ops[i].Return = end
	}
	return ops
}

// ArtifactsEnv names the directory where failing histories are kept.
const ArtifactsEnv = "TROUPE_ARTIFACTS"

// DefaultWaitTimeout is a wait timeout long enough to mean "until settlement" in a
// test whose job settles: it bounds a hang, it orders nothing.
const DefaultWaitTimeout = 10 * time.Second

// checkTimeout bounds one porcupine check; a job's history is small.
const checkTimeout = 30 * time.Second

// LinearizabilityError is CheckSettlement's failure: the check's result, the
// history as text, and the HTML timeline's path if one was written.
type LinearizabilityError struct {
	Result   porcupine.CheckResult // Illegal, or Unknown if the check timed out
	History  string
	Artifact string // path of porcupine's HTML, "" if none
}

func (e *LinearizabilityError) Error() string {
	msg := fmt.Sprintf("history is not linearizable (%s):\n%s", e.Result, e.History)
	if e.Artifact != "" {
		msg += "porcupine timeline: " + e.Artifact
	}
	return msg
}

// CheckSettlement checks ops against SettlementModel (see Check).
func CheckSettlement(name string, ops []porcupine.Operation) error {
	return Check(name, SettlementModel(), ops)
}

// DescribeHistory renders a settlement history in call order, one per line.
func DescribeHistory(ops []porcupine.Operation) string { return describeOps(SettlementModel(), ops) }

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func artifactName(name string) string { return unsafeName.ReplaceAllString(name, "_") }
