package subagent

import (
	"context"
	"encoding/json"
	"errors"
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
	History      History // completed turns, oldest first: its length at once, its messages on demand
	Input        Message // the inbox message (role "user")
	Persona      string
	ToolFilter   *ToolFilter
	OutputSchema json.RawMessage
	Options      *AgentOptions // the child's model options (nil: the runner's default)
	// Provider is the child's descriptor provider and Cwd its header's working
	// directory ("" when none): a runner that hands turns to another process (the
	// ACP provider's) needs both.
	Provider string
	Cwd      string
	// State is the latest TurnResult.State recorded for this child (nil: none), after
	// cold resumes and restarts too.
	State json.RawMessage
}

// History is a session's completed turns, oldest first (Turn.History). Its length
// is known at once; its messages may be read on demand: a continuable child's
// history lives in the session store and grows with every turn, so a turn runner
// that keeps its own state (the ACP provider's) never pays for reading it, and a
// restore does not either. The zero History is empty.
type History struct {
	n    int
	msgs []Message
	load func(context.Context) ([]Message, error)
}

// HistoryOf is the history ms, held in memory (shared, not copied).
func HistoryOf(ms []Message) History { return History{n: len(ms), msgs: ms} }

// LazyHistory is a history of n messages that load reads when they are asked
// for (Messages); load must return exactly n messages or an error.
func LazyHistory(n int, load func(context.Context) ([]Message, error)) History {
	if n == 0 {
		return History{}
	}
	return History{n: n, load: load}
}

// Len is the number of messages, without reading them.
func (h History) Len() int { return h.n }

// Messages returns the messages, reading them (with ctx) if they are not held in
// memory: each call of a lazy history reads them again. They are shared with
// troupe: read them, never modify them.
func (h History) Messages(ctx context.Context) ([]Message, error) {
	if h.load == nil {
		return h.msgs, nil
	}
	ms, err := h.load(ctx)
	if err != nil {
		return nil, err
	}
	if len(ms) != h.n {
		return nil, fmt.Errorf("subagent: the history read %d messages, want %d", len(ms), h.n)
	}
	return ms, nil
}

// TurnResult is what a turn produced.
type TurnResult struct {
	Messages   []Message // assistant (and tool) messages, in order
	StopReason string
	Diagnostic string
	Structured json.RawMessage
	// State, when non-nil, is opaque provider state: the Activation appends it as a
	// log-only provider/state entry in the same Append as the turn's end (aborted
	// turns too), and hands the latest one to every later turn in Turn.State.
	State json.RawMessage
}

// TurnRunnerProvider is the optional interface of a provider whose continuable
// children run their turns with a runner of its own (the ACP provider's), not the
// embedder's.
type TurnRunnerProvider interface {
	TurnRunner() TurnRunner
}

// SessionReleaser is the optional interface of a TurnRunner that holds resources
// per child session across turns (a process): the Activation calls ReleaseSession
// once per epoch, after the epoch's last turn has returned and before the child's
// agent is disposed. A failure is logged and joins ACTIVATION_TEARDOWN_FAILED.
type SessionReleaser interface {
	ReleaseSession(ctx context.Context, session string) error
}

// Route is the continuation manager's runner when providers may run their own
// turns: each turn runs with the TurnRunner() of the provider named Turn.Provider
// when that provider is a TurnRunnerProvider, else with fallback. Its
// ReleaseSession releases the session in every registered provider's runner that
// is a SessionReleaser, and in fallback if it is one (a runner that never served
// the session does nothing).
func Route(rt *Runtime, fallback TurnRunner) TurnRunner {
	return &router{rt: rt, fallback: fallback}
}

type router struct {
	rt       *Runtime
	fallback TurnRunner
}

func (r *router) RunTurn(ctx context.Context, turn Turn) (TurnResult, error) {
	if p, ok := r.rt.Provider(ctx, turn.Provider).(TurnRunnerProvider); ok && turn.Provider != "" {
		return p.TurnRunner().RunTurn(ctx, turn)
	}
	return r.fallback.RunTurn(ctx, turn)
}

func (r *router) ReleaseSession(ctx context.Context, session string) error {
	var errs []error
	for _, name := range r.rt.List(ctx) {
		if p, ok := r.rt.Provider(ctx, name).(TurnRunnerProvider); ok {
			if rel, ok := p.TurnRunner().(SessionReleaser); ok {
				errs = append(errs, rel.ReleaseSession(ctx, session))
			}
		}
	}
	if rel, ok := r.fallback.(SessionReleaser); ok {
		errs = append(errs, rel.ReleaseSession(ctx, session))
	}
	return errors.Join(errs...)
}

// RunOneTurn runs a turn with a recover and maps its end to a Result (SPEC §5.3): a
// runner error is a child-level failure (stop reason error, its text as the
// diagnostic), a cancelled ctx is aborted, a panic is an error too. It never fails.
func RunOneTurn(ctx context.Context, runner TurnRunner, turn Turn) (res Result, produced []Message) {
	res, produced, _ = RunOneTurnState(ctx, runner, turn)
	return res, produced
}

// RunOneTurnState is RunOneTurn that also returns the turn's TurnResult.State
// (nil after a panic).
func RunOneTurnState(ctx context.Context, runner TurnRunner, turn Turn) (res Result, produced []Message, state json.RawMessage) {
	defer func() {
		if v := recover(); v != nil {
			res, state = Result{StopReason: StopError, Diagnostic: BoundDiagnostic("turn runner panicked: " + fmt.Sprint(v))}, nil
		}
	}()
	tr, err := runner.RunTurn(ctx, turn)
	switch {
	case ctx.Err() != nil && (err != nil || tr.StopReason == ""):
		return Result{StopReason: StopAborted, Output: LastAssistant(tr.Messages)}, tr.Messages, tr.State
	case err != nil:
		return Result{StopReason: StopError, Diagnostic: BoundDiagnostic(err.Error()), Output: LastAssistant(tr.Messages)}, tr.Messages, tr.State
	}
	stop := tr.StopReason
	if stop == "" {
		stop = StopCompleted
	}
	return Result{Output: LastAssistant(tr.Messages), Structured: tr.Structured, Diagnostic: tr.Diagnostic, StopReason: stop}, tr.Messages, tr.State
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
