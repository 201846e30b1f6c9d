package owner

import (
	"unicode/utf16"

	"github.com/troupe-rt/troupe/internal/deliver"
)

// Message is a user-role message for an agent's inbox (SPEC §3.7's notice form).
type Message = deliver.Message

// Source says where an inbox message came from. For a job notice it is Rev A's
// {kind:"plugin", plugin:"tool-jobs", form:"notice", summary}. It grants nothing.
type Source = deliver.Source

// SummaryUnits bounds a notice summary, in UTF-16 code units (SPEC §1.3 rule 20).
const SummaryUnits = 120

// BoundSummary keeps s within SummaryUnits UTF-16 code units: a longer one keeps 119
// units (118 if the 119th would split a surrogate pair) and appends "…".
func BoundSummary(s string) string {
	// A string encodes to at most as many UTF-16 units as it has bytes (an invalid
	// byte decodes to one U+FFFD, one unit): a short one is returned as is without
	// converting it, as the count below would.
	if len(s) <= SummaryUnits {
		return s
	}
	units := utf16.Encode([]rune(s))
	if len(units) <= SummaryUnits {
		return s
	}
	keep := SummaryUnits - 1
	if utf16.IsSurrogate(rune(units[keep-1])) && units[keep-1] < 0xDC00 {
		keep--
	}
	return string(utf16.Decode(units[:keep])) + "…"
}

// InlineSurface is a Surface that declares its verbs only enqueue: they never
// block, and never call into troupe (a registry.Client call, a tool, a System
// method). A job's completion notice to an idle owner actor whose surface is one
// runs on the job registry's goroutine, within the commit of the job's settlement,
// without waking a worker for the owner (one goroutine hand-off fewer per notice).
// A verb of an InlineSurface that blocks holds up the whole registry, and one that
// waits on it never returns: declare it only of a surface that keeps the promise.
type InlineSurface interface {
	Surface
	EnqueuesOnly()
}

// Surface is how troupe reaches an agent's loop; the embedder implements it. Its
// verbs run on the owner actor and must not block (enqueue and return). An error or
// a panic is logged and changes nothing else.
type Surface interface {
	// Inject adds msg to the next step's inbox; it never wakes an idle agent.
	Inject(msg Message) error
	// Steer adds msg to the next step's inbox and wakes an idle agent.
	Steer(msg Message) error
	// Followup queues msg as a new FIFO turn and wakes an idle agent.
	Followup(msg Message) error
}

// Delivery lanes of a notice (SPEC §3.8).
const (
	DeliveryWakeup = deliver.DeliveryWakeup
	DeliveryQuiet  = deliver.DeliveryQuiet
)

// The messages that deliver into a surface — a job notice, a child's settlement
// notice, a report — are in troupe's internal/deliver: no code outside troupe can
// construct one, whatever owner PID it knows.

// setBusy reports the agent's status: busy (a turn is running) or idle. It and
// inboxClaimed steer the wake lanes, so only the Agent handle's holder sends them
// (Agent.SetBusy, Agent.InboxClaimed).
type setBusy struct{ Busy bool }

// inboxClaimed reports that the agent's loop claimed an inbox message of the given
// source kind; a "user" message resets the wake budget.
type inboxClaimed struct{ SourceKind string }

// Stats is the owner's delivery state, for inspection and tests.
type Stats struct {
	Busy       bool
	SpentWakes int
	Delivered  int // notices handed to the surface (inject or followup)
	Failed     int // surface calls that failed
	Duplicates int // notices dropped as duplicates
}

// statsReq asks for Stats.
type statsReq struct{ reply chan<- Stats }
