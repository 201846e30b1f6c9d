// Package acptest is troupe's scripted ACP agent for tests: a Go program on
// acpsdk.AgentSideConnection that a test binary re-executes as itself. A test
// package calls MaybeRun first thing in its TestMain; the child process then runs
// the fake instead of the tests, scripted by the JSON Script in the environment
// variable EnvScript, and records every message it receives (and its pid, cwd and
// environment) as JSON lines in Script.Log. Sessions persist as files in
// Script.StateDir, so a fresh process can session/load them.
package acptest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"
)

// EnvScript names the variable carrying the fake's JSON script.
const EnvScript = "TROUPE_ACP_FAKE_SCRIPT"

// Update is one session/update the fake streams during a prompt.
type Update struct {
	// Kind: "text" (agent_message_chunk text), "image" (an image chunk), "thought",
	// "tool_call", "plan", "user" (user_message_chunk).
	Kind string `json:"kind"`
	Text string `json:"text,omitempty"`
	// OtherSession sends the update for another sessionId.
	OtherSession bool `json:"otherSession,omitempty"`
}

// Option is a permission option the fake offers.
type Option struct {
	ID   string `json:"id"`
	Kind string `json:"kind"` // allow_once, allow_always, reject_once, reject_always
}

// RPCError is a JSON-RPC error the fake answers with.
type RPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// Script drives the fake. The zero value answers initialize (protocol 1),
// session/new and an empty session/prompt with end_turn.
type Script struct {
	Log      string `json:"log"`      // JSON-lines record of what it received (required)
	StateDir string `json:"stateDir"` // where sessions persist ("" → none)

	ProtocolVersion int  `json:"protocolVersion,omitempty"` // 0 → 1
	LoadSession     bool `json:"loadSession,omitempty"`
	NoInitAnswer    bool `json:"noInitAnswer,omitempty"`   // never answer initialize
	HoldNewSession  bool `json:"holdNewSession,omitempty"` // never answer session/new
	EmptySessionID  bool `json:"emptySessionId,omitempty"`

	Updates     []Update   `json:"updates,omitempty"`     // streamed on each prompt
	Permissions [][]Option `json:"permissions,omitempty"` // requested after the updates
	// CallClient are client methods the fake calls during the prompt
	// ("fs/read_text_file", "fs/write_text_file", "terminal/create", "_x/y").
	CallClient []string `json:"callClient,omitempty"`
	WritePath  string   `json:"writePath,omitempty"` // fs/write_text_file's path
	EchoEnv    bool     `json:"echoEnv,omitempty"`   // record the environment
	Echo       bool     `json:"echo,omitempty"`      // each prompt streams "echo: <its text>"

	Stop        string    `json:"stop,omitempty"` // the stopReason ("" → end_turn)
	StopSeq     []string  `json:"stopSeq,omitempty"`
	PromptError *RPCError `json:"promptError,omitempty"`
	// Block makes each prompt wait for session/cancel, then answer cancelled (after
	// AfterCancel's updates and permission request).
	Block bool `json:"block,omitempty"`
	// PermissionAfterCancel sends a permission request after session/cancel.
	PermissionAfterCancel []Option `json:"permissionAfterCancel,omitempty"`
	// IgnoreCancel makes each prompt wait forever.
	IgnoreCancel bool `json:"ignoreCancel,omitempty"`
	// GateFile holds each process's first prompt, after its updates, until the file
	// exists (or session/cancel arrives, answered cancelled).
	GateFile     string `json:"gateFile,omitempty"`
	IgnoreEOF    bool   `json:"ignoreEOF,omitempty"` // keep running after stdin EOF
	TrapTERM     bool   `json:"trapTERM,omitempty"`  // ignore SIGTERM
	ExitOnPrompt int    `json:"exitOnPrompt,omitempty"`
	Stderr       string `json:"stderr,omitempty"` // written to stderr on prompt

	LoadError  *RPCError `json:"loadError,omitempty"`
	ReplayText string    `json:"replayText,omitempty"` // an agent_message_chunk replayed on load
	NewError   *RPCError `json:"newError,omitempty"`
	AuthMethod string    `json:"authMethod,omitempty"` // advertised; session/new needs it then
}

// Record is one line of the fake's log.
type Record struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
	PID    int             `json:"pid"`
	Cwd    string          `json:"cwd,omitempty"`
	Env    []string        `json:"env,omitempty"`
	// Answer is what the client answered to a request the fake sent (its JSON, or
	// "error <code>").
	Answer string `json:"answer,omitempty"`
}

// MaybeRun runs the fake and exits when this process was started as one. Call it
// first in TestMain.
func MaybeRun() {
	raw := os.Getenv(EnvScript)
	if raw == "" {
		return
	}
	var s Script
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		fmt.Fprintln(os.Stderr, "acptest: bad script:", err)
		os.Exit(2)
	}
	os.Exit(run(s))
}

// Env returns the environment entry that makes the re-executed test binary the fake.
func Env(t testing.TB, s Script) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return EnvScript + "=" + string(b)
}

// ReadLog reads a fake's log.
func ReadLog(t testing.TB, path string) []Record {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []Record
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var r Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("acptest: bad log line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// Methods lists the methods of records, in order.
func Methods(rs []Record) []string {
	var ms []string
	for _, r := range rs {
		ms = append(ms, r.Method)
	}
	return ms
}

// gated is a reader whose first read waits for open.
type gated struct {
	r    *os.File
	open chan struct{}
}

func (g *gated) Read(b []byte) (int, error) {
	<-g.open
	return g.r.Read(b)
}

type fake struct {
	s    Script
	conn *acpsdk.AgentSideConnection
	log  *os.File
	mu   sync.Mutex
	// cancels of the prompts in flight, by session
	cancelled map[string]chan struct{}
	prompts   int
}

func run(s Script) int {
	if s.TrapTERM {
		signal.Ignore(syscall.SIGTERM)
	}
	f := &fake{s: s, cancelled: map[string]chan struct{}{}}
	lf, err := os.OpenFile(s.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "acptest:", err)
		return 2
	}
	f.log = lf
	cwd, _ := os.Getwd()
	rec := Record{Method: "start", Cwd: cwd}
	if s.EchoEnv {
		rec.Env = os.Environ()
	}
	f.record(rec)
	// The SDK's NewAgentSideConnection starts reading before it stores its
	// connection, which its handlers read: the gate holds the first read until the
	// constructor has returned (a data race under -race otherwise).
	gate := &gated{r: os.Stdin, open: make(chan struct{})}
	f.conn = acpsdk.NewAgentSideConnection(f, os.Stdout, gate)
	f.conn.SetLogger(slog.New(slog.DiscardHandler)) // stderr carries only what the script writes
	close(gate.open)
	<-f.conn.Done()
	f.record(Record{Method: "eof"})
	if s.IgnoreEOF {
		forever()
	}
	return 0
}

func (f *fake) record(r Record) {
	r.PID = os.Getpid()
	b, _ := json.Marshal(r)
	f.mu.Lock()
	defer f.mu.Unlock()
	_, _ = f.log.Write(append(b, '\n'))
}

func (f *fake) got(method string, params any) {
	b, _ := json.Marshal(params)
	f.record(Record{Method: method, Params: b})
}

func rpc(e *RPCError) error {
	return &acpsdk.RequestError{Code: e.Code, Message: e.Message}
}

func (f *fake) Initialize(ctx context.Context, p acpsdk.InitializeRequest) (acpsdk.InitializeResponse, error) {
	f.got("initialize", p)
	if f.s.NoInitAnswer {
		forever()
	}
	v := f.s.ProtocolVersion
	if v == 0 {
		v = 1
	}
	resp := acpsdk.InitializeResponse{ProtocolVersion: acpsdk.ProtocolVersion(v),
		AgentCapabilities: acpsdk.AgentCapabilities{LoadSession: f.s.LoadSession}, AuthMethods: []acpsdk.AuthMethod{}}
	if f.s.AuthMethod != "" {
		resp.AuthMethods = append(resp.AuthMethods, acpsdk.AuthMethod{Agent: &acpsdk.AuthMethodAgent{Id: f.s.AuthMethod, Name: f.s.AuthMethod}})
	}
	return resp, nil
}

func (f *fake) Authenticate(ctx context.Context, p acpsdk.AuthenticateRequest) (acpsdk.AuthenticateResponse, error) {
	f.got("authenticate", p)
	return acpsdk.AuthenticateResponse{}, nil
}

func (f *fake) NewSession(ctx context.Context, p acpsdk.NewSessionRequest) (acpsdk.NewSessionResponse, error) {
	f.got("session/new", p)
	if f.s.HoldNewSession {
		forever()
	}
	if f.s.NewError != nil {
		return acpsdk.NewSessionResponse{}, rpc(f.s.NewError)
	}
	if f.s.EmptySessionID {
		return acpsdk.NewSessionResponse{}, nil
	}
	id := fmt.Sprintf("fake-%d", os.Getpid())
	if f.s.StateDir != "" {
		_ = os.WriteFile(filepath.Join(f.s.StateDir, id), []byte(p.Cwd), 0o600)
	}
	return acpsdk.NewSessionResponse{SessionId: acpsdk.SessionId(id)}, nil
}

func (f *fake) LoadSession(ctx context.Context, p acpsdk.LoadSessionRequest) (acpsdk.LoadSessionResponse, error) {
	f.got("session/load", p)
	if f.s.LoadError != nil {
		return acpsdk.LoadSessionResponse{}, rpc(f.s.LoadError)
	}
	if f.s.StateDir == "" {
		return acpsdk.LoadSessionResponse{}, &acpsdk.RequestError{Code: -32002, Message: "Resource not found"}
	}
	if _, err := os.Stat(filepath.Join(f.s.StateDir, string(p.SessionId))); err != nil {
		return acpsdk.LoadSessionResponse{}, &acpsdk.RequestError{Code: -32002, Message: "Resource not found"}
	}
	if f.s.ReplayText != "" {
		_ = f.conn.SessionUpdate(ctx, acpsdk.SessionNotification{SessionId: p.SessionId, Update: acpsdk.UpdateAgentMessageText(f.s.ReplayText)})
	}
	return acpsdk.LoadSessionResponse{}, nil
}

func (f *fake) Cancel(ctx context.Context, p acpsdk.CancelNotification) error {
	f.got("session/cancel", p)
	f.mu.Lock()
	ch := f.cancelled[string(p.SessionId)]
	delete(f.cancelled, string(p.SessionId))
	f.mu.Unlock()
	if ch != nil {
		close(ch)
	}
	return nil
}

func (f *fake) update(sid acpsdk.SessionId, u Update) {
	var up acpsdk.SessionUpdate
	switch u.Kind {
	case "text":
		up = acpsdk.UpdateAgentMessageText(u.Text)
	case "image":
		up = acpsdk.UpdateAgentMessage(acpsdk.ImageBlock("aGVsbG8=", "image/png"))
	case "thought":
		up = acpsdk.UpdateAgentThoughtText(u.Text)
	case "tool_call":
		up = acpsdk.StartToolCall("call-1", "a tool")
	case "plan":
		up = acpsdk.UpdatePlan()
	case "user":
		up = acpsdk.UpdateUserMessageText(u.Text)
	}
	if u.OtherSession {
		sid = "another-session"
	}
	_ = f.conn.SessionUpdate(context.Background(), acpsdk.SessionNotification{SessionId: sid, Update: up})
}

func options(os []Option) []acpsdk.PermissionOption {
	var out []acpsdk.PermissionOption
	for _, o := range os {
		out = append(out, acpsdk.PermissionOption{OptionId: acpsdk.PermissionOptionId(o.ID), Kind: acpsdk.PermissionOptionKind(o.Kind), Name: o.ID})
	}
	return out
}

func (f *fake) ask(sid acpsdk.SessionId, opts []Option) {
	title := "edit"
	resp, err := f.conn.RequestPermission(context.Background(), acpsdk.RequestPermissionRequest{SessionId: sid, Options: options(opts),
		ToolCall: acpsdk.ToolCallUpdate{ToolCallId: "call-1", Title: &title}})
	if err != nil {
		f.record(Record{Method: "permission-answer", Answer: answerErr(err)})
		return
	}
	b, _ := json.Marshal(resp.Outcome)
	f.record(Record{Method: "permission-answer", Answer: string(b)})
}

func answerErr(err error) string {
	var re *acpsdk.RequestError
	if errors.As(err, &re) {
		return fmt.Sprintf("error %d", re.Code)
	}
	return "error " + err.Error()
}

func (f *fake) Prompt(ctx context.Context, p acpsdk.PromptRequest) (acpsdk.PromptResponse, error) {
	f.got("session/prompt", p)
	if f.s.Stderr != "" {
		fmt.Fprint(os.Stderr, f.s.Stderr)
	}
	if f.s.ExitOnPrompt != 0 {
		os.Exit(f.s.ExitOnPrompt)
	}
	cancel := make(chan struct{})
	f.mu.Lock()
	f.cancelled[string(p.SessionId)] = cancel
	n := f.prompts
	f.prompts++
	f.mu.Unlock()
	for _, u := range f.s.Updates {
		f.update(p.SessionId, u)
	}
	if f.s.Echo {
		var in strings.Builder
		for _, b := range p.Prompt {
			if b.Text != nil {
				in.WriteString(b.Text.Text)
			}
		}
		f.update(p.SessionId, Update{Kind: "text", Text: "echo: " + in.String()})
	}
	for _, opts := range f.s.Permissions {
		f.ask(p.SessionId, opts)
	}
	for _, m := range f.s.CallClient {
		f.call(p.SessionId, m)
	}
	if f.s.IgnoreCancel {
		forever()
	}
	if f.s.GateFile != "" && n == 0 {
		for {
			if _, err := os.Stat(f.s.GateFile); err == nil {
				break
			}
			select {
			case <-cancel:
				return acpsdk.PromptResponse{StopReason: acpsdk.StopReasonCancelled}, nil
			case <-time.After(5 * time.Millisecond): // the fake polls its gate file
			}
		}
	}
	if f.s.Block {
		<-cancel
		if f.s.PermissionAfterCancel != nil {
			f.ask(p.SessionId, f.s.PermissionAfterCancel)
		}
		return acpsdk.PromptResponse{StopReason: acpsdk.StopReasonCancelled}, nil
	}
	if f.s.PromptError != nil {
		return acpsdk.PromptResponse{}, rpc(f.s.PromptError)
	}
	stop := f.s.Stop
	if n < len(f.s.StopSeq) {
		stop = f.s.StopSeq[n]
	}
	if stop == "" {
		stop = "end_turn"
	}
	return acpsdk.PromptResponse{StopReason: acpsdk.StopReason(stop)}, nil
}

func (f *fake) call(sid acpsdk.SessionId, method string) {
	var err error
	ctx := context.Background()
	switch method {
	case "fs/read_text_file":
		_, err = f.conn.ReadTextFile(ctx, acpsdk.ReadTextFileRequest{SessionId: sid, Path: "/etc/hostname"})
	case "fs/write_text_file":
		_, err = f.conn.WriteTextFile(ctx, acpsdk.WriteTextFileRequest{SessionId: sid, Path: f.s.WritePath, Content: "x"})
	case "terminal/create":
		_, err = f.conn.CreateTerminal(ctx, acpsdk.CreateTerminalRequest{SessionId: sid, Command: "true"})
	default:
		_, err = f.conn.CallExtension(ctx, method, map[string]any{})
	}
	ans := "ok"
	if err != nil {
		ans = answerErr(err)
	}
	f.record(Record{Method: "call " + method, Answer: ans})
}

func (f *fake) CloseSession(context.Context, acpsdk.CloseSessionRequest) (acpsdk.CloseSessionResponse, error) {
	return acpsdk.CloseSessionResponse{}, nil
}

func (f *fake) ListSessions(context.Context, acpsdk.ListSessionsRequest) (acpsdk.ListSessionsResponse, error) {
	return acpsdk.ListSessionsResponse{}, nil
}

func (f *fake) ResumeSession(context.Context, acpsdk.ResumeSessionRequest) (acpsdk.ResumeSessionResponse, error) {
	return acpsdk.ResumeSessionResponse{}, &acpsdk.RequestError{Code: -32601, Message: "Method not found"}
}

func (f *fake) SetSessionConfigOption(context.Context, acpsdk.SetSessionConfigOptionRequest) (acpsdk.SetSessionConfigOptionResponse, error) {
	return acpsdk.SetSessionConfigOptionResponse{}, nil
}

func (f *fake) SetSessionMode(context.Context, acpsdk.SetSessionModeRequest) (acpsdk.SetSessionModeResponse, error) {
	return acpsdk.SetSessionModeResponse{}, nil
}

// forever blocks the calling goroutine (a timer keeps the runtime from calling it
// a deadlock).
func forever() {
	for {
		time.Sleep(time.Hour)
	}
}

var _ acpsdk.Agent = (*fake)(nil)
var _ acpsdk.AgentLoader = (*fake)(nil)

// Alive lists the pids of live processes whose environment carries marker
// (TROUPE_JOB=…), read from /proc.
func Alive(marker string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(b), "\x00") {
			if kv == marker {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// Exists reports whether /proc has pid (alive or a zombie not yet reaped).
func Exists(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

// RequireGone fails t unless no process carries marker and pid is reaped.
func RequireGone(t testing.TB, marker string, pid int) {
	t.Helper()
	if marker == "" {
		t.Fatal("acptest: no marker: the process was never spawned")
	}
	if alive := Alive(marker); len(alive) > 0 {
		t.Fatalf("processes carrying %s are still alive: %v", marker, alive)
	}
	if Exists(pid) {
		t.Fatalf("process %d is not reaped", pid)
	}
}
