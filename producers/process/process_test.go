package process

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/producers/output"
	"github.com/troupe-rt/troupe/troupetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	settleBudget = 20 * time.Second
	testGrace    = 300 * time.Millisecond
	readPace     = 20 * time.Millisecond // a Wait that paces polling of a live job's output
)

// zombies returns this process's zombie children.
func zombies() []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	var out []int
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if info, ok := readStat(pid); ok && info.ppid == os.Getpid() && info.state == 'Z' {
			out = append(out, pid)
		}
	}
	return out
}

// gone reports whether pid no longer exists at all (not even as a zombie of ours).
func gone(pid int) bool {
	info, ok := readStat(pid)
	return !ok || (info.state == 'Z' && info.ppid != os.Getpid())
}

func served(t *testing.T) *troupe.System {
	sys, _ := troupetest.Served(t)
	t.Cleanup(func() {
		z := zombies()
		for _, pid := range z {
			comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
			t.Logf("zombie: %s", comm)
		}
		require.Empty(t, z, "zombie children left behind")
	})
	return sys
}

func settle(t *testing.T, sys *troupe.System, id string) *messages.JobSnapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), settleBudget)
	defer cancel()
	snap, err := sys.Jobs().AwaitSettled(ctx, id, registry.NoCaller)
	require.NoError(t, err)
	return snap
}

// readUntil reads the job's output until it contains want, pacing with short waits.
func readUntil(t *testing.T, sys *troupe.System, id, want string) string {
	t.Helper()
	return readWhile(t, sys, id, "output never contained "+strconv.Quote(want),
		func(all string) bool { return strings.Contains(all, want) })
}

// readLines reads the job's output until it holds n complete lines.
func readLines(t *testing.T, sys *troupe.System, id string, n int) string {
	t.Helper()
	return readWhile(t, sys, id, "output never held "+strconv.Itoa(n)+" lines",
		func(all string) bool { return strings.Count(all, "\n") >= n })
}

// readWhile reads the job's output, pacing with short waits on the job, until done
// holds for everything read so far.
func readWhile(t *testing.T, sys *troupe.System, id, failure string, done func(string) bool) string {
	t.Helper()
	var all strings.Builder
	deadline := time.Now().Add(settleBudget)
	for time.Now().Before(deadline) {
		text, _, err := sys.Jobs().Read(context.Background(), id, registry.NoCaller)
		require.NoError(t, err)
		all.WriteString(text)
		if done(all.String()) {
			return all.String()
		}
		_, err = sys.Jobs().Wait(context.Background(), id, readPace, registry.NoCaller)
		require.NoError(t, err)
	}
	t.Fatalf("%s; got %q", failure, all.String())
	return ""
}

func pids(t *testing.T, text string) []int {
	var out []int
	for _, f := range strings.Fields(text) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	require.NotEmpty(t, out, "no pids in %q", text)
	return out
}

func TestShellExitCodes(t *testing.T) {
	sys := served(t)
	cases := []struct {
		cmd    string
		status job.Status
		detail string
	}{
		{"exit 0", job.Completed, "exit code: 0"},
		{"exit 3", job.Completed, "exit code: 3"},
		{"echo hi; false", job.Completed, "exit code: 1"},
		{"no-such-command-troupe", job.Failed, "exit code: 127 (command not found)"},
		{"kill -SEGV $$", job.Killed, "signal: SIGSEGV"},
	}
	for _, c := range cases {
		id, err := sys.Jobs().Start(context.Background(), Shell(c.cmd, Config{}))
		require.NoError(t, err)
		snap := settle(t, sys, id)
		require.Equal(t, c.status, snap.Status, c.cmd)
		require.Equal(t, c.detail, snap.GetDetail(), c.cmd)
	}
}

func TestShellThatCannotStartFails(t *testing.T) {
	sys := served(t)
	id, err := sys.Jobs().Start(context.Background(), Shell("true", Config{Shell: "/no/such/shell"}))
	require.NoError(t, err)
	snap := settle(t, sys, id)
	require.Equal(t, job.Failed, snap.Status)
	require.Equal(t, "Error: fork/exec /no/such/shell: no such file or directory", snap.GetDetail())
}

func TestShellBadConfigIsRefused(t *testing.T) {
	sys := served(t)
	_, err := sys.Jobs().Start(context.Background(), Shell("true", Config{Grace: -time.Second}))
	require.ErrorIs(t, err, messages.ErrRunFailed)
	require.ErrorIs(t, err, messages.ErrInvalidConfig)
	list, err := sys.Jobs().List(context.Background(), registry.NoCaller)
	require.NoError(t, err)
	require.Empty(t, list)
}

func TestShellStreamsStdoutAndStderr(t *testing.T) {
	sys := served(t)
	id, err := sys.Jobs().Start(context.Background(), Shell("echo out; echo warn >&2; printf tail", Config{}))
	require.NoError(t, err)
	snap := settle(t, sys, id)
	require.Equal(t, "exit code: 0", snap.GetDetail())
	text, _, err := sys.Jobs().Read(context.Background(), id, registry.NoCaller)
	require.NoError(t, err)
	require.Equal(t, "out\ntail\n[stderr]\nwarn\n", text)
	text, _, err = sys.Jobs().Read(context.Background(), id, registry.NoCaller)
	require.NoError(t, err)
	require.Equal(t, "", text, "the cursor consumed the output")
}

func TestShellOutputBeyondRetentionIsBoundedWithMarker(t *testing.T) {
	sys := served(t)
	const retain = 4096
	id, err := sys.Jobs().Start(context.Background(), Shell("head -c 2000000 /dev/zero | tr '\\0' x; echo; echo end", Config{RetainBytes: retain}))
	require.NoError(t, err)
	settle(t, sys, id)
	text, _, err := sys.Jobs().Read(context.Background(), id, registry.NoCaller)
	require.NoError(t, err)
	require.LessOrEqual(t, len(text), retain+len(output.DroppedLine)+2)
	require.True(t, strings.HasSuffix(text, "end\n"+output.DroppedLine), "tail kept, marker last: %q", text[len(text)-80:])
}

func TestShellKillTakesTheWholeGroup(t *testing.T) {
	sys := served(t)
	id, err := sys.Jobs().Start(context.Background(), Shell("sleep 1000 & echo $!; sleep 1000 & echo $!; wait", Config{Grace: testGrace}))
	require.NoError(t, err)
	children := pids(t, readLines(t, sys, id, 2))
	require.Len(t, children, 2)
	res, _, err := sys.Jobs().Kill(context.Background(), id, registry.NoCaller, registry.KillOptions{})
	require.NoError(t, err)
	require.Equal(t, messages.KillResult_KILL_RESULT_REQUESTED, res)
	snap := settle(t, sys, id)
	require.Equal(t, job.Killed, snap.Status)
	require.Equal(t, "signal: SIGTERM", snap.GetDetail())
	for _, pid := range children {
		require.True(t, gone(pid), "pid %d of the group survived the kill", pid)
	}
}

func TestShellIgnoringSIGTERMGetsSIGKILLAfterGrace(t *testing.T) {
	sys := served(t)
	id, err := sys.Jobs().Start(context.Background(), Shell("trap '' TERM; echo ready; while :; do sleep 0.05; done", Config{Grace: testGrace}))
	require.NoError(t, err)
	readUntil(t, sys, id, "ready")
	start := time.Now()
	_, _, err = sys.Jobs().Kill(context.Background(), id, registry.NoCaller, registry.KillOptions{Reason: "no longer needed"})
	require.NoError(t, err)
	snap := settle(t, sys, id)
	require.GreaterOrEqual(t, time.Since(start), testGrace, "SIGKILL came before the grace period")
	require.Equal(t, job.Killed, snap.Status)
	require.Equal(t, "signal: SIGKILL; no longer needed", snap.GetDetail())
}

func TestShellEscapedSetsidChildIsKilledOnCancel(t *testing.T) {
	sys := served(t)
	id, err := sys.Jobs().Start(context.Background(), Shell("setsid sh -c 'echo $$; exec sleep 1000' & wait", Config{Grace: testGrace}))
	require.NoError(t, err)
	escaped := pids(t, readUntil(t, sys, id, "\n"))[0]
	info, ok := readStat(escaped)
	require.True(t, ok)
	require.NotEqual(t, info.pgrp, 0)
	_, _, err = sys.Jobs().Kill(context.Background(), id, registry.NoCaller, registry.KillOptions{})
	require.NoError(t, err)
	settle(t, sys, id)
	require.True(t, gone(escaped), "the setsid grandchild %d survived", escaped)
}

func TestShellLeftoversAreStoppedWhenMainExits(t *testing.T) {
	sys := served(t)
	id, err := sys.Jobs().Start(context.Background(), Shell("setsid sleep 1000 & sleep 1000 & echo $!; exit 0", Config{Grace: testGrace}))
	require.NoError(t, err)
	snap := settle(t, sys, id)
	require.Equal(t, job.Completed, snap.Status)
	require.Equal(t, "exit code: 0", snap.GetDetail())
	text, _, err := sys.Jobs().Read(context.Background(), id, registry.NoCaller)
	require.NoError(t, err)
	for _, pid := range pids(t, text) {
		require.True(t, gone(pid), "background child %d outlived its job", pid)
	}
}

func TestShellTimeoutSettlesKilledTimeout(t *testing.T) {
	sys := served(t)
	id, err := sys.Jobs().Start(context.Background(), Shell("sleep 1000", Config{Timeout: 100 * time.Millisecond, Grace: testGrace}))
	require.NoError(t, err)
	snap := settle(t, sys, id)
	require.Equal(t, job.Killed, snap.Status)
	require.Equal(t, "timeout", snap.GetDetail())
}

func TestShellReaderPanicSettlesFailed(t *testing.T) {
	sys := served(t)
	cfg := Config{Grace: testGrace, chunkHook: func(ch output.Channel, b []byte) {
		if strings.Contains(string(b), "boom") {
			panic("reader exploded")
		}
	}}
	id, err := sys.Jobs().Start(context.Background(), Shell("echo boom; sleep 1000", cfg))
	require.NoError(t, err)
	snap := settle(t, sys, id)
	require.Equal(t, job.Failed, snap.Status)
	require.Equal(t, "Error: output reader panicked: reader exploded", snap.GetDetail())
}

func TestPTYPromptIsAnswerable(t *testing.T) {
	sys := served(t)
	spec, term := PTY("printf 'overwrite? [y/N] '; read answer; echo \"answer=$answer\"", Config{Grace: testGrace})
	require.ErrorIs(t, term.Send("y\n"), ErrTerminalClosed)
	id, err := sys.Jobs().Start(context.Background(), spec)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(id, "pty-send-"))
	readUntil(t, sys, id, "[y/N]")
	require.NoError(t, term.Resize(40, 120))
	require.NoError(t, term.Send("y\n"))
	snap := settle(t, sys, id)
	require.Equal(t, job.Completed, snap.Status)
	require.Equal(t, "exit code: 0", snap.GetDetail())
	text, _, err := sys.Jobs().Read(context.Background(), id, registry.NoCaller)
	require.NoError(t, err)
	require.Contains(t, text, "answer=y")
	require.ErrorIs(t, term.Send("n\n"), ErrTerminalClosed)
}

func TestPTYKillStopsTheSession(t *testing.T) {
	sys := served(t)
	spec, _ := PTY("sleep 1000 & echo $!; wait", Config{Grace: testGrace})
	id, err := sys.Jobs().Start(context.Background(), spec)
	require.NoError(t, err)
	child := pids(t, readUntil(t, sys, id, "\n"))[0]
	_, _, err = sys.Jobs().Kill(context.Background(), id, registry.NoCaller, registry.KillOptions{})
	require.NoError(t, err)
	snap := settle(t, sys, id)
	require.Equal(t, job.Killed, snap.Status)
	require.True(t, gone(child))
}

func TestShellEscapedChildIsKilledWithoutSubreaperToo(t *testing.T) {
	sys := served(t)
	cfg := Config{Grace: testGrace, NoSubreaper: true}
	id, err := sys.Jobs().Start(context.Background(), Shell("setsid sh -c 'echo $$; exec sleep 1000' & wait", cfg))
	require.NoError(t, err)
	escaped := pids(t, readUntil(t, sys, id, "\n"))[0]
	_, _, err = sys.Jobs().Kill(context.Background(), id, registry.NoCaller, registry.KillOptions{})
	require.NoError(t, err)
	settle(t, sys, id)
	info, ok := readStat(escaped)
	require.True(t, !ok || info.state == 'Z', "the setsid grandchild %d is still running", escaped)
}
