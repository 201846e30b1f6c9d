package process

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/troupetest"
)

// The host-death tests re-execute this test binary as a host (TestHostDeathHelper,
// selected by hostModeEnv) that starts shell jobs and says on stdout what it
// started; the test then ends it the way a host dies and polls /proc.

const (
	hostModeEnv = "TROUPE_TEST_HOST"
	// hostDeathBudget is the promise: every job process gone this long after the host.
	hostDeathBudget = 3 * time.Second
	helperBudget    = 30 * time.Second // a helper host's startup and a watchdog's exit
)

// Roles of the processes a "jobs" helper host reports.
const (
	roleIgnoresTerm = "ignores-sigterm" // a child of the job's shell that ignores SIGTERM
	roleSetsid      = "setsid"          // escaped the group into a session of its own, marker kept
	roleClearedEnv  = "cleared-env"     // escaped the group with an empty environment
)

// hostJobs are the commands of a "jobs" helper host, each printing the pid of the
// process of its role.
var hostJobs = []struct{ role, cmd string }{
	{roleIgnoresTerm, "trap '' TERM; sleep 1000 & echo $!; wait"},
	{roleSetsid, "setsid sh -c 'echo $$; exec sleep 1000' & wait"},
	{roleClearedEnv, "setsid env -i sleep 1000 & echo $!; wait"},
}

// TestHostDeathHelper is not a test: it is the host process of the tests below.
// Modes: "jobs" starts hostJobs, reports their pids, then panics when stdin says
// "panic" or returns at stdin's end; "sweep" starts one job and prints the startup
// sweep's record.
func TestHostDeathHelper(t *testing.T) {
	mode := os.Getenv(hostModeEnv)
	if mode == "" {
		t.Skip("the host process of the host-death tests (run by them)")
	}
	sys, _ := troupetest.Served(t)
	fmt.Printf("INSTANCE %s\n", Instance())
	switch mode {
	case "sweep":
		id, err := sys.Jobs().Start(context.Background(), Shell("true", Config{Grace: testGrace}))
		require.NoError(t, err)
		settle(t, sys, id)
		rec, ok := StartupSweep()
		require.True(t, ok)
		b, err := json.Marshal(rec)
		require.NoError(t, err)
		fmt.Printf("SWEEP %s\n", b)
		wd, err := Watchdog()
		require.NoError(t, err)
		fmt.Printf("WATCHDOG %d\n", wd)
		return
	case "jobs":
	default:
		t.Fatalf("unknown helper mode %q", mode)
	}
	reported := make(chan int, 1024)
	cfg := Config{Grace: testGrace, reportHook: func(pid int) { reported <- pid }}
	want := map[int]bool{}
	for _, j := range hostJobs {
		id, err := sys.Jobs().Start(context.Background(), Shell(j.cmd, cfg))
		require.NoError(t, err)
		pid := pids(t, readUntil(t, sys, id, "\n"))[0]
		fmt.Printf("PROC %d %s\n", pid, j.role)
		want[pid] = true
	}
	// Every one of them is known to the watchdog (the cleared-env one only so).
	deadline := time.After(helperBudget)
	for len(want) > 0 {
		select {
		case pid := <-reported:
			delete(want, pid)
		case <-deadline:
			t.Fatalf("never reported to the watchdog: %v", want)
		}
	}
	wd, err := Watchdog()
	require.NoError(t, err)
	fmt.Printf("WATCHDOG %d\nREADY\n", wd)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() == "panic" {
			go func() { panic("the host panics") }()
			select {}
		}
	}
}

// host is a helper host process seen from the test.
type host struct {
	cmd      *exec.Cmd
	stdin    *os.File
	out      *bufio.Scanner
	stderr   *os.File
	instance string
	watchdog int
	procs    map[string]procInfo // role → process
	born     uint64              // the host's start time: its descendants started later
}

// startHost runs the helper in mode and reads what it reports up to READY (for
// "jobs") or to its end (for "sweep", whose lines it returns).
func startHost(t *testing.T, mode string) (*host, []string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHostDeathHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), hostModeEnv+"="+mode)
	// Files, not pipes copied by goroutines: Wait must not wait for the watchdog,
	// which shares the host's stderr.
	inR, inW, err := os.Pipe()
	require.NoError(t, err)
	outR, outW, err := os.Pipe()
	require.NoError(t, err)
	errF, err := os.CreateTemp(t.TempDir(), "host-stderr")
	require.NoError(t, err)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errF
	require.NoError(t, cmd.Start())
	inR.Close()
	outW.Close()
	h := &host{cmd: cmd, stdin: inW, out: bufio.NewScanner(outR), stderr: errF, procs: map[string]procInfo{}}
	t.Cleanup(func() {
		if cmd.ProcessState == nil { // the test failed before the host ended
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		inW.Close()
		outR.Close()
		errF.Close()
	})
	info, ok := readStat(cmd.Process.Pid)
	require.True(t, ok)
	h.born = info.start
	var lines []string
	for h.out.Scan() {
		line := h.out.Text()
		lines = append(lines, line)
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "INSTANCE":
			h.instance = f[1]
		case len(f) == 2 && f[0] == "WATCHDOG":
			h.watchdog, _ = strconv.Atoi(f[1])
		case len(f) == 3 && f[0] == "PROC":
			pid, _ := strconv.Atoi(f[1])
			p, ok := readStat(pid)
			require.True(t, ok, "process %d (%s) is not running", pid, f[2])
			h.procs[f[2]] = p
		}
		if line == "READY" {
			return h, lines
		}
	}
	if mode == "jobs" {
		t.Fatalf("the host ended before READY: %v\n%s", h.cmd.Wait(), h.stderrText())
	}
	require.NoError(t, h.cmd.Wait(), h.stderrText())
	return h, lines
}

func (h *host) stderrText() string {
	b, _ := os.ReadFile(h.stderr.Name())
	return string(b)
}

// live returns the live processes carrying the host's marker, or among the ones it
// reported (same pid, same start time).
func (h *host) live() []procEntry {
	prefix := h.instance + "/"
	var out []procEntry
	for _, p := range snapshot(os.Getpid()) {
		if !p.alive() {
			continue
		}
		reported := false
		for _, r := range h.procs {
			reported = reported || (r.pid == p.pid && r.start == p.start)
		}
		if reported || markedWith(p, prefix) {
			out = append(out, p)
		}
	}
	return out
}

// awaitNoneLive polls /proc until none of the host's processes is alive, or until
// the deadline; it returns those still alive.
func (h *host) awaitNoneLive(deadline time.Time) []procEntry {
	for {
		left := h.live()
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		for _, p := range left { // exit events (a pidfd each), then a look for stragglers
			awaitExit(p.pid, p.start, deadline)
		}
	}
}

// reapAdopted waits for the watchdogs to have exited and reaps every zombie child of this
// process born at or after born: the orphans of dead hosts, adopted here (this
// process is a subreaper), which their host's tree would have reaped. It fails if a
// watchdog outlives helperBudget or a zombie child is left.
func reapAdopted(t *testing.T, born uint64, watchdogs ...int) {
	t.Helper()
	deadline := time.Now().Add(helperBudget)
	for _, wd := range watchdogs {
		require.True(t, awaitExit(wd, 0, deadline), "the watchdog %d did not exit", wd)
	}
	// Reap until no zombie child born after the hosts is left: an orphan is
	// reparented here only once the last thread of its dead parent has exited.
	for {
		left := 0
		for _, pid := range zombies() {
			if info, ok := readStat(pid); ok && info.start >= born {
				left++
				var ws syscall.WaitStatus
				for {
					_, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
					if err != syscall.EINTR {
						break
					}
				}
			}
		}
		if left == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(pollInterval) // polling /proc with a deadline
	}
	z := zombies()
	for _, pid := range z {
		stat, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		t.Logf("zombie (the hosts were born at tick %d): %s", born, stat)
	}
	require.Empty(t, z, "zombie children left behind")
}

// killLeft SIGKILLs what the host left (a failed test must not leave it running).
func (h *host) killLeft() {
	for _, p := range h.live() {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
}

// sigIgnored reports whether pid ignores sig (/proc/<pid>/status SigIgn).
func sigIgnored(t *testing.T, pid int, sig syscall.Signal) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			require.NoError(t, err)
			return mask&(1<<(uint(sig)-1)) != 0
		}
	}
	t.Fatalf("no SigIgn in /proc/%d/status", pid)
	return false
}

// checkEscapes waits until the jobs' processes are what the test says they are
// (a child prints its pid before it execs): the SIGTERM ignorer ignores it, the
// escapees lead groups of their own, the cleared-env one has no marker, and every
// job's shell and its child are found.
func (h *host) checkEscapes(t *testing.T) {
	t.Helper()
	require.Len(t, h.procs, len(hostJobs))
	deadline := time.Now().Add(helperBudget)
	for {
		var wrong []string
		if !sigIgnored(t, h.procs[roleIgnoresTerm].pid, syscall.SIGTERM) {
			wrong = append(wrong, "the SIGTERM-ignoring child does not ignore it")
		}
		for _, role := range []string{roleSetsid, roleClearedEnv} {
			if p, ok := readStat(h.procs[role].pid); !ok || p.pgrp != p.pid {
				wrong = append(wrong, "the "+role+" process did not leave its job's group")
			}
		}
		for role, p := range h.procs {
			if cmd := commandOf(p.pid); cmd != "sleep 1000" {
				wrong = append(wrong, "the "+role+" process runs "+strconv.Quote(cmd)+", not sleep yet")
			}
		}
		if readMarkers(h.procs[roleClearedEnv].pid) != nil {
			wrong = append(wrong, "the cleared-env process still has a marker")
		}
		if n := len(h.live()); n != 2*len(hostJobs) {
			wrong = append(wrong, fmt.Sprintf("%d live job processes, want %d", n, 2*len(hostJobs)))
		}
		if len(wrong) == 0 {
			return
		}
		require.True(t, time.Now().Before(deadline), "the jobs never got ready: %v", wrong)
		time.Sleep(pollInterval) // polling /proc with a deadline
	}
}

func TestHostDeathStopsEveryJobProcessWithin3s(t *testing.T) {
	require.NoError(t, becomeSubreaper()) // the dead host's orphans come here, to be reaped
	for _, how := range []string{"SIGKILL", "SIGTERM", "panic"} {
		t.Run(how, func(t *testing.T) {
			h, _ := startHost(t, "jobs")
			t.Cleanup(h.killLeft)
			h.checkEscapes(t)
			switch how {
			case "SIGKILL":
				require.NoError(t, h.cmd.Process.Signal(syscall.SIGKILL))
			case "SIGTERM": // no handler: the host ends without Shutdown
				require.NoError(t, h.cmd.Process.Signal(syscall.SIGTERM))
			case "panic":
				_, err := fmt.Fprintln(h.stdin, "panic")
				require.NoError(t, err)
			}
			err := h.cmd.Wait()
			died := time.Now()
			require.Error(t, err, "the host must die, not exit cleanly")
			left := h.awaitNoneLive(died.Add(hostDeathBudget))
			require.Empty(t, left, "job processes alive %s after the host died (%s)", hostDeathBudget, how)
			t.Logf("every job process gone %s after the host's death", time.Since(died).Round(time.Millisecond))
			reapAdopted(t, h.born, h.watchdog) // the watchdog has exited: its record is written
			if how == "panic" {
				require.Contains(t, h.stderrText(), "panic: the host panics")
			}
			record := h.stderrText()
			require.Contains(t, record, "troupe watchdog: host "+strconv.Itoa(h.cmd.Process.Pid)+" ended without stopping its jobs")
			for role, p := range h.procs { // stopped by the watchdog (Pdeathsig ends only the job shells)
				require.Contains(t, record, strconv.Itoa(p.pid)+" sleep 1000", "the watchdog's record lacks the %s process", role)
			}
			require.Contains(t, record, "(1 after SIGKILL)", "only the SIGTERM ignorer needed SIGKILL")
		})
	}
}

func TestSweepAfterHostCrashKillsTheSurvivorsAndRecordsThem(t *testing.T) {
	require.NoError(t, becomeSubreaper())
	a, _ := startHost(t, "jobs")
	t.Cleanup(a.killLeft)
	a.checkEscapes(t)
	// The watchdog dies with the host (a kill of both): only the sweep is left.
	require.NoError(t, syscall.Kill(a.watchdog, syscall.SIGKILL))
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGKILL))
	require.Error(t, a.cmd.Wait())
	// Pdeathsig ends each job's shell; the three escaped children survive.
	deadline := time.Now().Add(helperBudget)
	for left := a.live(); len(left) != len(hostJobs); left = a.live() {
		require.True(t, time.Now().Before(deadline), "the job shells did not die with the host: %v", left)
		for _, p := range left { // the exit event of each process that is not an escaped child
			escaped := false
			for _, r := range a.procs {
				escaped = escaped || (r.pid == p.pid && r.start == p.start)
			}
			if !escaped {
				awaitExit(p.pid, p.start, deadline)
			}
		}
	}

	b, lines := startHost(t, "sweep")
	require.NotEqual(t, a.instance, b.instance)
	var rec SweepRecord
	for _, line := range lines {
		if js, ok := strings.CutPrefix(line, "SWEEP "); ok {
			require.NoError(t, json.Unmarshal([]byte(js), &rec))
		}
	}
	t.Logf("the new host's startup sweep: %s", rec)
	require.Positive(t, rec.Scanned)
	found := map[int]Survivor{}
	for _, s := range rec.Found {
		found[s.PID] = s
	}
	for _, role := range []string{roleIgnoresTerm, roleSetsid} {
		p := a.procs[role]
		s, ok := found[p.pid]
		require.True(t, ok, "the sweep did not find the %s survivor %d: %+v", role, p.pid, rec)
		require.Equal(t, a.instance, s.Instance)
		require.Equal(t, a.cmd.Process.Pid, s.HostPID)
		require.NotEmpty(t, s.Job)
		require.Equal(t, "sleep 1000", s.Command)
		require.True(t, s.Gone, "%s survivor %d not gone after the sweep's SIGKILL", role, p.pid)
		require.True(t, gone(p.pid) || zombieOfMine(p.pid), "%s survivor %d still running", role, p.pid)
	}
	// The documented limit: an escapee with a cleared environment whose job shell
	// died is found by nothing once its host and watchdog are gone.
	cleared := a.procs[roleClearedEnv]
	require.NotContains(t, found, cleared.pid, "the sweep claimed an unmarked process")
	require.Len(t, rec.Found, 2, "%+v", rec)
	require.Len(t, a.live(), 1)
	require.Equal(t, cleared.pid, a.live()[0].pid)
	a.killLeft()
	require.Empty(t, a.awaitNoneLive(time.Now().Add(helperBudget)))
	reapAdopted(t, a.born, a.watchdog, b.watchdog)
}

func zombieOfMine(pid int) bool {
	info, ok := readStat(pid)
	return ok && info.state == 'Z' && info.ppid == os.Getpid()
}
