package acp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/producers/process"
	"github.com/troupe-rt/troupe/subagent"
)

// Error codes of the provider (docs/INTEROP.md section 1.10).
const (
	CodeSpawnFailed     messages.Code = "acp/spawn-failed"
	CodeHandshakeFailed messages.Code = "acp/handshake-failed"
	CodeAuthRequired    messages.Code = "acp/auth-required"
	CodeTeardownFailed  messages.Code = "acp/teardown-failed"
)

// ProtocolVersion is the ACP protocol version troupe speaks.
const ProtocolVersion = 1

// errCancelledStart is Start's error when its ctx ends before the child started.
var errCancelledStart = messages.Errorf(subagent.CodeCancelled, "subagent request was aborted before the ACP child started")

var secretName = regexp.MustCompile(`(?i)KEY|PASSWORD|SECRET|TOKEN`)

// environ is the agent's environment: this process's, minus every name matching
// secretName and an inherited TROUPE_JOB, plus cfg.Env (sorted by name); the
// process package appends the job marker.
func environ(extra map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name == "TROUPE_JOB" || secretName.MatchString(name) {
			continue
		}
		if _, ok := extra[name]; ok {
			continue
		}
		env = append(env, kv)
	}
	names := make([]string, 0, len(extra))
	for k := range extra {
		if k != "TROUPE_JOB" {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		env = append(env, k+"="+extra[k])
	}
	return env
}

func clientVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range append([]*debug.Module{&bi.Main}, bi.Deps...) {
			if m.Path == "github.com/troupe-rt/troupe" && m.Version != "" {
				return m.Version
			}
		}
	}
	return "(devel)"
}

// agent is one agent process and its ACP connection.
type agent struct {
	p      *Provider
	piped  *process.Piped
	conn   *acpsdk.ClientSideConnection
	client *client
	init   acpsdk.InitializeResponse
	cwd    string

	stopOnce sync.Once
	stopped  chan struct{}
	stopErr  error
}

func (a *agent) observe(ev Event) {
	if a.p.cfg.Observe == nil {
		return
	}
	ev.PID, ev.Marker = a.piped.PID(), a.piped.Marker()
	a.p.cfg.Observe(ev)
}

func (a *agent) sessionID() string {
	a.client.mu.Lock()
	defer a.client.mu.Unlock()
	return a.client.session
}

// spawn starts the agent process in cwd and runs initialize and, with
// cfg.AuthMethod, authenticate. It fails only after the process is gone.
func (p *Provider) spawn(ctx context.Context, cwd string) (*agent, error) {
	cfg := &p.cfg
	piped, err := process.StartPiped(append([]string{cfg.Command}, cfg.Args...), process.Config{
		Dir: cwd, Env: environ(cfg.Env), Grace: cfg.Grace, EOFGrace: cfg.EOFGrace, RetainBytes: cfg.StderrTailBytes,
	})
	if err != nil {
		return nil, messages.Errorf(CodeSpawnFailed, "acp provider %q: cannot start %s: %s", cfg.Name, cfg.Command, err.Error())
	}
	a := &agent{p: p, piped: piped, cwd: cwd, stopped: make(chan struct{})}
	a.client = &client{cfg: cfg, ag: a}
	a.conn = acpsdk.NewClientSideConnection(a.client, piped.Stdin(), piped.Stdout())
	a.conn.SetLogger(cfg.Logger)
	if !p.track(a) { // the provider's scope is disposed
		a.stop()
		return nil, messages.Errorf(CodeSpawnFailed, "acp provider %q: cannot start %s: the provider is stopped", cfg.Name, cfg.Command)
	}
	a.observe(Event{Kind: EventSpawned})
	return a, nil
}

// handshake runs initialize, authenticate (with cfg.AuthMethod) and session/new
// (load == "") or session/load — only initialize with initOnly (the probe) — bounded by StartTimeout and ctx. On failure the
// process is stopped before it returns.
func (a *agent) handshake(ctx context.Context, load string, initOnly bool) error {
	cfg := &a.p.cfg
	errTimeout := errors.New("handshake timeout")
	hctx, cancel := context.WithTimeoutCause(ctx, cfg.StartTimeout, errTimeout)
	defer cancel()
	fail := func(method string, err error) error {
		a.stop() // the process is gone before the failure is returned
		switch {
		case ctx.Err() != nil:
			return errCancelledStart
		case errors.Is(context.Cause(hctx), errTimeout):
			return messages.Errorf(CodeHandshakeFailed, "acp provider %q: handshake timed out after %s", cfg.Name, cfg.StartTimeout)
		case err == nil:
			return messages.Errorf(CodeHandshakeFailed, "acp provider %q: %s failed", cfg.Name, method)
		case disconnected(err):
			return messages.Errorf(CodeHandshakeFailed, "acp provider %q: agent exited during %s: %s", cfg.Name, method, a.piped.Outcome().Detail)
		}
		if re, ok := rpcError(err); ok {
			if re.Code == -32000 && cfg.AuthMethod == "" && (method == acpsdk.AgentMethodSessionNew || method == acpsdk.AgentMethodSessionLoad) {
				return messages.Errorf(CodeAuthRequired, "acp provider %q: %s failed: %s (%d); advertised auth methods: %s; set Config.AuthMethod",
					cfg.Name, method, re.Message, re.Code, strings.Join(authIDs(a.init.AuthMethods), ", "))
			}
			return messages.Errorf(CodeHandshakeFailed, "acp provider %q: %s failed: %s (%d)", cfg.Name, method, re.Message, re.Code)
		}
		return messages.Errorf(CodeHandshakeFailed, "acp provider %q: %s failed: %s", cfg.Name, method, err.Error())
	}
	if ctx.Err() != nil {
		return fail("", nil)
	}
	init, err := a.conn.Initialize(hctx, acpsdk.InitializeRequest{
		ProtocolVersion:    ProtocolVersion,
		ClientCapabilities: acpsdk.ClientCapabilities{Fs: acpsdk.FileSystemCapabilities{ReadTextFile: false, WriteTextFile: false}, Terminal: false},
		ClientInfo:         &acpsdk.Implementation{Name: "troupe", Version: clientVersion()},
	})
	if err != nil || hctx.Err() != nil {
		return fail(acpsdk.AgentMethodInitialize, err)
	}
	a.init = init
	if init.ProtocolVersion != ProtocolVersion {
		a.stop()
		return messages.Errorf(CodeHandshakeFailed, "acp provider %q: unsupported protocol version %d", cfg.Name, init.ProtocolVersion)
	}
	a.observe(Event{Kind: EventInitialized, Capabilities: init.AgentCapabilities})
	if initOnly {
		return nil
	}
	if load != "" && !init.AgentCapabilities.LoadSession {
		a.stop()
		return messages.Errorf(CodeHandshakeFailed, "acp agent no longer advertises loadSession")
	}
	if cfg.AuthMethod != "" {
		if _, err := a.conn.Authenticate(hctx, acpsdk.AuthenticateRequest{MethodId: cfg.AuthMethod}); err != nil || hctx.Err() != nil {
			return fail(acpsdk.AgentMethodAuthenticate, err)
		}
		a.observe(Event{Kind: EventAuthenticated})
	}
	if load == "" {
		resp, err := a.conn.NewSession(hctx, acpsdk.NewSessionRequest{Cwd: a.cwd, McpServers: []acpsdk.McpServer{}})
		if err != nil || hctx.Err() != nil {
			return fail(acpsdk.AgentMethodSessionNew, err)
		}
		if resp.SessionId == "" {
			a.stop()
			return messages.Errorf(CodeHandshakeFailed, "acp provider %q: session/new returned no sessionId", cfg.Name)
		}
		a.client.setSession(string(resp.SessionId))
		a.observe(Event{Kind: EventSession, SessionID: string(resp.SessionId)})
		return nil
	}
	a.client.setSession(load)
	a.client.setLoading(true)
	_, err = a.conn.LoadSession(hctx, acpsdk.LoadSessionRequest{SessionId: acpsdk.SessionId(load), Cwd: a.cwd, McpServers: []acpsdk.McpServer{}})
	a.client.setLoading(false) // the SDK delivered every replayed update before LoadSession returned
	if err != nil || hctx.Err() != nil {
		return fail(acpsdk.AgentMethodSessionLoad, err)
	}
	a.observe(Event{Kind: EventLoaded, SessionID: load})
	return nil
}

// authIDs lists the ids of the advertised auth methods.
func authIDs(ms []acpsdk.AuthMethod) []string {
	var ids []string
	for _, m := range ms {
		switch {
		case m.Agent != nil:
			ids = append(ids, m.Agent.Id)
		case m.EnvVar != nil:
			ids = append(ids, m.EnvVar.Id)
		case m.Terminal != nil:
			ids = append(ids, m.Terminal.Id)
		}
	}
	return ids
}

type promptOut struct {
	resp acpsdk.PromptResponse
	err  error
}

// prompt runs one session/prompt with text. When ctx ends, it sends session/cancel
// once, answers pending permission requests cancelled and waits CancelGrace for
// the response; past it, the process is stopped (docs/INTEROP.md section 1.7). The SDK
// call's own ctx is never cancelled, so the cancelled response and the trailing
// updates are not lost.
func (a *agent) prompt(ctx context.Context, text string) subagent.Result {
	cfg := &a.p.cfg
	sid := a.sessionID()
	t := a.client.begin()
	got := make(chan promptOut, 1)
	go func() {
		resp, err := a.conn.Prompt(context.Background(), acpsdk.PromptRequest{SessionId: acpsdk.SessionId(sid), Prompt: []acpsdk.ContentBlock{acpsdk.TextBlock(text)}})
		got <- promptOut{resp, err}
	}()
	var (
		out       promptOut
		cancelled bool
		diag      []string
	)
	select {
	case out = <-got:
	case <-ctx.Done():
		cancelled = true
		a.client.cancelTurn(t)
		_ = a.conn.Cancel(context.Background(), acpsdk.CancelNotification{SessionId: acpsdk.SessionId(sid)})
		a.observe(Event{Kind: EventCancelSent, SessionID: sid})
		timer := time.NewTimer(cfg.CancelGrace)
		select {
		case out = <-got:
		case <-timer.C:
			diag = append(diag, fmt.Sprintf("acp agent did not answer session/cancel within %s; process stopped", cfg.CancelGrace))
			a.stop()
			out = <-got
		}
		timer.Stop()
	}
	if out.err == nil {
		a.observe(Event{Kind: EventPromptEnd, SessionID: sid, Update: string(out.resp.StopReason)})
	}
	collected, truncated := a.client.end(t)
	res := subagent.Result{}
	if collected != "" {
		res.Output = []subagent.Block{{Type: "text", Text: collected}}
	}
	switch {
	case cancelled:
		res.StopReason = subagent.StopAborted
	case out.err != nil && (disconnected(out.err) || isClosed(a.conn.Done())):
		res.StopReason = subagent.StopError
		<-a.piped.Gone()
		diag = append(diag, "acp agent exited during session/prompt: "+a.piped.Outcome().Detail)
	case out.err != nil:
		res.StopReason = subagent.StopError
		if re, ok := rpcError(out.err); ok {
			diag = append(diag, fmt.Sprintf("acp session/prompt failed: %s (%d)", re.Message, re.Code))
		} else {
			diag = append(diag, "acp session/prompt failed: "+out.err.Error())
		}
	default:
		res.StopReason, diag = mapStop(out.resp.StopReason, diag)
	}
	if truncated {
		diag = append(diag, fmt.Sprintf("acp output truncated at %d bytes", cfg.MaxOutputBytes))
	}
	res.Diagnostic = a.diagnostic(strings.Join(diag, "; "))
	return res
}

// mapStop maps an ACP stopReason (docs/INTEROP.md section 1.5).
func mapStop(r acpsdk.StopReason, diag []string) (string, []string) {
	switch r {
	case acpsdk.StopReasonEndTurn:
		return subagent.StopCompleted, diag
	case acpsdk.StopReasonMaxTokens:
		return subagent.StopMaxTokens, diag
	case acpsdk.StopReasonRefusal:
		return subagent.StopRefusal, diag
	case acpsdk.StopReasonCancelled:
		return subagent.StopAborted, diag
	}
	return subagent.StopError, append(diag, "acp stop reason: "+string(r))
}

// diagnostic appends the stderr tail to d, bounded by subagent.BoundDiagnostic.
func (a *agent) diagnostic(d string) string {
	if tail := a.piped.StderrTail(); tail != "" {
		a.p.cfg.Logger.Debug(fmt.Sprintf("acp provider %q: agent stderr: %s", a.p.cfg.Name, tail))
		d += "\nstderr: " + tail
	}
	return subagent.BoundDiagnostic(d)
}

// stop runs the stop ladder (close stdin, EOFGrace, SIGTERM, Grace, SIGKILL, wait
// until the marked tree is gone and reaped) and waits for the connection to end.
// Idempotent: every caller waits for the same stop and gets its error.
func (a *agent) stop() error {
	a.stopOnce.Do(func() {
		out := a.piped.Stop()
		<-a.conn.Done()
		if a.piped.Survived() {
			a.stopErr = messages.Errorf(CodeTeardownFailed, "acp provider %q: agent process tree still alive after SIGKILL", a.p.cfg.Name)
		}
		a.observe(Event{Kind: EventStopped, Outcome: out})
		a.p.untrack(a)
		close(a.stopped)
	})
	<-a.stopped
	return a.stopErr
}
