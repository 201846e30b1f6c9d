package process

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
)

// entry builds a snapshot entry: pid, parent, group, start, state, markers.
func entry(pid, ppid, pgrp int, start uint64, state byte, markers ...string) procEntry {
	return procEntry{procInfo: procInfo{pid: pid, ppid: ppid, pgrp: pgrp, start: start, state: state}, markers: markers}
}

func pidsOf(ps []procEntry) []int {
	var out []int
	for _, p := range ps {
		out = append(out, p.pid)
	}
	slices.Sort(out)
	return out
}

func TestMarkerRoundTrip(t *testing.T) {
	id := instanceID{program: "0123456789abcdef", ns: 4026531836, pid: 4242, start: 987654}
	got, job, ok := parseMarker(id.String() + "/f00d")
	require.True(t, ok)
	require.Equal(t, id, got)
	require.Equal(t, "f00d", job)
	for _, bad := range []string{"", "f00d", id.String(), id.String() + "/", "p-1-2/j", "p-x-2-3/j", "-1-2-3/j", "p-1-0-3/j", "p-1-2-3-4/j"} {
		_, _, ok := parseMarker(bad)
		require.False(t, ok, "%q parsed", bad)
	}
	me := self()
	require.Equal(t, Instance(), me.String())
	info, ok := readStat(me.pid)
	require.True(t, ok)
	require.Equal(t, info.start, me.start, "the instance names this process by its start time")
	require.NotZero(t, me.ns)
}

func TestWatchdogClaimsTheHostsProcessesOnly(t *testing.T) {
	host := instanceID{program: "aa", ns: 7, pid: 50, start: 500}
	other := instanceID{program: "aa", ns: 7, pid: 60, start: 600}
	w := newWatchState(host)
	for _, line := range []string{"J j1 100", "P j1 100 1000", "P j1 3 30", "P j1 4 40", "garbage", "P j1 x 1", "J j2 200", "P j2 200 2000"} {
		w.apply(line)
	}
	snap := []procEntry{
		entry(50, 1, 50, 500, 'S'),                                // the host itself: never
		entry(100, 1, 100, 1000, 'S', host.String()+"/j1"),        // the job's shell, marked
		entry(101, 100, 100, 1010, 'S'),                           // in the job's group (and below the shell)
		entry(3, 1, 3, 30, 'S'),                                   // reported, escaped, environment cleared
		entry(4, 1, 4, 41, 'S'),                                   // a reported pid, now another process
		entry(5, 3, 5, 50, 'S'),                                   // a child of a reported escapee
		entry(6, 1, 6, 60, 'S', host.String()+"/j9"),              // marked by the host, never reported
		entry(7, 1, 7, 70, 'S', other.String()+"/j1"),             // another host's job
		entry(8, 1, 8, 80, 'Z', host.String()+"/j1"),              // a zombie: dead already
		entry(9, 1, 200, 90, 'S'),                                 // in j2's group
		entry(10, 1, 10, 95, 'S', "garbage", host.String()+"/j1"), // the host's marker beside another value
	}
	require.Equal(t, []int{3, 5, 6, 9, 10, 100, 101}, pidsOf(w.claim(snap)))
	// A job that ended is forgotten: its group id and reported pids may be reused.
	w.apply("E j2")
	w.apply("E j1")
	require.Equal(t, []int{6, 10, 100, 101}, pidsOf(w.claim(snap)), "only markers and their descendants are left")
}

func TestSweepClaimsTheProcessesOfDeadHostsOnly(t *testing.T) {
	me := instanceID{program: "aa", ns: 7, pid: 10, start: 100}
	dead := instanceID{program: "aa", ns: 7, pid: 20, start: 200}    // not in the snapshot
	reused := instanceID{program: "aa", ns: 7, pid: 30, start: 300}  // its pid runs another process
	alive := instanceID{program: "aa", ns: 7, pid: 40, start: 400}   // runs
	zombie := instanceID{program: "aa", ns: 7, pid: 50, start: 500}  // a zombie: dead
	foreign := instanceID{program: "aa", ns: 8, pid: 20, start: 200} // another pid namespace
	program := instanceID{program: "bb", ns: 7, pid: 21, start: 210} // another executable, dead
	snap := []procEntry{
		entry(10, 1, 10, 100, 'S'),
		entry(30, 1, 30, 301, 'S'),
		entry(40, 1, 40, 400, 'S'),
		entry(50, 1, 50, 500, 'Z'),
		entry(101, 1, 101, 1, 'S', dead.String()+"/j1"),
		entry(102, 101, 102, 2, 'S'), // unmarked child of a survivor
		entry(103, 102, 103, 3, 'S'), // and its child
		entry(104, 1, 104, 4, 'S', reused.String()+"/j2"),
		entry(105, 1, 105, 5, 'S', alive.String()+"/j3"),
		entry(106, 1, 106, 6, 'S', zombie.String()+"/j4"),
		entry(107, 1, 107, 7, 'S', foreign.String()+"/j5"),
		entry(108, 1, 108, 8, 'S', program.String()+"/j6"),
		entry(109, 1, 109, 9, 'S', me.String()+"/j7"),
		entry(110, 1, 110, 10, 'Z', dead.String()+"/j1"), // dead already
	}
	got := map[int]Survivor{}
	for _, s := range claimSweep(snap, me, SweepOptions{}) {
		got[s.PID] = s.Survivor
	}
	require.ElementsMatch(t, []int{101, 102, 103, 104, 106}, keys(got))
	require.Equal(t, Survivor{PID: 101, Instance: dead.String(), HostPID: 20, Job: "j1"}, got[101])
	require.Equal(t, Survivor{PID: 103, Instance: dead.String(), HostPID: 20}, got[103], "a descendant is its ancestor's, with no job")
	require.Equal(t, "j2", got[104].Job)
	wide := claimSweep(snap, me, SweepOptions{AnyProgram: true})
	require.Len(t, wide, 6, "AnyProgram adds the other executable's survivor")
}

func keys(m map[int]Survivor) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A watchdog whose pipe closes while its host still runs (the host closed it) stops
// nothing: it waits hostExitWait for the host to be gone, then exits.
func TestWatchdogOfALiveHostStopsNothing(t *testing.T) {
	sys := served(t)
	id, err := sys.Jobs().Start(context.Background(), Shell("echo ready; sleep 1000", Config{Grace: testGrace}))
	require.NoError(t, err)
	readUntil(t, sys, id, "ready")
	var stderr bytes.Buffer
	began := time.Now()
	require.Equal(t, 0, watch(self(), strings.NewReader("J x 1234\n"), &stderr))
	require.GreaterOrEqual(t, time.Since(began), hostExitWait)
	require.Empty(t, stderr.String())
	snap, err := sys.Jobs().Get(context.Background(), id, registry.NoCaller)
	require.NoError(t, err)
	require.Equal(t, job.Running, snap.Status, "the live host's job was stopped")
	_, _, err = sys.Jobs().Kill(context.Background(), id, registry.NoCaller, registry.KillOptions{})
	require.NoError(t, err)
	settle(t, sys, id)
}

func TestCommandOfIsBoundedValidUTF8(t *testing.T) {
	me := self()
	cmd := commandOf(me.pid)
	require.NotEmpty(t, cmd)
	require.LessOrEqual(t, len(cmd), 200+len("…"))
	require.True(t, strings.ToValidUTF8(cmd, "") == cmd)
}

// A watchdog that dies (killed) is reaped and replaced by the next job start; the
// job's processes are reported to the new one.
func TestWatchdogIsReplacedWhenItDies(t *testing.T) {
	sys := served(t)
	first, err := sys.Jobs().Start(context.Background(), Shell("true", Config{Grace: testGrace}))
	require.NoError(t, err)
	settle(t, sys, first)
	old, err := Watchdog()
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(old, syscall.SIGKILL))
	require.True(t, awaitExit(old, 0, time.Now().Add(settleBudget)), "the killed watchdog %d never exited", old)
	require.True(t, zombieOfMine(old), "the killed watchdog %d is not a zombie child of the host", old)
	reported := make(chan int, 16)
	id, err := sys.Jobs().Start(context.Background(), Shell("echo ready; sleep 1000", Config{Grace: testGrace, reportHook: func(pid int) { reported <- pid }}))
	require.NoError(t, err)
	now, err := Watchdog()
	require.NoError(t, err)
	require.NotEqual(t, old, now, "the dead watchdog was not replaced")
	require.True(t, gone(old), "the dead watchdog %d was not reaped", old)
	info, ok := readStat(now)
	require.True(t, ok)
	require.Equal(t, now, info.pgrp, "the watchdog runs in its own process group")
	require.Equal(t, watchdogArg0, strings.TrimSpace(commandOf(now)))
	readUntil(t, sys, id, "ready")
	select {
	case <-reported:
	case <-time.After(settleBudget):
		t.Fatal("the new job's process was never reported")
	}
	_, _, err = sys.Jobs().Kill(context.Background(), id, registry.NoCaller, registry.KillOptions{})
	require.NoError(t, err)
	settle(t, sys, id)
}

// BenchmarkStartupSweep is one Sweep of this machine's /proc that finds nothing to
// kill: what the first job start of a process pays. Baseline: BenchmarkTreeScan
// (one scan of a job's descendants, paid every ScanInterval per running job).
func BenchmarkStartupSweep(b *testing.B) {
	for b.Loop() {
		if rec := Sweep(SweepOptions{}); len(rec.Found) > 0 {
			b.Fatalf("the benchmark killed processes: %s", rec)
		}
	}
}
