package process

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
)

// An escaped process that ignores SIGTERM is SIGKILLed after the grace period, and
// the job settles only once it is gone. The job's shell starts a grandchild in a
// session (and process group) of its own that ignores SIGTERM and then sleeps; the
// job is killed. SIGTERM stops the shell but not the grandchild, so only a SIGKILL
// sent to the grandchild itself — not to the job's process group, which it left —
// ends it. The producer's outcome is intercepted on its way from Done to the job
// actor: at that instant, before any settlement can be observed, /proc must show
// the grandchild gone. Run with and without the subreaper (the two ways the
// producer finds orphans).
//
// Catches: SIGKILL escalation sent only to the process group (the escapee lives on
// and the job settles while it runs).
func TestShellEscapedChildIgnoringSIGTERMIsSIGKILLedBeforeSettling(t *testing.T) {
	for _, noSubreaper := range []bool{false, true} {
		t.Run("NoSubreaper="+strconv.FormatBool(noSubreaper), func(t *testing.T) {
			sys := served(t)
			cfg := Config{Grace: testGrace, NoSubreaper: noSubreaper}
			// The grandchild's sh ignores TERM and execs sleep, which inherits the
			// ignored disposition; $$ is its pid, before and after the exec.
			spec := Shell(`setsid sh -c 'trap "" TERM; echo $$; exec sleep 1000' & wait`, cfg)

			var escaped atomic.Int64    // the grandchild's pid, once read from the output
			var goneAtDone atomic.Int32 // 0: no outcome yet; 1: gone when Done fired; 2: alive
			run := spec.Run
			spec.Run = func() (job.Hooks, error) {
				h, err := run()
				if err != nil {
					return h, err
				}
				inner := h.OnSettle
				h.OnSettle = func(settle func(job.Outcome)) {
					inner(func(o job.Outcome) { // the producer's one outcome, as it hands it over
						state := int32(2)
						if pid := escaped.Load(); pid > 0 && gone(int(pid)) {
							state = 1
						}
						goneAtDone.Store(state)
						settle(o)
					})
				}
				return h, nil
			}

			id, err := sys.Jobs().Start(context.Background(), spec)
			require.NoError(t, err)
			pid := pids(t, readUntil(t, sys, id, "\n"))[0]
			before, ok := readStat(pid)
			require.True(t, ok, "the grandchild %d is not running", pid)
			escaped.Store(int64(pid))
			t.Cleanup(func() { killLeftover(t, before) }) // only if the test failed to see it gone

			// The test exercises what it claims: the grandchild left the job's process
			// group and ignores SIGTERM.
			group, ok := readStat(before.ppid)
			require.True(t, ok)
			require.NotEqual(t, group.pgrp, before.pgrp, "the grandchild did not leave the job's process group")
			require.True(t, ignoresTERM(t, pid), "the grandchild does not ignore SIGTERM")

			start := time.Now()
			res, _, err := sys.Jobs().Kill(context.Background(), id, registry.NoCaller, registry.KillOptions{})
			require.NoError(t, err)
			require.Equal(t, "KILL_RESULT_REQUESTED", res.String())
			snap := settle(t, sys, id)
			require.Equal(t, job.Killed, snap.Status)
			require.GreaterOrEqual(t, time.Since(start), testGrace, "the job settled before the grace period ran out")
			require.Equal(t, int32(1), goneAtDone.Load(),
				"the producer sent its outcome while the SIGTERM-ignoring grandchild %d was alive", pid)
			require.True(t, gone(pid), "the SIGTERM-ignoring grandchild %d survived its job", pid)
		})
	}
}

// ignoresTERM reports whether /proc/<pid>/status lists SIGTERM as ignored.
func ignoresTERM(t *testing.T, pid int) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, found := strings.CutPrefix(line, "SigIgn:"); found {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			require.NoError(t, err)
			return mask&(1<<(uint(syscall.SIGTERM)-1)) != 0
		}
	}
	t.Fatalf("no SigIgn line in /proc/%d/status", pid)
	return false
}

// killLeftover SIGKILLs p if the very same process (pid and start time) is still
// alive, and reaps it if it is this process's child, so that a failing run leaves
// no process behind. (Without the subreaper, init reaps it.)
func killLeftover(t *testing.T, p procInfo) {
	info, ok := readStat(p.pid)
	if !ok || info.start != p.start {
		return
	}
	if info.state != 'Z' {
		t.Logf("killing leftover grandchild %d", p.pid)
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
	if info.ppid == os.Getpid() {
		var ws syscall.WaitStatus
		for {
			if _, err := syscall.Wait4(p.pid, &ws, 0, nil); err != syscall.EINTR {
				return
			}
		}
	}
}
