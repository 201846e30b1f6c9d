package interop

import (
	"context"
	"net/http"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// The go-sdk client against the built troupe-mcp over stdio: these need no peer.

func connectBinary(t *testing.T, bin string, args ...string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "troupe-test", Version: "1"}, nil)
	cmd := exec.Command(bin, args...)
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func callText(t *testing.T, cs *mcp.ClientSession, name string, args any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err)
	require.Len(t, res.Content, 1)
	return res.Content[0].(*mcp.TextContent).Text, res.IsError
}

func TestInteropP01_StdioBinaryTools(t *testing.T) {
	bin := buildTroupeMCP(t)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--shell"}, []string{"job_kill", "job_list", "job_output", "job_start"}},
		{nil, []string{"job_kill", "job_list", "job_output"}},
	} {
		cs := connectBinary(t, bin, tc.args...)
		list, err := cs.ListTools(context.Background(), nil)
		require.NoError(t, err)
		var names []string
		for _, tl := range list.Tools {
			names = append(names, tl.Name)
		}
		slices.Sort(names)
		require.Equal(t, tc.want, names)
		caps := cs.InitializeResult().Capabilities
		require.True(t, caps.Resources != nil && caps.Resources.Subscribe)
		require.Nil(t, caps.Logging)
		require.Nil(t, caps.Prompts)
	}
}

func TestInteropP02_StdioBinaryStartListOutput(t *testing.T) {
	cs := connectBinary(t, buildTroupeMCP(t), "--shell")
	text, isErr := callText(t, cs, "job_start", map[string]any{"command": "sleep 0.2; echo x"})
	require.False(t, isErr)
	require.Equal(t, "started background shell job bash-1", text)
	text, _ = callText(t, cs, "job_list", map[string]any{})
	require.Equal(t, "bash-1 [bash] running — sleep 0.2; echo x", text)
	text, _ = callText(t, cs, "job_output", map[string]any{"job_id": "bash-1", "wait": true})
	require.Equal(t, "x\n[status: completed, exit code: 0]", text)
}

func TestInteropP03_StdioBinaryBadArguments(t *testing.T) {
	cs := connectBinary(t, buildTroupeMCP(t), "--shell")
	text, isErr := callText(t, cs, "job_start", map[string]any{"command": "true", "timeout_ms": 0})
	require.True(t, isErr)
	require.Equal(t, "Error: invalid timeout_ms: expected a positive number of milliseconds, got 0", text)
	text, isErr = callText(t, cs, "job_output", map[string]any{"job_id": "bash-1", "bogus": 1})
	require.True(t, isErr)
	require.Equal(t, `Error: invalid arguments: json: unknown field "bogus"`, text)
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "nope", Arguments: map[string]any{}})
	require.ErrorContains(t, err, `unknown tool "nope"`)
}

// Closing the binary's stdin ends it, and its job's process with it.
func TestInteropP09_StdioBinaryEOF(t *testing.T) {
	bin := buildTroupeMCP(t)
	client := mcp.NewClient(&mcp.Implementation{Name: "troupe-test", Version: "1"}, nil)
	cmd := exec.Command(bin, "--shell")
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd, TerminateDuration: 30 * time.Second}, nil)
	require.NoError(t, err)
	dir := t.TempDir()
	text, _ := callText(t, cs, "job_start", map[string]any{"command": pidFileCommand(dir)})
	require.Equal(t, "started background shell job bash-1", text)
	pid := readPID(t, dir)
	require.True(t, alive(pid))
	// Close closes stdin and waits for the process (SIGTERM only after 30 s).
	require.NoError(t, cs.Close())
	require.NotNil(t, cmd.ProcessState)
	require.Equal(t, 0, cmd.ProcessState.ExitCode())
	require.False(t, alive(pid), "troupe-mcp exited before its job's process was gone")
}

// The go-sdk client negotiates 2026-07-28 over stdio and 2025-11-25 over HTTP.
func TestInteropP15_GoSDKProtocolVersions(t *testing.T) {
	bin := buildTroupeMCP(t)
	require.Equal(t, "2026-07-28", connectBinary(t, bin).InitializeResult().ProtocolVersion)
	srv := startHTTP(t, bin)
	client := mcp.NewClient(&mcp.Implementation{Name: "troupe-test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.url, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{srv.token}}}, nil)
	require.NoError(t, err)
	defer cs.Close()
	require.Equal(t, "2025-11-25", cs.InitializeResult().ProtocolVersion)
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}
