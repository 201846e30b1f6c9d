package subagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/tools"
)

// Block is a content block (shared with the tool runtime).
type Block = tools.Block

// Message is one message of a session's history.
type Message struct {
	Role    string  // "user", "assistant", "system"
	Content []Block // empty for usage-only messages
}

// Text concatenates the message's text blocks.
func (m Message) Text() string {
	var b strings.Builder
	for _, c := range m.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// Stop reasons (SPEC §5.3). The set is open: an unknown reason is a failure.
const (
	StopCompleted = "completed"
	StopAborted   = "aborted"
	StopError     = "error"
	StopMaxTokens = "max-tokens"
	StopRefusal   = "refusal"
)

// MaxDiagnosticBytes bounds Result.Diagnostic.
const MaxDiagnosticBytes = 4096

// Result is what a run produced.
type Result struct {
	Output     []Block         // the last non-empty assistant message's content
	Structured json.RawMessage // the structured output, when an output schema was given
	Diagnostic string          // provider notes, ≤ 4096 bytes, kept apart from Output
	StopReason string
}

// Text concatenates the output's text blocks.
func (r Result) Text() string { return Message{Content: r.Output}.Text() }

// BoundDiagnostic cuts d to MaxDiagnosticBytes on a rune boundary.
func BoundDiagnostic(d string) string {
	if len(d) <= MaxDiagnosticBytes {
		return d
	}
	n := MaxDiagnosticBytes
	for n > 0 && !utf8.RuneStart(d[n]) {
		n--
	}
	return d[:n]
}

// Capabilities are what a provider enforces on the one-shot start path.
type Capabilities struct {
	OutputSchema bool
	DepthLimit   bool
	ToolFilter   bool
	Persona      bool
}

// ToolFilter narrows the child's tools.
type ToolFilter struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// Parent describes the delegating agent.
type Parent struct {
	Session string
	// Depth is the parent's persisted delegation depth (its header's value).
	Depth int
	// SubagentDepth is the parent's runtime option; the child's depth is
	// max(Depth, SubagentDepth) + 1.
	SubagentDepth int
	// History is the parent's completed turns (a fork inherits them).
	History []Message
	// Cwd is the delegating session's absolute working directory, "" if none. Only
	// a provider whose child runs in another process uses it (the ACP provider's
	// session cwd when its Config sets none).
	Cwd string
}

// AgentOptions choose the child's model (SPEC §5.4 agentOptions). They need no
// capability: a provider passes them to its runner (Turn.Options) or ignores them.
type AgentOptions struct {
	Provider  string `json:"provider,omitempty"`
	Model     string `json:"model,omitempty"`
	MaxTokens *int64 `json:"maxTokens,omitempty"` // ≥ 1 when present
}

// Request is a delegation.
type Request struct {
	Prompt       string
	Label        string
	OutputSchema json.RawMessage // requires the outputSchema capability
	MaxDepth     *int64          // requires depthLimit
	ToolFilter   *ToolFilter     // requires toolFilter
	Persona      string          // requires persona
	Options      *AgentOptions   // the child's model; nil: the provider's default
	Parent       Parent
}

// ResolvedRequest is a checked request with its depth and descriptor.
type ResolvedRequest struct {
	Request
	Depth      int // the child's delegation depth
	Descriptor Descriptor
}

// Descriptor is the one-shot descriptor snapshotted at start (SPEC §5.2 step 5).
type Descriptor struct {
	Version  int    `json:"version"`
	Mode     string `json:"mode"`
	Provider string `json:"provider"`
	Label    string `json:"label,omitempty"`
}

// Provider is a named agent backend.
type Provider interface {
	Name() string
	Capabilities() Capabilities
	// InheritsParentContext says whether the child sees the parent's completed turns.
	InheritsParentContext() bool
	// Start launches a run. An error means the provider cleaned up already: there is
	// nothing to dispose.
	Start(ctx context.Context, req ResolvedRequest) (*Run, error)
}

// Seed is what a continuable provider prepares for a new child (SPEC §5.1
// prepareContinuable): the history the child starts from (nil: a fresh child).
type Seed struct {
	History []Message
}

// Continuable is the optional interface of a provider that can start continuable
// children (SPEC §5.1: having prepareContinuable *is* the capability). It prepares
// the child's seed; the continuation manager owns the child from there.
type Continuable interface {
	Provider
	PrepareContinuable(ctx context.Context, req Request) (Seed, error)
}

// Run is a started delegation. Result and Dispose may be called from any goroutine.
type Run struct {
	id    string
	local bool
	done  chan struct{}
	res   Result
	err   error

	dispose struct {
		once sync.Once
		fn   func(context.Context) error
		done chan struct{}
		err  error
	}
}

// NewRun makes a run handle: the provider calls settle exactly once with the result
// (or an infrastructure error), and dispose cancels what remains and waits.
func NewRun(id string, local bool, dispose func(context.Context) error) (run *Run, settle func(Result, error)) {
	r := &Run{id: id, local: local, done: make(chan struct{})}
	r.dispose.fn = dispose
	r.dispose.done = make(chan struct{})
	var once sync.Once
	return r, func(res Result, err error) {
		once.Do(func() {
			res.Diagnostic = BoundDiagnostic(res.Diagnostic)
			r.res, r.err = res, err
			close(r.done)
		})
	}
}

// ID is the run's id: the child session id for a local run.
func (r *Run) ID() string { return r.id }

// Local reports whether the child runs in this process.
func (r *Run) Local() bool { return r.local }

// Done is closed once the result has settled.
func (r *Run) Done() <-chan struct{} { return r.done }

// Result waits for the result. It fails only on an infrastructure fault or when
// ctx ends; child-level failures resolve with their StopReason.
func (r *Run) Result(ctx context.Context) (Result, error) {
	select { // a settled result wins over a done ctx
	case <-r.done:
		return r.res, r.err
	default:
	}
	select {
	case <-r.done:
		return r.res, r.err
	case <-ctx.Done():
		return Result{}, context.Cause(ctx)
	}
}

// Dispose cancels the remaining work and waits for quiescence. Idempotent: every
// call waits for the same disposal and gets its error; ctx stops only the waiting.
// A provider's dispose that panics fails with the panic's text (SPEC §1.3 rule 13).
func (r *Run) Dispose(ctx context.Context) error {
	r.dispose.once.Do(func() {
		go func() {
			defer close(r.dispose.done)
			if r.dispose.fn != nil {
				r.dispose.err = protect(func() error { return r.dispose.fn(context.Background()) })
			}
		}()
	})
	select { // a finished disposal wins over a done ctx
	case <-r.dispose.done:
		return r.dispose.err
	default:
	}
	select {
	case <-r.dispose.done:
		return r.dispose.err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Subagent error codes (SPEC §5.5).
const (
	CodeDuplicateProvider       messages.Code = "DUPLICATE_PROVIDER"
	CodeNoProvider              messages.Code = "NO_PROVIDER"
	CodeUnsupportedCapability   messages.Code = "UNSUPPORTED_CAPABILITY"
	CodeContinuationUnavailable messages.Code = "CONTINUATION_UNAVAILABLE"
	CodePersistenceUnavailable  messages.Code = "PERSISTENCE_UNAVAILABLE"
	CodeDuplicateChild          messages.Code = "DUPLICATE_CHILD"
	CodeUnauthorized            messages.Code = "UNAUTHORIZED"
	CodeNotResumable            messages.Code = "NOT_RESUMABLE"
	CodeDraining                messages.Code = "DRAINING"
	CodeActivationClosing       messages.Code = "ACTIVATION_CLOSING"
	CodeParentUnavailable       messages.Code = "PARENT_UNAVAILABLE"
	CodeCancelled               messages.Code = "CANCELLED"
)

// Sentinels for errors.Is.
var (
	ErrDuplicateProvider     = &messages.Error{Code: CodeDuplicateProvider}
	ErrNoProvider            = &messages.Error{Code: CodeNoProvider}
	ErrUnsupportedCapability = &messages.Error{Code: CodeUnsupportedCapability}
	ErrUnauthorized          = &messages.Error{Code: CodeUnauthorized}
	ErrNotResumable          = &messages.Error{Code: CodeNotResumable}
	ErrDraining              = &messages.Error{Code: CodeDraining}
	ErrParentUnavailable     = &messages.Error{Code: CodeParentUnavailable}
)

// DepthError is SPEC's SubagentDepthError: its own type, without a code (rule 42).
type DepthError struct {
	AttemptedDepth int
	MaxDepth       int64
}

func (e *DepthError) Error() string {
	return fmt.Sprintf("subagent depth %d exceeds maxDepth %d", e.AttemptedDepth, e.MaxDepth)
}

// ErrInvalidMaxDepth is the plain error of a maxDepth that is not a non-negative
// safe integer.
var ErrInvalidMaxDepth = errors.New("subagent maxDepth must be a non-negative safe integer")

// protect runs f, turning a panic into an error carrying fmt.Sprint of its value
// (an error value is kept as it is).
func protect(f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			if e, ok := v.(error); ok {
				err = e
			} else {
				err = errors.New(fmt.Sprint(v))
			}
		}
	}()
	return f()
}

// CheckDepth is what a provider with the depthLimit capability enforces.
func CheckDepth(req ResolvedRequest) error {
	if req.MaxDepth != nil && int64(req.Depth) > *req.MaxDepth {
		return &DepthError{AttemptedDepth: req.Depth, MaxDepth: *req.MaxDepth}
	}
	return nil
}
