package owner

import "unicode/utf16"

// Message is a user-role message for an agent's inbox (SPEC §3.7's notice form).
type Message struct {
	ID     string
	Role   string   // always "user" for notices
	Text   string   // the first text content block
	More   []string // further text blocks, in order (a child's closing message)
	Source Source
}

// Source says where an inbox message came from. For a job notice it is Rev A's
// {kind:"plugin", plugin:"tool-jobs", form:"notice", summary}.
type Source struct {
	Kind            string
	Plugin          string
	Form            string
	Summary         string
	SenderSessionID string
}

// SummaryUnits bounds a notice summary, in UTF-16 code units (SPEC §1.3 rule 20).
const SummaryUnits = 120

// BoundSummary keeps s within SummaryUnits UTF-16 code units: a longer one keeps 119
// units (118 if the 119th would split a surrogate pair) and appends "…".
func BoundSummary(s string) string {
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
	DeliveryWakeup = "wakeup"
	DeliveryQuiet  = "quiet"
)

// Notice asks the owner actor to deliver a job completion notice. The owner picks
// the lane when it processes the notice: Followup when delivery is wakeup, the agent
// is idle and its wake budget (MaxWakes per incarnation) is not spent; else Inject.
type Notice struct {
	JobID    string
	Message  Message
	Delivery string
	MaxWakes int
}

// ChildNotice asks the owner actor to deliver a continuable child's settlement
// notice (SPEC §6.5): injected when the parent's lineage is tearing down, a followup
// turn when it is idle, else steered into its next step.
type ChildNotice struct {
	ChildID        string
	Message        Message
	LineageClosing bool
}

// Relay asks the owner actor to deliver a child's report (SPEC §6.6): steered into
// the next step (waking an idle agent), or injected when Quiet.
type Relay struct {
	Message Message
	Quiet   bool
	Reply   chan<- error
}

// SetBusy reports the agent's status: busy (a turn is running) or idle.
type SetBusy struct{ Busy bool }

// InboxClaimed reports that the agent's loop claimed an inbox message of the given
// source kind; a "user" message resets the wake budget.
type InboxClaimed struct{ SourceKind string }

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
