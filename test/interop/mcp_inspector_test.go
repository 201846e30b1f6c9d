package interop

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The Inspector over stdio against the built troupe-mcp --shell.
func TestInteropP13_InspectorStdio(t *testing.T) {
	peers := requirePeers(t)
	bin := buildTroupeMCP(t)

	out, errOut, code := inspector(t, peers, bin, "--shell", "--method", "tools/list")
	require.Equal(t, 0, code, "stderr: %s", errOut)
	for _, name := range []string{"job_kill", "job_list", "job_output", "job_start"} {
		require.Contains(t, out, `"name": "`+name+`"`)
	}
	require.Equal(t, 4, strings.Count(out, `"inputSchema"`))

	// The job's command carries a marker in its command line, as its shell (the -c
	// argument) and, once exec'd, as sleep's argv[0]: the Inspector exits as soon
	// as job_start answers, and its server's teardown may kill the shell before it
	// has run a single command, so a pid file it writes is not awaited.
	dir := t.TempDir()
	marker := "troupe-p13-" + filepath.Base(dir)
	out, errOut, code = inspector(t, peers, bin, "--shell", "--method", "tools/call", "--tool-name", "job_start",
		"--tool-arg", "command=echo $$ > "+filepath.Join(dir, "pid")+"; exec -a "+marker+" sleep 30")
	require.Equal(t, 0, code, "stderr: %s", errOut)
	require.Contains(t, out, "started background shell job bash-1")
	// The Inspector has exited; its server follows (stdin EOF or SIGTERM), and
	// with it the job's process.
	require.Eventually(t, func() bool { return len(processesMatching(bin)) == 0 }, 10*time.Second, 10*time.Millisecond,
		"troupe-mcp outlived the Inspector")
	require.Empty(t, processesMatching(marker), "the job's process outlived troupe-mcp")
	if b, err := os.ReadFile(filepath.Join(dir, "pid")); err == nil && strings.HasSuffix(string(b), "\n") {
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		require.NoError(t, err)
		require.False(t, alive(pid), "the job's process outlived troupe-mcp")
	}

	out, errOut, code = inspector(t, peers, bin, "--shell", "--method", "tools/call", "--tool-name", "job_output",
		"--tool-arg", "job_id=bash-99")
	require.Equal(t, 0, code, "stderr: %s", errOut)
	require.Contains(t, out, `"isError": true`)
	require.Contains(t, out, "Error: unknown job bash-99")
}

// The Inspector over streamable HTTP, with the bearer token.
func TestInteropP14_InspectorHTTP(t *testing.T) {
	peers := requirePeers(t)
	bin := buildTroupeMCP(t)
	srv := startHTTP(t, bin, "--shell", "--idle-timeout", "1s")
	auth := "Authorization: Bearer " + srv.token

	out, errOut, code := inspector(t, peers, srv.url, "--method", "resources/read", "--uri", "troupe://jobs", "--header", auth)
	require.Equal(t, 0, code, "stderr: %s", errOut)
	require.Contains(t, out, "(no background jobs)")

	dir := t.TempDir()
	out, errOut, code = inspector(t, peers, srv.url, "--method", "tools/call", "--tool-name", "job_start",
		"--tool-arg", "command="+pidFileCommand(dir), "--header", auth)
	called := time.Now()
	require.Equal(t, 0, code, "stderr: %s", errOut)
	require.Contains(t, out, "started background shell job bash-1")
	pid := readPID(t, dir)
	// The Inspector leaves its session open; the idle timeout (1 s) ends it.
	require.Eventually(t, func() bool { return !alive(pid) }, 10*time.Second, 10*time.Millisecond)
	require.Less(t, time.Since(called), 3*time.Second, "the idle session's job outlived 3 s")

	_, errOut, code = inspector(t, peers, srv.url, "--method", "tools/list", "--header", "Authorization: Bearer wrong")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "unauthorized")
}

// The Inspector negotiates 2025-11-25 (the server logs each initialized session).
func TestInteropP15_InspectorProtocolVersion(t *testing.T) {
	peers := requirePeers(t)
	bin := buildTroupeMCP(t)
	srv := startHTTP(t, bin, "--verbose")
	_, errOut, code := inspector(t, peers, srv.url, "--method", "tools/list", "--header", "Authorization: Bearer "+srv.token)
	require.Equal(t, 0, code, "stderr: %s", errOut)
	line := srv.waitLine(t, "mcpserver: session initialized")
	require.Contains(t, line, "protocol=2025-11-25")
}
