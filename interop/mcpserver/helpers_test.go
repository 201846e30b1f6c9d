package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/internal/userauth"
	"github.com/troupe-rt/troupe/interop/mcpserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testToken = "0123456789abcdef0123456789abcdef-test"

// fixture is one System with the agent registry mounted and one MCP server on it;
// cleanup closes the server and shuts the System down.
type fixture struct {
	t   *testing.T
	sys *troupe.System
	srv *mcpserver.Server
}

func newFixture(t *testing.T, cfg mcpserver.Config) *fixture {
	t.Helper()
	sys, err := troupe.New(troupe.DefaultConfig())
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, sys.Shutdown(ctx))
	})
	_, err = sys.Jobs().MountAgents(context.Background(), sys.Scope())
	require.NoError(t, err)
	if cfg.Token == "" {
		cfg.Token = testToken
	}
	srv, err := mcpserver.New(sys, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, srv.Close(ctx))
	})
	return &fixture{t: t, sys: sys, srv: srv}
}

// client is one go-sdk client session with the resource updates it received.
type client struct {
	cs      *mcp.ClientSession
	updates chan *mcp.ResourceUpdatedNotificationParams
	served  <-chan struct{} // stdio: closed when ServeStdio returned
	err     *error          // stdio: what it returned, once served is closed
	stdin   io.WriteCloser  // stdio: the server's stdin (the client's writer)
}

func newClient(updates chan *mcp.ResourceUpdatedNotificationParams) *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "troupe-test", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			updates <- r.Params
		},
	})
}

// stdio serves one session over a pipe pair and connects a go-sdk client to it.
func (f *fixture) stdio(t *testing.T) *client {
	t.Helper()
	sr, cw := io.Pipe()
	cr, sw := io.Pipe()
	served := make(chan struct{})
	var serveErr error
	go func() { defer close(served); serveErr = f.srv.ServeStdio(context.Background(), sr, sw) }()
	updates := make(chan *mcp.ResourceUpdatedNotificationParams, 64)
	cs, err := newClient(updates).Connect(context.Background(), &mcp.IOTransport{Reader: cr, Writer: cw}, nil)
	require.NoError(t, err)
	c := &client{cs: cs, updates: updates, served: served, err: &serveErr, stdin: cw}
	t.Cleanup(func() {
		_ = cs.Close()
		select {
		case <-served:
		case <-time.After(30 * time.Second):
			t.Error("ServeStdio did not return after the client closed")
		}
	})
	return c
}

// httpServer serves the handler on a loopback test server.
func (f *fixture) httpServer(t *testing.T) *httptest.Server {
	t.Helper()
	h, err := f.srv.Handler()
	require.NoError(t, err)
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, f.srv.Close(ctx)) // ends the sessions' hanging streams first
		ts.Close()
	})
	return ts
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// http connects a go-sdk client over streamable HTTP.
func (f *fixture) http(t *testing.T, ts *httptest.Server) *client {
	t.Helper()
	updates := make(chan *mcp.ResourceUpdatedNotificationParams, 64)
	tr := &mcp.StreamableClientTransport{Endpoint: ts.URL, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{testToken, http.DefaultTransport}}}
	cs, err := newClient(updates).Connect(context.Background(), tr, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return &client{cs: cs, updates: updates}
}

// call calls a tool and returns its single text and the result.
func (c *client) call(t *testing.T, name string, args any) (string, *mcp.CallToolResult) {
	t.Helper()
	res, err := c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err)
	require.Len(t, res.Content, 1)
	text, ok := res.Content[0].(*mcp.TextContent)
	require.True(t, ok, "content %T", res.Content[0])
	return text.Text, res
}

func (c *client) read(t *testing.T, uri string) (*mcp.ReadResourceResult, error) {
	t.Helper()
	return c.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
}

// nextUpdate waits for the next resource update.
func (c *client) nextUpdate(t *testing.T) *mcp.ResourceUpdatedNotificationParams {
	t.Helper()
	select {
	case u := <-c.updates:
		return u
	case <-time.After(20 * time.Second):
		t.Fatal("no notifications/resources/updated within 20 s")
		return nil
	}
}

// notices collects n updates carrying troupe/notice, keyed by URI; updates
// without it (roster changes) are skipped.
func (c *client) notices(t *testing.T, n int) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for got := 0; got < n; {
		u := c.nextUpdate(t)
		if text, ok := u.Meta[mcpserver.MetaNotice].(string); ok {
			out[u.URI] = append(out[u.URI], text)
			got++
		}
	}
	return out
}

// drainNotices takes every update received so far and returns the notices among them.
func drainNotices(updates chan *mcp.ResourceUpdatedNotificationParams) []string {
	var out []string
	for {
		select {
		case u := <-updates:
			if text, ok := u.Meta[mcpserver.MetaNotice].(string); ok {
				out = append(out, text)
			}
		default:
			return out
		}
	}
}

func rpcCode(t *testing.T, err error) (int64, string) {
	t.Helper()
	var werr *jsonrpc.Error
	require.True(t, errors.As(err, &werr), "not a JSON-RPC error: %v", err)
	return werr.Code, werr.Message
}

// pidFileCommand writes its shell's pid to dir/pid and becomes sleep 600.
func pidFileCommand(dir string) string {
	return "echo $$ > " + filepath.Join(dir, "pid") + "; exec sleep 600"
}

// waitPID waits for the pid file and returns the pid.
func waitPID(t *testing.T, dir string) int {
	t.Helper()
	var pid int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "pid"))
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, 20*time.Second, 10*time.Millisecond)
	return pid
}

// alive reports whether pid names a live (non-zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// asSession is the user authority over session (what the human controller acts
// with, SPEC §4): it sees what that session sees, whichever incarnation the MCP
// session registered (the tests hold none), and across the session's end. Only
// troupe's own code can mint it (internal/userauth).
func asSession(session string) registry.Caller {
	return userauth.ForSession(session).(registry.Caller)
}
