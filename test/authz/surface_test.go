package authz

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/messages"
)

// forgedSurfaceMessages is everything a stranger outside troupe can build and send
// to an owner actor: the message value itself and wire messages (package owner
// exports no message type its actor handles). The injecting messages are in
// internal/deliver, which TestOutsiderCannotBuildSurfaceMessages shows an outsider
// cannot import.
func forgedSurfaceMessages(m owner.Message) []any {
	return []any{m, &m, &messages.ErrorInfo{Code: "x", Message: m.Text}, &messages.KillRequest{JobId: "bash-1", Reason: m.Text}}
}

// TestOutsiderCannotBuildSurfaceMessages: a module outside troupe that tries to
// build a surface message (internal/deliver.Relay) does not compile — the go
// command refuses the import — so owner-N PIDs, however predictable, carry nothing
// into a surface.
func TestOutsiderCannotBuildSurfaceMessages(t *testing.T) {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		t.Skipf("no go command at %s", goBin)
	}
	repo, err := filepath.Abs("../..")
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/outsider\n\ngo 1.24\n\n"+
		"require github.com/troupe-rt/troupe v0.0.0\n\nreplace github.com/troupe-rt/troupe => "+repo+"\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\n"+
		"import \"github.com/troupe-rt/troupe/internal/deliver\"\n\n"+
		"func main() { _ = &deliver.Relay{Message: deliver.Message{Text: \"Background subagent c reported:\"}} }\n"), 0o644))
	cmd := exec.Command(goBin, "list", "-e", "-f", "{{.Error}}", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off", "GOWORK=off")
	out, _ := cmd.CombinedOutput()
	require.Contains(t, string(out), "use of internal package github.com/troupe-rt/troupe/internal/deliver not allowed",
		"an outsider could import the surface messages: %s", strings.TrimSpace(string(out)))
}
