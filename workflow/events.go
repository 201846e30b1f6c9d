package workflow

import "encoding/json"

// StopReason is how a run ended: the closed set completed, cancelled, error.
type StopReason string

// The stop reasons.
const (
	StopCompleted StopReason = "completed"
	StopCancelled StopReason = "cancelled"
	StopError     StopReason = "error"
)

// Result is a settled run (WORKFLOW.md 3.4). Value is JSON text ("null" unless
// the run completed with a value); Error is non-empty exactly when StopReason is
// not completed.
type Result struct {
	Value         json.RawMessage
	StopReason    StopReason
	Error         string
	AgentsStarted int
}

// The event types (WORKFLOW.md 4.1).
const (
	EventStart      = "workflow/start"
	EventPhase      = "workflow/phase"
	EventLog        = "workflow/log"
	EventAgentStart = "workflow/agent-start"
	EventAgentEnd   = "workflow/agent-end"
	EventEnd        = "workflow/end"
)

// Event is one lifecycle event of a run. Listeners borrow it: they must not
// mutate it.
type Event struct {
	Type    string
	Run     RunInfo
	Title   string     // phase
	Message string     // log
	Agent   AgentInfo  // agent-start, agent-end
	Outcome Outcome    // agent-end
	Result  ResultInfo // end (never the value)
}

// RunInfo identifies the run an event belongs to; Parent is the parent agent's
// session id.
type RunInfo struct {
	ID     string
	Meta   Meta
	Parent string
}

// AgentInfo identifies one agent() call whose child was published. An agent-end
// carries exactly its agent-start's AgentInfo.
type AgentInfo struct {
	Seq     int
	Label   string
	Phase   *string
	ChildID string
}

// Outcome is how one agent() call ended.
type Outcome string

// The outcomes.
const (
	OutcomeCompleted Outcome = "completed"
	OutcomeFailed    Outcome = "failed"
	OutcomeCancelled Outcome = "cancelled"
)

// ResultInfo is workflow/end's payload: the result without its value.
type ResultInfo struct {
	StopReason    StopReason
	Error         string
	AgentsStarted int
}

func cancelText(reason string) string { return "workflow run cancelled: " + reason }

var nullValue = json.RawMessage("null")
