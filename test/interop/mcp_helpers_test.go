package interop

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

const moduleRoot = "../.."

// buildTroupeMCP builds cmd/troupe-mcp into a fresh directory and registers the
// survivor check: when the test ends, no process of that binary, and no
// Inspector, is left (per /proc).
func buildTroupeMCP(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "troupe-mcp")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/troupe-mcp")
	cmd.Dir = moduleRoot
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	t.Cleanup(func() { requireNoSurvivors(t, bin, inspectorMarker) })
	return bin
}

// inspectorMarker is in the command line of every Inspector process.
const inspectorMarker = "inspector-cli/build"

// processesMatching returns the pids whose command line contains any marker.
func processesMatching(markers ...string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !alive(pid) {
			continue
		}
		cmdline := strings.ReplaceAll(string(b), "\x00", " ")
		for _, m := range markers {
			if strings.Contains(cmdline, m) {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// requireNoSurvivors fails the test if a process matching a marker outlives a
// short grace (an exiting process may still be reaped by its parent), and kills it.
func requireNoSurvivors(t *testing.T, markers ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := processesMatching(markers...)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, pid := range left {
				if p, err := os.FindProcess(pid); err == nil {
					_ = p.Kill()
				}
			}
			t.Errorf("processes survived the test: %v", left)
			return
		}
		for _, pid := range left {
			awaitExitEvent(pid, deadline)
		}
	}
}

// awaitExitEvent waits until pid has exited (its pidfd is readable) or until
// deadline; a pid already gone returns at once. Whether the process has gone is
// the caller's next look at /proc: this only waits for the event.
func awaitExitEvent(pid int, deadline time.Time) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for left := time.Until(deadline); left > 0; left = time.Until(deadline) {
		if n, err := unix.Poll(fds, int((left+time.Millisecond-1)/time.Millisecond)); n > 0 || (err != nil && err != unix.EINTR) {
			return
		}
	}
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

// peerEnv is INTEROP.md section 3.3's minimal environment for a peer.
func peerEnv(t *testing.T) []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
		"HTTP_PROXY=http://127.0.0.1:9", "HTTPS_PROXY=http://127.0.0.1:9", "ALL_PROXY=http://127.0.0.1:9"}
}

// inspector runs the Inspector CLI once (from its build dir, INTEROP.md section 3.3) and
// returns its stdout, stderr and exit code.
func inspector(t *testing.T, peers string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	argv := append([]string{"node", "index.js"}, args...)
	if len(args) > 0 && !strings.HasPrefix(args[0], "http") && netns() {
		// A stdio target runs inside the Inspector's namespace: no network at all.
		argv = append([]string{"unshare", "-rn"}, argv...)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = filepath.Join(peers, "@modelcontextprotocol", "inspector-cli", "build")
	cmd.Env = peerEnv(t)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code = cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("inspector %v: %v\nstderr: %s", args, err, errb.String())
	}
	return out.String(), errb.String(), code
}

// netns reports whether stdio peers run in a fresh network namespace
// (TROUPE_INTEROP_NETNS=1 and `unshare -rn true` works; INTEROP.md section 3.3).
// An HTTP target stays outside: it must reach the test's loopback server.
func netns() bool {
	return os.Getenv("TROUPE_INTEROP_NETNS") == "1" && exec.Command("unshare", "-rn", "true").Run() == nil
}

// pidFileCommand writes its shell's pid to dir/pid, then becomes sleep 30.
func pidFileCommand(dir string) string {
	return "echo $$ > " + filepath.Join(dir, "pid") + "; exec sleep 30"
}

func readPID(t *testing.T, dir string) int {
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

// httpServer is a troupe-mcp --http process: its URL, token and stderr lines.
type httpServer struct {
	cmd   *exec.Cmd
	url   string
	token string
	lines chan string // stderr after the startup line
	done  chan struct{}
}

// startHTTP starts bin with --http 127.0.0.1:0 and args, reads the startup line
// and the token file. Cleanup sends SIGTERM and requires a clean exit.
func startHTTP(t *testing.T, bin string, args ...string) *httpServer {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "token")
	cmd := exec.Command(bin, append([]string{"--http", "127.0.0.1:0", "--token-file", tokenFile}, args...)...)
	cmd.Env = os.Environ()
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	s := &httpServer{cmd: cmd, lines: make(chan string, 256), done: make(chan struct{})}
	sc := bufio.NewScanner(stderr)
	first := make(chan string, 1)
	go func() {
		defer close(s.lines)
		if sc.Scan() {
			first <- sc.Text()
		}
		close(first)
		for sc.Scan() {
			select {
			case s.lines <- sc.Text():
			default: // a test reads only the lines it needs
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() { _ = cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-s.done:
			require.Equal(t, 0, cmd.ProcessState.ExitCode(), "troupe-mcp exit status after SIGINT")
		case <-time.After(40 * time.Second):
			_ = cmd.Process.Kill()
			<-s.done
			t.Error("troupe-mcp did not exit within 40 s of SIGINT")
		}
	})
	var line string
	select {
	case line = <-first:
	case <-time.After(30 * time.Second):
		t.Fatal("no startup line from troupe-mcp")
	}
	var port int
	_, err = fmt.Sscanf(line, "troupe-mcp: listening on http://127.0.0.1:%d/mcp", &port)
	require.NoError(t, err, "startup line %q", line)
	s.url = fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	b, err := os.ReadFile(tokenFile)
	require.NoError(t, err)
	s.token = strings.TrimSpace(string(b))
	fi, err := os.Stat(tokenFile)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	require.GreaterOrEqual(t, len(s.token), 32)
	return s
}

// waitLine waits for a stderr line containing want.
func (s *httpServer) waitLine(t *testing.T, want string) string {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				t.Fatalf("troupe-mcp's stderr ended before a line with %q", want)
			}
			if strings.Contains(l, want) {
				return l
			}
		case <-timeout:
			t.Fatalf("no stderr line with %q within 20 s", want)
		}
	}
}
