package mcpserver_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/interop/mcpserver"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/tools/jobtools"
)

// New needs the agent registry; bad values fail config/invalid.
func TestNewRefusesBadConfig(t *testing.T) {
	sys, err := troupe.New(troupe.DefaultConfig())
	require.NoError(t, err)
	defer func() { require.NoError(t, sys.Shutdown(context.Background())) }()
	_, err = mcpserver.New(sys, mcpserver.Config{})
	require.EqualError(t, err, "mcpserver: the agent registry is not mounted")
	require.ErrorIs(t, err, messages.ErrInvalidConfig)

	_, err = sys.Jobs().MountAgents(context.Background(), sys.Scope())
	require.NoError(t, err)
	_, err = mcpserver.New(sys, mcpserver.Config{Token: "short"})
	require.EqualError(t, err, "mcpserver: the token must have at least 32 bytes, got 5")
	bad := int64(0)
	_, err = mcpserver.New(sys, mcpserver.Config{Jobs: jobtoolsConfigWait(&bad)})
	require.ErrorContains(t, err, "tool-jobs: invalid waitTimeoutMs")

	srv, err := mcpserver.New(sys, mcpserver.Config{})
	require.NoError(t, err)
	_, err = srv.Handler()
	require.EqualError(t, err, "mcpserver: the HTTP handler needs a token of at least 32 bytes")
	require.NoError(t, srv.Close(context.Background()))
}

// A fixed stdio session id that a live agent holds is refused, and nothing is left.
func TestServeStdioRefusesALiveSessionID(t *testing.T) {
	f := newFixture(t, mcpserver.Config{SessionID: "mcp-taken"})
	agent, err := f.sys.NewAgent(nil, "mcp-taken")
	require.NoError(t, err)
	require.NoError(t, f.sys.Jobs().RegisterAgent(context.Background(), agent))
	defer func() { require.NoError(t, agent.Dispose(context.Background())) }()
	err = f.srv.ServeStdio(context.Background(), strings.NewReader(""), io.Discard)
	require.EqualError(t, err, `mcpserver: session "mcp-taken" already has a live agent`)
	require.Empty(t, f.srv.Sessions())
}

// A roster subscriber hears each burst of changes as an update without troupe keys.
func TestRosterChangesReachRosterSubscribers(t *testing.T) {
	f := newFixture(t, shellConfig())
	c := f.stdio(t)
	require.NoError(t, c.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: "troupe://jobs"}))
	c.call(t, "job_start", map[string]any{"command": "sleep 600"})
	u := c.nextUpdate(t)
	require.Equal(t, "troupe://jobs", u.URI)
	_, hasNotice := u.Meta[mcpserver.MetaNotice]
	_, hasSummary := u.Meta[mcpserver.MetaSummary]
	require.False(t, hasNotice || hasSummary, "a roster change carries no troupe/* keys: %v", u.Meta)
}

// Close ends every session (its jobs gone) and refuses new ones.
func TestCloseEndsSessions(t *testing.T) {
	f := newFixture(t, shellConfig())
	c := f.stdio(t)
	dir := t.TempDir()
	c.call(t, "job_start", map[string]any{"command": pidFileCommand(dir)})
	pid := waitPID(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, f.srv.Close(ctx))
	require.False(t, alive(pid))
	require.Empty(t, f.srv.Sessions())
	select {
	case <-c.served:
	case <-time.After(30 * time.Second):
		t.Fatal("ServeStdio did not return after Close")
	}
	err := f.srv.ServeStdio(context.Background(), strings.NewReader(""), io.Discard)
	require.EqualError(t, err, "mcpserver: the server is closing")
}

func TestLabel(t *testing.T) {
	require.Equal(t, "echo hi", mcpserver.Label("echo hi"))
	require.Equal(t, "echo a…", mcpserver.Label("echo a\necho b"))
	long := strings.Repeat("é", 150) // 300 bytes
	got := mcpserver.Label(long)
	require.Equal(t, strings.Repeat("é", 100)+"…", got)
	odd := "a" + strings.Repeat("é", 150)
	require.Equal(t, "a"+strings.Repeat("é", 99)+"…", mcpserver.Label(odd), "cut on a rune boundary")
	require.Equal(t, "x\uFFFDy", mcpserver.Label("x\xffy"))
}

func jobtoolsConfigWait(v *int64) jobtools.Config { return jobtools.Config{WaitTimeoutMs: v} }
