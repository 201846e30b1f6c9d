// Package deliver holds the messages that put something into an agent's delivery
// surface (owner.Surface) through its owner actor: a job's completion notice, a
// continuable child's settlement notice and a child's report.
//
// They live in an internal package so that no code outside troupe can construct
// them. Owner actors are named predictably (owner-N) and their PIDs are handed to
// observers and lookups, so a PID is no secret: what keeps a stranger from sending
// an agent a fake "subagent reported" message is that it cannot build one. Inside
// troupe only the job tools' notice observer (Notice) and the continuation
// directory and its Activations (ChildNotice, Relay) send them. None is a protobuf
// message, so none can arrive from a remote peer either (docs/THREAT-MODEL.md).
package deliver

// Message is a user-role message for an agent's inbox (SPEC §3.7's notice form);
// package owner re-exports it as owner.Message.
type Message struct {
	ID     string
	Role   string   // always "user" for notices
	Text   string   // the first text content block
	More   []string // further text blocks, in order (a child's closing message)
	Source Source
}

// Source says where an inbox message came from (owner.Source). For a job notice it
// is Rev A's {kind:"plugin", plugin:"tool-jobs", form:"notice", summary}. It records
// who wrote the message and grants nothing.
type Source struct {
	Kind            string
	Plugin          string
	Form            string
	Summary         string
	SenderSessionID string
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

// HandledBySender makes a Notice an internal/mailbox Inline message: the registry's
// goroutine, which sends it from its settlement commit, runs an idle owner actor's
// delivery itself when the owner's surface is an owner.InlineSurface (its verbs
// only enqueue); any other owner's mailbox queues it.
func (*Notice) HandledBySender() bool { return true }

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
