package process

import (
	"bufio"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
)

// markedAlive lists live processes carrying marker, read from /proc.
func markedAlive(marker string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && strings.Contains("\x00"+string(b), "\x00"+marker+"\x00") {
			pids = append(pids, pid)
		}
	}
	return pids
}

func requirePipedGone(t *testing.T, p *Piped) {
	t.Helper()
	require.Empty(t, markedAlive(p.Marker()), "a marked process survived")
	_, err := os.Stat("/proc/" + strconv.Itoa(p.PID()))
	require.True(t, os.IsNotExist(err), "the main process is not reaped")
	require.False(t, p.Survived())
}

// A piped process talks over its stdin and stdout; closing stdin ends a
// well-behaved one with no signal.
func TestPipedEchoesAndExitsOnEOF(t *testing.T) {
	p, err := StartPiped([]string{"cat"}, Config{NoWatchdog: true})
	require.NoError(t, err)
	_, err = io.WriteString(p.Stdin(), "hello\n")
	require.NoError(t, err)
	line, err := bufio.NewReader(p.Stdout()).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "hello\n", line)
	out := p.Stop()
	require.Equal(t, job.Outcome{Status: job.Completed, Detail: "exit code: 0"}, out)
	require.Equal(t, out, <-p.Done())
	require.Equal(t, out, p.Stop(), "Stop is idempotent")
	requirePipedGone(t, p)
}

// The ladder: EOF ignored → SIGTERM; SIGTERM ignored → SIGKILL; an escaped
// grandchild (setsid) is killed too; stderr goes to a bounded tail.
func TestPipedStopLadder(t *testing.T) {
	for _, tc := range []struct {
		name, script, detail string
	}{
		{"EOF ignored", "echo oops >&2; exec sleep 600 < /dev/null", "signal: SIGTERM"},
		{"SIGTERM ignored", "trap '' TERM; echo oops >&2; sleep 600 < /dev/null & wait; wait", "signal: SIGKILL"},
		{"escaped grandchild", "setsid sleep 600 < /dev/null & echo oops >&2; exec cat", "exit code: 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := StartPiped([]string{"sh", "-c", tc.script}, Config{NoWatchdog: true, EOFGrace: 100 * time.Millisecond, Grace: 100 * time.Millisecond, RetainBytes: 3})
			require.NoError(t, err)
			deadline := time.Now().Add(10 * time.Second)
			for len(markedAlive(p.Marker())) < 2 && !strings.HasPrefix(tc.name, "EOF") {
				require.True(t, time.Now().Before(deadline), "the child never appeared")
				time.Sleep(pollInterval) // polling /proc with a deadline until the child is there
			}
			out := p.Stop()
			require.Equal(t, tc.detail, out.Detail)
			require.Equal(t, "ps\n", p.StderrTail(), "the tail keeps the last bytes")
			requirePipedGone(t, p)
		})
	}
}

func TestPipedSpawnFailure(t *testing.T) {
	_, err := StartPiped([]string{"/nonexistent/agent"}, Config{NoWatchdog: true})
	require.ErrorContains(t, err, "/nonexistent/agent")
	_, err = StartPiped(nil, Config{})
	require.Error(t, err)
	_, err = StartPiped([]string{"true"}, Config{EOFGrace: -1})
	require.Error(t, err)
}
