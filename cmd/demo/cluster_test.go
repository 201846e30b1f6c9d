package main

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/session/postgres/pgtest"
)

// nodePIDs returns the node processes' pids the cluster demo printed.
var nodePID = regexp.MustCompile(`\(pid (\d+)\)`)

func nodePIDs(t *testing.T, stdout string) []int {
	t.Helper()
	var pids []int
	for _, m := range nodePID.FindAllStringSubmatch(stdout, -1) {
		pid, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		pids = append(pids, pid)
	}
	return pids
}

// requireGone: no process with any of pids exists (the demo reaped every node
// it started: none is orphaned, none is a zombie).
func requireGone(t *testing.T, pids []int) {
	t.Helper()
	for _, pid := range pids {
		err := syscall.Kill(pid, 0)
		require.ErrorIs(t, err, syscall.ESRCH, "node process %d outlived the demo", pid)
	}
}

// TestDemoCluster runs `demo --cluster 3` against $TROUPE_PG_DSN: three node
// processes, children started from every node, the busiest node SIGKILLed, its
// children answered again by the survivors at a new epoch, every acknowledged
// message's turn ended or logged aborted (the demo reads the store back); exit
// 0, bounded output, and no node process left behind.
func TestDemoCluster(t *testing.T) {
	pgtest.ServerDSN(t) // skipped without PostgreSQL (failed under TROUPE_PG_REQUIRED=1)
	bin := buildDemo(t)
	stdout, stderr, code := runDemo(t, bin, nil, "--cluster", "3")
	require.Equal(t, 0, code, "exit status; stdout:\n%s\nstderr:\n%s", stdout, stderr)
	pids := nodePIDs(t, stdout)
	require.Len(t, pids, 4, "three ready lines and the SIGKILL line name pids:\n%s", stdout)
	requireGone(t, pids)
	require.Contains(t, stdout, "membership: every node sees 3 members")
	require.Regexp(t, `SIGKILL n\d \(pid \d+\) mid-turn: it hosted c\d`, stdout)
	require.Regexp(t, `was on n\d: answered from n\d at epoch [2-9]`, stdout)
	require.Contains(t, stdout, "  ✓ every child of n")
	require.Contains(t, stdout, "  ✓ no acknowledged message lost")
	require.Contains(t, stdout, "cluster: 2 promises kept\n")
	require.NotContains(t, stdout, "✗")
	lines := strings.Count(stdout, "\n")
	require.Less(t, lines, 60, "bounded output")
	require.True(t, strings.ToValidUTF8(stdout, "") == stdout, "valid UTF-8")
}

// TestDemoClusterNeedsPostgres: without TROUPE_PG_DSN, or with one that does not
// answer, --cluster exits 1 with a stable code and the README's start command.
func TestDemoClusterNeedsPostgres(t *testing.T) {
	bin := buildDemo(t)
	for _, c := range []struct{ dsn, code string }{
		{"", "demo/no-postgres"},
		{"postgres://troupe@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2", "demo/postgres-unreachable"},
	} {
		stdout, stderr, code := runDemo(t, bin, []string{"TROUPE_PG_DSN=" + c.dsn}, "--cluster", "3")
		require.Equal(t, 1, code, "stderr:\n%s", stderr)
		require.Contains(t, stderr, "demo: "+c.code+": ")
		require.Contains(t, stderr, `start one with: eval "$(.ci/postgres.sh)"`)
		require.Empty(t, stdout, "no node was started")
	}
	for _, args := range [][]string{{"--cluster", "1"}, {"--cluster", "10"}, {"--cluster", "3", "--json"}} {
		_, stderr, code := runDemo(t, bin, nil, args...)
		require.Equal(t, 2, code, "%v: stderr:\n%s", args, stderr)
	}
}

// TestDemoClusterSignalStopsEveryNode: SIGTERM once the nodes are up makes the
// demo kill every node it started and exit 130; none is left.
func TestDemoClusterSignalStopsEveryNode(t *testing.T) {
	pgtest.ServerDSN(t)
	bin := buildDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--cluster", "3")
	outR, outW, err := os.Pipe()
	require.NoError(t, err)
	defer outR.Close()
	errF, err := os.CreateTemp(t.TempDir(), "stderr")
	require.NoError(t, err)
	defer errF.Close()
	cmd.Stdout, cmd.Stderr = outW, errF
	require.NoError(t, cmd.Start())
	outW.Close()
	var out strings.Builder
	sc := bufio.NewScanner(outR)
	signalled := false
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if !signalled && strings.HasPrefix(sc.Text(), "start:") { // every node is up and joined
			require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
			signalled = true
		}
	}
	err = cmd.Wait()
	stderr, _ := os.ReadFile(errF.Name())
	require.True(t, signalled, "the demo never got its nodes up; stdout:\n%s\nstderr:\n%s", out.String(), stderr)
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "the demo exited %v; stderr:\n%s", err, stderr)
	require.Equal(t, exitInterrupted, exit.ExitCode(), "stderr:\n%s", stderr)
	require.Contains(t, string(stderr), "every node was stopped")
	pids := nodePIDs(t, out.String())
	require.Len(t, pids, 3, out.String())
	requireGone(t, pids)
}
