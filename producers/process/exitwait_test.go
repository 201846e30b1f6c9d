package process

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// awaitExit: a process killed while it waits is reported as exited (its zombie
// still unreaped), a live one holds it to its deadline, a pid whose start time
// differs is another process (the one meant is gone), and a deadline already past
// still looks once.
func TestAwaitExitTellsExitedFromLive(t *testing.T) {
	cmd := exec.Command("sleep", "600")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	info, ok := readStat(pid)
	require.True(t, ok)

	require.False(t, awaitExit(pid, info.start, time.Now().Add(50*time.Millisecond)), "a live process exited")
	require.True(t, awaitExit(pid, info.start+1, time.Now().Add(time.Minute)), "another process's start time is the one meant")

	done := make(chan bool, 1)
	go func() { done <- awaitExit(pid, info.start, time.Now().Add(time.Minute)) }()
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	require.True(t, <-done, "the killed process did not exit")
	zombie, ok := readStat(pid)
	require.True(t, ok && zombie.state == 'Z', "it is an unreaped zombie now")
	require.True(t, awaitExit(pid, info.start, time.Now()), "a zombie has exited")

	reapChild(pid, time.Now().Add(time.Minute))
	_, ok = readStat(pid)
	require.False(t, ok, "reapChild left the zombie")
	require.True(t, awaitExit(pid, info.start, time.Now()), "a reaped process has exited")
}
