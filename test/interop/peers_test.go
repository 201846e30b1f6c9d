package interop

// The ACP peers of docs/INTEROP.md section 3: the official ACP SDK's example agent
// and codex-acp, found through requirePeers (main_test.go).

import (
	"context"
	"log/slog"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/subagent/acp"
	"github.com/troupe-rt/troupe/test/acptest"
)

// budget bounds every wait; the example agent's turns take ≈5 s.
const budget = 60 * time.Second

// peerDir is requirePeers: the peers' node_modules, or a skip (a failure under
// TROUPE_INTEROP_REQUIRED=1).
func peerDir(t *testing.T) string { return requirePeers(t) }

// offlineEnv is INTEROP section 3.3's environment additions: a private HOME and proxies that
// fail locally.
func offlineEnv(t *testing.T) map[string]string {
	return map[string]string{
		"HOME":        t.TempDir(),
		"HTTP_PROXY":  "http://127.0.0.1:9",
		"HTTPS_PROXY": "http://127.0.0.1:9",
		"ALL_PROXY":   "http://127.0.0.1:9",
	}
}

// exampleAgent is the launch recipe of the ACP SDK's example agent.
func exampleAgent(t *testing.T) acp.Config {
	dir := peerDir(t)
	script := filepath.Join(dir, "@agentclientprotocol/sdk/dist/examples/agent.js")
	require.FileExists(t, script)
	return acp.Config{Command: "node", Args: []string{script}, Cwd: t.TempDir(), Env: offlineEnv(t)}
}

// codex is codex-acp's launch recipe. authed uses the loopback model provider and
// adds the dummy key and the openai-api-key auth method; without it, codex runs on
// its default provider, whose session/new asks for authentication (with the
// loopback provider codex opens sessions without any, so the auth-required case
// could not be reached; this agent's session/new dials nothing either way).
func codex(t *testing.T, authed bool) acp.Config {
	dir := peerDir(t)
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("codex-acp cases run on linux-x64 only")
	}
	bin := filepath.Join(dir, "@zed-industries/codex-acp-linux-x64/bin/codex-acp")
	require.FileExists(t, bin)
	env := offlineEnv(t)
	env["CODEX_HOME"] = t.TempDir()
	cfg := acp.Config{Command: bin, Cwd: t.TempDir(), Env: env}
	if authed {
		cfg.Args = []string{"-c", "model_provider=loop", "-c",
			`model_providers.loop={name="loop",base_url="http://127.0.0.1:9/v1",env_key="OPENAI_API_KEY",wire_api="responses",request_max_retries=0,stream_max_retries=0}`}
		cfg.Env["OPENAI_API_KEY"] = "sk-test-not-a-key"
		cfg.AuthMethod = "openai-api-key"
	}
	return cfg
}

// observed wires rec (and a logger) into cfg.
func observed(cfg acp.Config, rec *acptest.Recorder, logger *slog.Logger) acp.Config {
	cfg.Observe, cfg.Logger = rec.Observe, logger
	return cfg
}

// requireGone: every process rec saw spawned is gone and reaped — the check every
// interop case ends with.
func requireGone(t *testing.T, rec *acptest.Recorder) {
	t.Helper()
	spawned := rec.Of(acp.EventSpawned)
	require.NotEmpty(t, spawned, "nothing was spawned")
	for _, e := range spawned {
		acptest.RequireGone(t, e.Marker, e.PID)
	}
}

func ctxFor(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), budget)
	t.Cleanup(cancel)
	return c
}
