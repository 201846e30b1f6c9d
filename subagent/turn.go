package subagent

import (
	"context"
	"encoding/json"
	"fmt"
)

// TurnRunner is the embedder's seam for running an agent: given a session's history
// and one inbox message, run one turn — call a model, use tools — and report the
// messages it produced and a stop reason. Cancellation comes through ctx: a runner
// returns promptly once ctx ends. troupe runs no LLM itself.
type TurnRunner interface {
	RunTurn(ctx context.Context, turn Turn) (TurnResult, error)
}

// Turn is one turn's input.
type Turn struct {
	Session      string
	Depth        int
	History      []Message // completed turns, oldest first; shared with troupe: read it, never modify it
	Input        Message   // the inbox message (role "user")
	Persona      string
	ToolFilter   *ToolFilter
	OutputSchema json.RawMessage
	Options      *AgentOptions // the child's model options (nil: the runner's default)
}

// TurnResult is what a turn produced.
type TurnResult struct {
	Messages   []Message // assistant (and tool) messages, in order
	StopReason string
	Diagnostic string
	Structured json.RawMessage
}

// RunOneTurn runs a turn with a recover and maps its end to a Result (SPEC §5.3): a
// runner error is a child-level failure (stop reason error, its text as the
// diagnostic), a cancelled ctx is aborted, a panic is an error too. It never fails.
func RunOneTurn(ctx context.Context, runner TurnRunner, turn Turn) (res Result, produced []Message) {
	defer func() {
		if v := recover(); v != nil {
			res = Result{StopReason: StopError, Diagnostic: BoundDiagnostic("turn runner panicked: " + fmt.Sprint(v))}
		}
	}()
	tr, err := runner.RunTurn(ctx, turn)
	switch {
	case ctx.Err() != nil && (err != nil || tr.StopReason == ""):
		return Result{StopReason: StopAborted, Output: LastAssistant(tr.Messages)}, tr.Messages
	case err != nil:
		return Result{StopReason: StopError, Diagnostic: BoundDiagnostic(err.Error()), Output: LastAssistant(tr.Messages)}, tr.Messages
	}
	stop := tr.StopReason
	if stop == "" {
		stop = StopCompleted
	}
	return Result{Output: LastAssistant(tr.Messages), Structured: tr.Structured, Diagnostic: tr.Diagnostic, StopReason: stop}, tr.Messages
}

// LastAssistant returns the content of the last non-empty assistant message.
func LastAssistant(ms []Message) []Block {
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Role == "assistant" && len(ms[i].Content) > 0 {
			return ms[i].Content
		}
	}
	return nil
}
