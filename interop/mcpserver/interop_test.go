package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/controller"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/interop/mcpserver"
	"github.com/troupe-rt/troupe/tools/jobtools"
)

func shellConfig() mcpserver.Config { return mcpserver.Config{Shell: &mcpserver.Shell{}} }

// The tools, their schemas and the server capabilities.
func TestInteropP01_ToolsAndCapabilities(t *testing.T) {
	f := newFixture(t, shellConfig())
	c := f.stdio(t)
	list, err := c.cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	var names []string
	byName := map[string]*mcp.Tool{}
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
		byName[tl.Name] = tl
	}
	slices.Sort(names)
	require.Equal(t, []string{"job_kill", "job_list", "job_output", "job_start"}, names)

	jt, err := jobtools.New(f.sys.Jobs(), jobtools.Config{})
	require.NoError(t, err)
	for _, want := range jt.All() {
		got := byName[want.Name]
		require.NotNil(t, got, want.Name)
		require.Equal(t, want.Description, got.Description)
		require.JSONEq(t, string(want.Parameters), mustJSON(t, got.InputSchema), want.Name)
		require.Nil(t, got.OutputSchema)
	}
	require.Equal(t, jobtools.DescOutput, byName["job_output"].Description)
	require.Equal(t, "Start a shell command as a background job owned by this session and return its job id. Read it with job_output and stop it with job_kill.",
		byName["job_start"].Description)
	require.JSONEq(t, `{"type":"object","properties":{"command":{"type":"string","description":"Shell command, run with /bin/sh -c."},"timeout_ms":{"type":"number","description":"Kill the job after this many milliseconds."}},"required":["command"],"additionalProperties":false}`,
		mustJSON(t, byName["job_start"].InputSchema))

	caps := c.cs.InitializeResult().Capabilities
	require.NotNil(t, caps.Tools)
	require.NotNil(t, caps.Resources)
	require.True(t, caps.Resources.Subscribe)
	require.Nil(t, caps.Logging)
	require.Nil(t, caps.Prompts)

	bare := newFixture(t, mcpserver.Config{})
	list, err = bare.stdio(t).cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	require.Len(t, list.Tools, 3)
}

// job_start, job_list and a waiting job_output, with SPEC §3's texts.
func TestInteropP02_StartListOutput(t *testing.T) {
	f := newFixture(t, shellConfig())
	c := f.stdio(t)
	text, res := c.call(t, "job_start", map[string]any{"command": "sleep 0.2; echo x"})
	require.Equal(t, "started background shell job bash-1", text)
	require.False(t, res.IsError)
	require.JSONEq(t, `{"kind":"background","jobId":"bash-1"}`, mustJSON(t, res.StructuredContent))
	text, _ = c.call(t, "job_list", map[string]any{})
	require.Equal(t, "bash-1 [bash] running — sleep 0.2; echo x", text)
	text, res = c.call(t, "job_output", map[string]any{"job_id": "bash-1", "wait": true})
	require.Equal(t, "x\n[status: completed, exit code: 0]", text)
	require.False(t, res.IsError)
}

// Bad arguments are isError results with the exact texts; an unknown tool is -32602.
func TestInteropP03_BadArguments(t *testing.T) {
	f := newFixture(t, shellConfig())
	c := f.stdio(t)
	for _, tc := range []struct {
		tool string
		args json.RawMessage
		want string
	}{
		{"job_output", json.RawMessage(`{"job_id":"bash-1","bogus":1}`), `Error: invalid arguments: json: unknown field "bogus"`},
		{"job_output", json.RawMessage(`{"job_id":""}`), `Error: invalid job_id: expected a non-empty string, got ""`},
		{"job_start", json.RawMessage(`{"command":""}`), `Error: invalid command: expected a non-empty string`},
		{"job_start", json.RawMessage(`{"command":"true","timeout_ms":0}`), `Error: invalid timeout_ms: expected a positive number of milliseconds, got 0`},
		{"job_start", json.RawMessage(`{"command":"` + strings.Repeat("a", 16385) + `"}`), `Error: invalid command: 16385 bytes exceeds the limit of 16384`},
	} {
		text, res := c.call(t, tc.tool, tc.args)
		require.True(t, res.IsError, tc.want)
		require.Equal(t, tc.want, text)
	}
	_, err := c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "nope", Arguments: map[string]any{}})
	code, msg := rpcCode(t, err)
	require.EqualValues(t, -32602, code)
	require.Equal(t, `unknown tool "nope"`, msg)
	list, err := f.sys.Jobs().List(context.Background(), registry.NoCaller)
	require.NoError(t, err)
	require.Empty(t, list, "no job was started by a refused call")
}

// Another session's job is refused everywhere and left running.
func TestInteropP04_SessionsAreFenced(t *testing.T) {
	f := newFixture(t, shellConfig())
	ts := f.httpServer(t)
	a, b := f.http(t, ts), f.http(t, ts)
	text, _ := a.call(t, "job_start", map[string]any{"command": "sleep 600"})
	require.Equal(t, "started background shell job bash-1", text)
	for _, tool := range []string{"job_output", "job_kill"} {
		text, res := b.call(t, tool, map[string]any{"job_id": "bash-1"})
		require.True(t, res.IsError)
		require.Equal(t, "Error: job bash-1 belongs to another session", text)
	}
	_, err := b.read(t, "troupe://jobs/bash-1")
	code, msg := rpcCode(t, err)
	require.EqualValues(t, -32602, code)
	require.Equal(t, "Resource not found", msg)
	err = b.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: "troupe://jobs/bash-1"})
	code, _ = rpcCode(t, err)
	require.EqualValues(t, -32602, code)
	roster, err := b.read(t, "troupe://jobs")
	require.NoError(t, err)
	require.Equal(t, "(no background jobs)", roster.Contents[0].Text)
	text, _ = a.call(t, "job_list", map[string]any{})
	require.Equal(t, "bash-1 [bash] running — sleep 600", text)
}

const noticeSleep = "background job bash-1 (bash: sleep 0.2) finished [status: completed, exit code: 0]. Read its output with job_output."

// Completion notices reach subscribers over stdio (2026-07-28) and HTTP (2025-11-25).
func TestInteropP05_CompletionNotices(t *testing.T) {
	for _, name := range []string{"stdio", "http"} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, shellConfig())
			var c *client
			if name == "stdio" {
				c = f.stdio(t)
			} else {
				c = f.http(t, f.httpServer(t))
			}
			text, _ := c.call(t, "job_start", map[string]any{"command": "sleep 0.2"})
			require.Equal(t, "started background shell job bash-1", text)
			for _, uri := range []string{"troupe://jobs/bash-1", "troupe://jobs"} {
				require.NoError(t, c.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri}))
			}
			got := c.notices(t, 2)
			require.Equal(t, map[string][]string{
				"troupe://jobs/bash-1": {noticeSleep},
				"troupe://jobs":        {noticeSleep},
			}, got)
			// Exactly one per URI: a second job's notices come next, with nothing
			// more for bash-1 before them.
			text, _ = c.call(t, "job_start", map[string]any{"command": "true"})
			require.Equal(t, "started background shell job bash-2", text)
			next := c.notices(t, 1)
			require.Len(t, next["troupe://jobs"], 1)
			require.Contains(t, next["troupe://jobs"][0], "background job bash-2 (bash: true) finished")
		})
	}
}

// Claimed settlements send no notice; a human kill does.
func TestInteropP06_NoticeSuppression(t *testing.T) {
	f := newFixture(t, mcpserver.Config{Shell: &mcpserver.Shell{}, SessionID: "mcp-p06"})
	ctl, err := f.sys.StartController(controller.Config{})
	require.NoError(t, err)
	c := f.stdio(t)
	require.NoError(t, c.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: "troupe://jobs"}))

	c.call(t, "job_start", map[string]any{"command": "sleep 600"})
	text, _ := c.call(t, "job_kill", map[string]any{"job_id": "bash-1"})
	require.Contains(t, text, "bash-1")
	_, err = f.sys.Jobs().AwaitSettled(context.Background(), "bash-1", asSession("mcp-p06"))
	require.NoError(t, err)

	c.call(t, "job_start", map[string]any{"command": "sleep 0.3"})
	text, _ = c.call(t, "job_output", map[string]any{"job_id": "bash-2", "wait": true, "timeout_ms": 20000})
	require.Equal(t, "(no new output)\n[status: completed, exit code: 0]", text)

	c.call(t, "job_start", map[string]any{"command": "sleep 600"})
	_, err = ctl.Kill(context.Background(), "mcp-p06", "bash-3")
	require.NoError(t, err)
	got := c.notices(t, 1)
	require.Equal(t, map[string][]string{"troupe://jobs": {
		"background job bash-3 (bash: sleep 600) finished [status: killed, signal: SIGTERM; cancelled by the user]. Read its output with job_output.",
	}}, got, "the first two jobs were claimed and sent nothing; their settlements came first")
}

// A client cancellation ends the wait, claims nothing, and the notice still comes.
func TestInteropP07_ClientCancelsWait(t *testing.T) {
	f := newFixture(t, shellConfig())
	c := f.stdio(t)
	require.NoError(t, c.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: "troupe://jobs"}))
	c.call(t, "job_start", map[string]any{"command": "sleep 2"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "job_output",
			Arguments: map[string]any{"job_id": "bash-1", "wait": true, "timeout_ms": 10000}})
		done <- err
	}()
	require.Eventually(t, func() bool { n, _ := f.sys.Jobs().Waiters(context.Background(), "bash-1"); return n == 1 }, 10*time.Second, 5*time.Millisecond)
	cancel()
	require.Error(t, <-done)
	require.Eventually(t, func() bool { n, _ := f.sys.Jobs().Waiters(context.Background(), "bash-1"); return n == 0 }, 10*time.Second, 5*time.Millisecond)
	text, _ := c.call(t, "job_list", map[string]any{})
	require.Equal(t, "bash-1 [bash] running — sleep 2", text)
	got := c.notices(t, 1)
	require.Equal(t, []string{"background job bash-1 (bash: sleep 2) finished [status: completed, exit code: 0]. Read its output with job_output."},
		got["troupe://jobs"])
}

// maxWaitTimeoutMs caps a wait.
func TestInteropP08_WaitCap(t *testing.T) {
	maxWait := int64(50)
	f := newFixture(t, mcpserver.Config{Shell: &mcpserver.Shell{}, Jobs: jobtools.Config{MaxWaitTimeoutMs: &maxWait}})
	c := f.stdio(t)
	c.call(t, "job_start", map[string]any{"command": "sleep 600"})
	start := time.Now()
	text, _ := c.call(t, "job_output", map[string]any{"job_id": "bash-1", "wait": true, "timeout_ms": 600000})
	require.Less(t, time.Since(start), time.Second)
	require.Equal(t, "(no new output)\n[status: running]", text)
}

// The end of a session is owner teardown: no job, process, notice or registration
// outlives it — over stdio (EOF), HTTP DELETE and the HTTP idle timeout.
func TestInteropP09_SessionEndLeavesNothing(t *testing.T) {
	t.Run("stdio", func(t *testing.T) {
		f := newFixture(t, mcpserver.Config{Shell: &mcpserver.Shell{}, SessionID: "mcp-p09"})
		c := f.stdio(t)
		require.NoError(t, c.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: "troupe://jobs"}))
		dir := t.TempDir()
		c.call(t, "job_start", map[string]any{"command": pidFileCommand(dir)})
		require.NoError(t, c.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: "troupe://jobs/bash-1"}))
		pid := waitPID(t, dir)
		require.True(t, alive(pid))
		require.NoError(t, c.stdin.Close())
		select {
		case <-c.served:
			require.NoError(t, *c.err)
		case <-time.After(30 * time.Second):
			t.Fatal("ServeStdio did not return after EOF")
		}
		require.False(t, alive(pid), "ServeStdio returned before the job's process was gone")
		list, err := f.sys.Jobs().List(context.Background(), asSession("mcp-p09"))
		require.NoError(t, err)
		require.Empty(t, list)
		require.Nil(t, f.sys.Jobs().RegisteredAgent(context.Background(), "mcp-p09"))
		_ = c.cs.Wait() // every message the server wrote has been handled
		require.Empty(t, drainNotices(c.updates), "no notice was sent")
	})
	for _, how := range []string{"delete", "idle"} {
		t.Run("http-"+how, func(t *testing.T) {
			cfg := shellConfig()
			if how == "idle" {
				cfg.IdleTimeout = time.Second
			}
			f := newFixture(t, cfg)
			ts := f.httpServer(t)
			c := f.http(t, ts)
			dir := t.TempDir()
			c.call(t, "job_start", map[string]any{"command": pidFileCommand(dir)})
			for _, uri := range []string{"troupe://jobs", "troupe://jobs/bash-1"} {
				require.NoError(t, c.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri}))
			}
			pid := waitPID(t, dir)
			require.Len(t, f.srv.Sessions(), 1)
			session := f.srv.Sessions()[0]
			require.Regexp(t, `^mcp-[0-9a-f]{16}$`, session)
			require.NotNil(t, f.sys.Jobs().RegisteredAgent(context.Background(), session))
			if how == "delete" {
				require.NoError(t, c.cs.Close()) // sends DELETE
			}
			require.Eventually(t, func() bool { return !alive(pid) }, 20*time.Second, 10*time.Millisecond)
			require.Eventually(t, func() bool { return len(f.srv.Sessions()) == 0 }, 20*time.Second, 10*time.Millisecond)
			require.Nil(t, f.sys.Jobs().RegisteredAgent(context.Background(), session))
			list, err := f.sys.Jobs().List(context.Background(), asSession(session))
			require.NoError(t, err)
			require.Empty(t, list)
			require.Empty(t, drainNotices(c.updates), "no notice was sent")
		})
	}
}

func post(t *testing.T, url string, header map[string]string, body []byte) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp, b.String()
}

// discoverBody is a session-less server/discover of protocol 2026-07-28, as the
// go-sdk client sends it.
const discoverBody = `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{` +
	`"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
	`"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},` +
	`"io.modelcontextprotocol/clientCapabilities":{}}}}`

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// The HTTP handler's bearer token, Host and Origin checks; Listen refuses
// non-loopback addresses.
func TestInteropP10_HTTPSecurity(t *testing.T) {
	f := newFixture(t, shellConfig())
	ts := f.httpServer(t)
	auth := "Bearer " + testToken
	resp, body := post(t, ts.URL, nil, []byte(initBody))
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Equal(t, "Bearer", resp.Header.Get("WWW-Authenticate"))
	require.Equal(t, "unauthorized", body)
	resp, _ = post(t, ts.URL, map[string]string{"Authorization": "Bearer wrong"}, []byte(initBody))
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, _ = post(t, ts.URL, map[string]string{"Authorization": auth, "Host": "evil.example"}, []byte(initBody))
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	resp, _ = post(t, ts.URL, map[string]string{"Authorization": auth, "Origin": "http://evil.example"}, []byte(initBody))
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Empty(t, f.srv.Sessions(), "no refused request created an incarnation")

	_, err := mcpserver.Listen("0.0.0.0:0")
	require.EqualError(t, err, "mcpserver: refusing to listen on non-loopback address 0.0.0.0:0")
	ln, err := mcpserver.Listen("127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, ln.Close())
}

// The session, job, argument and body limits.
func TestInteropP11_Limits(t *testing.T) {
	cfg := shellConfig()
	cfg.MaxSessions = 2
	f := newFixture(t, cfg)
	ts := f.httpServer(t)
	c := f.http(t, ts)
	f.http(t, ts)
	resp, body := post(t, ts.URL, map[string]string{"Authorization": "Bearer " + testToken}, []byte(initBody))
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "mcpserver: session limit reached (limit: 2)", body)
	// a bare server/discover gets no incarnation and does not count: it is answered
	resp, body = post(t, ts.URL, map[string]string{"Authorization": "Bearer " + testToken,
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"}, []byte(discoverBody))
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `"supportedVersions"`)
	require.Len(t, f.srv.Sessions(), 2, "the discover created no incarnation")

	for i := 1; i <= 10; i++ {
		text, _ := c.call(t, "job_start", map[string]any{"command": "sleep 600"})
		require.Contains(t, text, "started background shell job")
	}
	text, res := c.call(t, "job_start", map[string]any{"command": "sleep 600"})
	require.True(t, res.IsError)
	require.Equal(t, "Error: background job limit reached for this owner (limit: 10); use job_kill to stop an unneeded job, wait for it to finish, then retry", text)

	prefix, suffix := `{"job_id":"bash-1","pad":"`, `"}`
	args := json.RawMessage(prefix + strings.Repeat("a", 65537-len(prefix)-len(suffix)) + suffix)
	require.Len(t, args, 65537)
	text, res = c.call(t, "job_output", args)
	require.True(t, res.IsError)
	require.Equal(t, "Error: invalid arguments: 65537 bytes exceeds the limit of 65536", text)

	big := append([]byte(`{"jsonrpc":"2.0","id":9,"method":"ping","params":{"pad":"`), bytes.Repeat([]byte("a"), 5<<20)...)
	big = append(big, `"}}`...)
	resp, _ = post(t, ts.URL, map[string]string{"Authorization": "Bearer " + testToken, "Mcp-Session-Id": c.cs.ID(),
		"Mcp-Protocol-Version": "2025-11-25"}, big)
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
}

// Resource reads never consume output or claim a settlement.
func TestInteropP12_ResourceReads(t *testing.T) {
	f := newFixture(t, mcpserver.Config{Shell: &mcpserver.Shell{}, SessionID: "mcp-p12"})
	c := f.stdio(t)
	require.NoError(t, c.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: "troupe://jobs"}))
	dir := t.TempDir()
	gate := filepath.Join(dir, "go")
	cmd := "echo x; while [ ! -e " + gate + " ]; do sleep 0.02; done"
	c.call(t, "job_start", map[string]any{"command": cmd})
	rec, _, err := f.sys.Jobs().Record(context.Background(), "bash-1", asSession("mcp-p12"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, total := rec.Bounds(); return total >= 2 }, 20*time.Second, 5*time.Millisecond)

	res, err := c.read(t, "troupe://jobs/bash-1")
	require.NoError(t, err)
	require.Equal(t, 0, res.TTLMs)
	require.Equal(t, "private", res.CacheScope)
	require.Equal(t, "application/json", res.Contents[0].MIMEType)
	var pub map[string]any
	require.NoError(t, json.Unmarshal([]byte(res.Contents[0].Text), &pub))
	var keys []string
	for k := range pub {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	require.Equal(t, []string{"id", "kind", "label", "startedAt", "status"}, keys)
	require.Equal(t, "running", pub["status"])

	res, err = c.read(t, "troupe://jobs")
	require.NoError(t, err)
	require.Equal(t, 0, res.TTLMs)
	require.Equal(t, "private", res.CacheScope)
	require.Equal(t, "bash-1 [bash] running — "+cmd, res.Contents[0].Text)

	text, _ := c.call(t, "job_output", map[string]any{"job_id": "bash-1"})
	require.Equal(t, "x\n[status: running]", text)

	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	snap, err := f.sys.Jobs().AwaitSettled(context.Background(), "bash-1", asSession("mcp-p12"))
	require.NoError(t, err)
	require.Equal(t, job.Completed, snap.Status)
	res, err = c.read(t, "troupe://jobs/bash-1")
	require.NoError(t, err)
	require.Contains(t, res.Contents[0].Text, `"finishedAt"`)
	got := c.notices(t, 1)
	require.Len(t, got["troupe://jobs"], 1, "the read claimed nothing: the notice was sent")
	require.Contains(t, got["troupe://jobs"][0], "background job bash-1 (bash: echo x; while")
}

// The negotiated protocol versions of the go-sdk client.
func TestInteropP15_ProtocolVersionsGoSDK(t *testing.T) {
	f := newFixture(t, shellConfig())
	require.Equal(t, "2026-07-28", f.stdio(t).cs.InitializeResult().ProtocolVersion)
	require.Equal(t, "2025-11-25", f.http(t, f.httpServer(t)).cs.InitializeResult().ProtocolVersion)
}
