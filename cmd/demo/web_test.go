package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDemoWebServesTheTaskListUntilInterrupted: --web prints a loopback launch URL
// with a token; the page, its sessions and its live channel answer there (jobs
// appear in the roster); SIGINT says bye to the page and exits 130.
func TestDemoWebServesTheTaskListUntilInterrupted(t *testing.T) {
	bin := buildDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--web", "--data", t.TempDir())
	outR, outW, err := os.Pipe()
	require.NoError(t, err)
	defer outR.Close()
	errF, err := os.CreateTemp(t.TempDir(), "stderr")
	require.NoError(t, err)
	defer errF.Close()
	cmd.Stdout, cmd.Stderr = outW, errF
	stderr := func() string { b, _ := os.ReadFile(errF.Name()); return string(b) }
	require.NoError(t, cmd.Start())
	outW.Close()
	sc := bufio.NewScanner(outR)
	require.True(t, sc.Scan(), "the demo printed nothing; stderr:\n%s", stderr())
	m := regexp.MustCompile(`^troupe task list: (http://127\.0\.0\.1:\d+/t/[A-Za-z0-9_-]{43}/)$`).FindStringSubmatch(sc.Text())
	require.NotNil(t, m, "first line %q", sc.Text())
	url := m[1]

	resp, err := http.Get(url)
	require.NoError(t, err)
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(page), `<ul class="jobs" aria-label="Background jobs"`)
	resp, err = http.Get(url + "api/sessions")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.JSONEq(t, `{"sessions":[{"id":"lead","label":"lead agent"},{"id":"","label":"Unowned jobs"}]}`, string(body))

	resp, err = http.Get(url + "events?session=lead")
	require.NoError(t, err)
	ev := bufio.NewReader(resp.Body)
	sawJob, sawBye := false, false
	for {
		line, err := ev.ReadString('\n')
		if err != nil {
			break
		}
		if !sawJob && strings.HasPrefix(line, "data: ") && strings.Contains(line, `"kind":"bash"`) {
			sawJob = true
			require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
		}
		if line == "event: bye\n" {
			sawBye = true
		}
	}
	resp.Body.Close()
	require.True(t, sawJob, "the lead's shell jobs appear in the roster")
	require.True(t, sawBye, "the page is told bye")
	err = cmd.Wait()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "exited %v; stderr:\n%s", err, stderr())
	require.Equal(t, exitInterrupted, exit.ExitCode(), "stderr:\n%s", stderr())
}
