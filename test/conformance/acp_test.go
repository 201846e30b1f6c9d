package conformance_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/subagent/acp"
	"github.com/troupe-rt/troupe/test/acptest"
	"github.com/troupe-rt/troupe/test/conformance"
)

func register(t *testing.T, sys *troupe.System, cfg acp.Config) subagent.Provider {
	t.Helper()
	p, err := acp.New(sys.Scope(), cfg) // its scope effect stops the provider's processes at shutdown
	require.NoError(t, err)
	return p.Registered()
}

// TestACPProviderExampleAgent runs the external-provider suite against the ACP
// SDK's example agent (docs/INTEROP.md section 3).
func TestACPProviderExampleAgent(t *testing.T) {
	dir := os.Getenv("TROUPE_INTEROP_DIR")
	_, nodeErr := exec.LookPath("node")
	if dir == "" || nodeErr != nil {
		if os.Getenv("TROUPE_INTEROP_REQUIRED") == "1" {
			t.Fatal("interop peers not installed: npm ci --prefix .ci/interop")
		}
		t.Skip("interop peers not installed: npm ci --prefix .ci/interop")
	}
	script := filepath.Join(dir, "@agentclientprotocol/sdk/dist/examples/agent.js")
	conformance.RunExternalProviderSuite(t, func(t *testing.T, sys *troupe.System) subagent.Provider {
		return register(t, sys, acp.Config{Name: "acp", Command: "node", Args: []string{script}, Cwd: t.TempDir(),
			Env: map[string]string{"HOME": t.TempDir()}})
	}, "update the configuration")
}

// TestACPProviderScriptedAgent runs it against troupe's scripted ACP agent (the
// test binary re-executed): its prompts stream a text, and, blocked until
// session/cancel, it answers cancelled.
func TestACPProviderScriptedAgent(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	conformance.RunExternalProviderSuite(t, func(t *testing.T, sys *troupe.System) subagent.Provider {
		s := acptest.Script{Log: filepath.Join(t.TempDir(), "fake.log"), Updates: []acptest.Update{{Kind: "text", Text: "hello"}}}
		if strings.HasSuffix(t.Name(), "/CancelMidTurn") {
			s.Block = true
		}
		kv := strings.SplitN(acptest.Env(t, s), "=", 2)
		return register(t, sys, acp.Config{Name: "acp", Command: exe, Cwd: t.TempDir(),
			Env: map[string]string{kv[0]: kv[1], "GORACE": "atexit_sleep_ms=0"}})
	}, "say hello")
}
