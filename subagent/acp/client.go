package acp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	acpsdk "github.com/coder/acp-go-sdk"
)

// client is troupe's side of one ACP connection: the acpsdk.Client the SDK calls
// from its own goroutines. Its lock guards only the connection's session id and
// the current turn's collected text — a leaf, like output.Buffer: nothing else of
// troupe's runtime state lives here.
type client struct {
	cfg *Config
	ag  *agent

	mu      sync.Mutex
	session string
	loading bool  // a session/load is in flight: its updates are history replay
	turn    *turn // the prompt in flight, or nil
}

// turn is one session/prompt's state.
type turn struct {
	text      strings.Builder
	truncated bool
	cancel    chan struct{} // closed when troupe cancels the turn
	cancelled bool
}

func (c *client) setSession(id string) {
	c.mu.Lock()
	c.session = id
	c.mu.Unlock()
}

func (c *client) setLoading(v bool) {
	c.mu.Lock()
	c.loading = v
	c.mu.Unlock()
}

func (c *client) begin() *turn {
	t := &turn{cancel: make(chan struct{})}
	c.mu.Lock()
	c.turn = t
	c.mu.Unlock()
	return t
}

// cancelTurn marks t cancelled: pending and later permission requests answer cancelled.
func (c *client) cancelTurn(t *turn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !t.cancelled {
		t.cancelled = true
		close(t.cancel)
	}
}

// end detaches t and returns its text.
func (c *client) end(t *turn) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.turn == t {
		c.turn = nil
	}
	return t.text.String(), t.truncated
}

// SessionUpdate keeps the text of agent_message_chunk updates of the current turn
// and drops everything else (docs/INTEROP.md section 1.5).
func (c *client) SessionUpdate(_ context.Context, n acpsdk.SessionNotification) error {
	kind := updateKind(n.Update)
	c.mu.Lock()
	if string(n.SessionId) != c.session || c.session == "" {
		c.mu.Unlock()
		c.cfg.Logger.Warn(fmt.Sprintf("acp provider %q: ignored %s update for unknown session %q", c.cfg.Name, kind, n.SessionId))
		return nil
	}
	if !c.loading && c.turn != nil && n.Update.AgentMessageChunk != nil && n.Update.AgentMessageChunk.Content.Text != nil {
		t := c.turn
		text := n.Update.AgentMessageChunk.Content.Text.Text
		if room := c.cfg.MaxOutputBytes - t.text.Len(); len(text) > room {
			text, t.truncated = cutUTF8(text, room), true
		}
		t.text.WriteString(text)
	}
	c.mu.Unlock()
	c.ag.observe(Event{Kind: EventUpdate, SessionID: string(n.SessionId), Update: kind})
	return nil
}

// cutUTF8 cuts s to at most n bytes on a rune boundary.
func cutUTF8(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func updateKind(u acpsdk.SessionUpdate) string {
	switch {
	case u.UserMessageChunk != nil:
		return "user_message_chunk"
	case u.AgentMessageChunk != nil:
		return "agent_message_chunk"
	case u.AgentThoughtChunk != nil:
		return "agent_thought_chunk"
	case u.ToolCall != nil:
		return "tool_call"
	case u.ToolCallUpdate != nil:
		return "tool_call_update"
	case u.Plan != nil:
		return "plan"
	case u.AvailableCommandsUpdate != nil:
		return "available_commands_update"
	case u.CurrentModeUpdate != nil:
		return "current_mode_update"
	case u.ConfigOptionUpdate != nil:
		return "config_option_update"
	case u.SessionInfoUpdate != nil:
		return "session_info_update"
	case u.UsageUpdate != nil:
		return "usage_update"
	}
	return "unknown"
}

// RequestPermission answers without asking anyone (docs/INTEROP.md section 1.6).
func (c *client) RequestPermission(ctx context.Context, req acpsdk.RequestPermissionRequest) (acpsdk.RequestPermissionResponse, error) {
	c.mu.Lock()
	session, t := c.session, c.turn
	c.mu.Unlock()
	if string(req.SessionId) != session || session == "" {
		c.cfg.Logger.Warn(fmt.Sprintf("acp provider %q: refused a permission request for unknown session %q", c.cfg.Name, req.SessionId))
		return acpsdk.RequestPermissionResponse{}, acpsdk.NewInvalidParams(map[string]any{"sessionId": req.SessionId})
	}
	var cancel <-chan struct{}
	if t != nil {
		cancel = t.cancel
	}
	id, ok := c.decide(ctx, req, cancel)
	ev := Event{Kind: EventPermission, SessionID: session, Options: req.Options}
	var resp acpsdk.RequestPermissionResponse
	if ok {
		ev.Answer, ev.OptionID = "selected", id
		resp.Outcome.Selected = &acpsdk.RequestPermissionOutcomeSelected{OptionId: acpsdk.PermissionOptionId(id), Outcome: "selected"}
	} else {
		ev.Answer = "cancelled"
		resp.Outcome.Cancelled = &acpsdk.RequestPermissionOutcomeCancelled{Outcome: "cancelled"}
	}
	title := ""
	if req.ToolCall.Title != nil {
		title = *req.ToolCall.Title
	}
	c.cfg.Logger.Info(fmt.Sprintf("acp provider %q: permission %q answered %s %s", c.cfg.Name, title, ev.Answer, ev.OptionID))
	c.ag.observe(ev)
	return resp, nil
}

// decide returns the option to select, or ok=false for "cancelled".
func (c *client) decide(ctx context.Context, req acpsdk.RequestPermissionRequest, cancel <-chan struct{}) (string, bool) {
	if isClosed(cancel) {
		return "", false
	}
	if c.cfg.Decide != nil {
		type answer struct {
			id string
			ok bool
		}
		got := make(chan answer, 1)
		dctx, stop := context.WithTimeout(ctx, c.cfg.PermissionTimeout)
		defer stop()
		go func() {
			var a answer
			defer func() {
				if v := recover(); v != nil {
					c.cfg.Logger.Warn(fmt.Sprintf("acp provider %q: permission Decide panicked: %v", c.cfg.Name, v))
				}
				got <- a
			}()
			a.id, a.ok = c.cfg.Decide(dctx, req)
		}()
		select {
		case a := <-got:
			if a.ok && offered(req.Options, a.id) {
				return a.id, true
			}
		case <-dctx.Done():
		case <-cancel:
			return "", false
		}
		if isClosed(cancel) {
			return "", false
		}
		return rejectRule(req.Options)
	}
	if c.cfg.Permission == PermissionAllow {
		if id, ok := firstOf(req.Options, acpsdk.PermissionOptionKindAllowOnce, acpsdk.PermissionOptionKindAllowAlways); ok {
			return id, true
		}
	}
	return rejectRule(req.Options)
}

func rejectRule(opts []acpsdk.PermissionOption) (string, bool) {
	return firstOf(opts, acpsdk.PermissionOptionKindRejectOnce, acpsdk.PermissionOptionKindRejectAlways)
}

func firstOf(opts []acpsdk.PermissionOption, kinds ...acpsdk.PermissionOptionKind) (string, bool) {
	for _, k := range kinds {
		for _, o := range opts {
			if o.Kind == k {
				return string(o.OptionId), true
			}
		}
	}
	return "", false
}

func offered(opts []acpsdk.PermissionOption, id string) bool {
	for _, o := range opts {
		if string(o.OptionId) == id {
			return true
		}
	}
	return false
}

func isClosed(ch <-chan struct{}) bool {
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// The client methods troupe does not offer: JSON-RPC -32601 (docs/INTEROP.md section 1.10).

func (c *client) ReadTextFile(context.Context, acpsdk.ReadTextFileRequest) (acpsdk.ReadTextFileResponse, error) {
	return acpsdk.ReadTextFileResponse{}, acpsdk.NewMethodNotFound(acpsdk.ClientMethodFsReadTextFile)
}

func (c *client) WriteTextFile(context.Context, acpsdk.WriteTextFileRequest) (acpsdk.WriteTextFileResponse, error) {
	return acpsdk.WriteTextFileResponse{}, acpsdk.NewMethodNotFound(acpsdk.ClientMethodFsWriteTextFile)
}

func (c *client) CreateTerminal(context.Context, acpsdk.CreateTerminalRequest) (acpsdk.CreateTerminalResponse, error) {
	return acpsdk.CreateTerminalResponse{}, acpsdk.NewMethodNotFound(acpsdk.ClientMethodTerminalCreate)
}

func (c *client) KillTerminal(context.Context, acpsdk.KillTerminalRequest) (acpsdk.KillTerminalResponse, error) {
	return acpsdk.KillTerminalResponse{}, acpsdk.NewMethodNotFound(acpsdk.ClientMethodTerminalKill)
}

func (c *client) TerminalOutput(context.Context, acpsdk.TerminalOutputRequest) (acpsdk.TerminalOutputResponse, error) {
	return acpsdk.TerminalOutputResponse{}, acpsdk.NewMethodNotFound(acpsdk.ClientMethodTerminalOutput)
}

func (c *client) ReleaseTerminal(context.Context, acpsdk.ReleaseTerminalRequest) (acpsdk.ReleaseTerminalResponse, error) {
	return acpsdk.ReleaseTerminalResponse{}, acpsdk.NewMethodNotFound(acpsdk.ClientMethodTerminalRelease)
}

func (c *client) WaitForTerminalExit(context.Context, acpsdk.WaitForTerminalExitRequest) (acpsdk.WaitForTerminalExitResponse, error) {
	return acpsdk.WaitForTerminalExitResponse{}, acpsdk.NewMethodNotFound(acpsdk.ClientMethodTerminalWaitForExit)
}

// rpcError returns the JSON-RPC error of err, if it is one.
func rpcError(err error) (*acpsdk.RequestError, bool) {
	var re *acpsdk.RequestError
	if errors.As(err, &re) {
		return re, true
	}
	return nil, false
}

// disconnected reports whether err is the SDK's "peer disconnected" error.
func disconnected(err error) bool {
	re, ok := rpcError(err)
	if !ok || re.Code != -32603 {
		return false
	}
	m, _ := re.Data.(map[string]any)
	s, _ := m["error"].(string)
	return strings.HasPrefix(s, "peer disconnected")
}

var _ acpsdk.Client = (*client)(nil)
