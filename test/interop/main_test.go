// Package interop runs troupe against peers it did not write (INTEROP.md section 3): the
// pinned npm packages of .ci/interop, installed by `npm ci --prefix .ci/interop`
// and found through TROUPE_INTEROP_DIR (their node_modules). Without them the
// interop cases skip; under TROUPE_INTEROP_REQUIRED=1 they fail instead.
package interop

import (
	"os"
	"os/exec"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// requirePeers returns TROUPE_INTEROP_DIR, or skips the test (fails it under
// TROUPE_INTEROP_REQUIRED=1) when it or node is missing.
func requirePeers(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("TROUPE_INTEROP_DIR")
	_, nodeErr := exec.LookPath("node")
	if dir != "" && nodeErr == nil {
		if _, err := os.Stat(dir); err == nil {
			return dir
		}
	}
	const msg = "interop peers not installed: npm ci --prefix .ci/interop"
	if os.Getenv("TROUPE_INTEROP_REQUIRED") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}
