package subagent

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/troupe-rt/troupe/tools"
)

// Reply is one scripted turn.
type Reply struct {
	Text       string          // the assistant's reply ("" for none)
	Partial    string          // an earlier assistant message, before Text
	StopReason string          // "" means completed
	Diagnostic string          //
	Structured json.RawMessage //
	Err        error           // the runner fails (a transport failure)
	// Delay holds the turn this long before replying; a cancelled ctx ends it early
	// (the turn is then aborted). Block holds it until ctx ends.
	Delay time.Duration
	Block bool
	// ToolCalls are executed (through Exec) before replying; their results are
	// recorded as tool messages.
	ToolCalls []tools.Call
}

// Scripted is a deterministic TurnRunner for tests and the demo: turns take the
// script's replies in order (the last one repeats once the script is exhausted).
// Match, if set, picks a reply by the turn instead.
type Scripted struct {
	Replies []Reply
	Match   func(Turn) (Reply, bool)
	// Exec runs a reply's tool calls; nil records them as not executed.
	Exec func(ctx context.Context, call tools.Call) tools.Result

	next  atomic.Int64
	mu    sync.Mutex // guards turns, a test-side record no actor depends on
	turns []Turn
}

// NewScripted returns a runner replying with replies in order.
func NewScripted(replies ...Reply) *Scripted { return &Scripted{Replies: replies} }

// Turns returns the turns run so far.
func (s *Scripted) Turns() []Turn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Turn(nil), s.turns...)
}

// RunTurn plays the next reply.
func (s *Scripted) RunTurn(ctx context.Context, turn Turn) (TurnResult, error) {
	s.mu.Lock()
	s.turns = append(s.turns, turn)
	s.mu.Unlock()
	var r Reply
	ok := false
	if s.Match != nil {
		r, ok = s.Match(turn)
	}
	if !ok && len(s.Replies) > 0 {
		i := int(s.next.Add(1) - 1)
		r = s.Replies[min(i, len(s.Replies)-1)]
	}
	var out []Message
	if r.Partial != "" {
		out = append(out, textMessage("assistant", r.Partial))
	}
	for i, call := range r.ToolCalls {
		if call.ID == "" {
			call.ID = "call-" + strconv.Itoa(i+1)
		}
		res := tools.TextResult("(no tool executor)", nil)
		if s.Exec != nil {
			res = s.Exec(ctx, call)
		}
		out = append(out, Message{Role: "tool", Content: res.Content})
	}
	if r.Block || r.Delay > 0 {
		var timer <-chan time.Time
		if !r.Block {
			t := time.NewTimer(r.Delay)
			defer t.Stop()
			timer = t.C
		}
		select {
		case <-ctx.Done():
			return TurnResult{Messages: out}, context.Cause(ctx)
		case <-timer:
		}
	}
	if r.Err != nil {
		return TurnResult{Messages: out}, r.Err
	}
	if r.Text != "" {
		out = append(out, textMessage("assistant", r.Text))
	}
	return TurnResult{Messages: out, StopReason: r.StopReason, Diagnostic: r.Diagnostic, Structured: r.Structured}, nil
}

func textMessage(role, text string) Message {
	return Message{Role: role, Content: []Block{{Type: "text", Text: text}}}
}

// ScriptedProvider is a provider whose runs are not local agents: each run plays
// the runner in a goroutine of its own, the way a provider for an external product
// drives a remote session. It declares no capabilities.
type ScriptedProvider struct {
	ProviderName string
	Runner       TurnRunner
	runs         atomic.Uint64
}

func (p *ScriptedProvider) Name() string                { return p.ProviderName }
func (p *ScriptedProvider) InheritsParentContext() bool { return false }
func (p *ScriptedProvider) Capabilities() Capabilities  { return Capabilities{} }

// Start plays one turn in a goroutine; Dispose cancels it and waits.
func (p *ScriptedProvider) Start(ctx context.Context, req ResolvedRequest) (*Run, error) {
	id := p.ProviderName + "-run-" + strconv.FormatUint(p.runs.Add(1), 10)
	turnCtx, cancel := context.WithCancel(context.Background())
	quiet := make(chan struct{})
	run, settle := NewRun(id, false, func(context.Context) error {
		cancel()
		<-quiet
		return nil
	})
	go func() {
		defer close(quiet)
		res, _ := RunOneTurn(turnCtx, p.Runner, Turn{Session: id, Depth: req.Depth,
			Input: textMessage("user", req.Prompt), Options: req.Options})
		settle(res, nil)
	}()
	return run, nil
}
