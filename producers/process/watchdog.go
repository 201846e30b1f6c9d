package process

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The watchdog is this program's own executable (/proc/self/exe) re-executed with
// argv[0] watchdogArg0 and watchdogEnv set to the host's instance: this package's
// init sees both and runs the watchdog instead of the program, so an embedder's
// binary needs no hook in its main. It reads the host's reports from a pipe (fd 3)
// whose only write end the host holds; the kernel closes it however the host ends
// (SIGKILL, a panic, an unhandled SIGTERM, os.Exit), and then the watchdog stops
// every process of the host's jobs and exits.
const (
	watchdogEnv  = "TROUPE_WATCHDOG"
	watchdogArg0 = "troupe-watchdog"
	// HostDeathGrace is how long the watchdog lets a dead host's job processes
	// handle SIGTERM before it SIGKILLs them (together within 3 s of the death).
	HostDeathGrace = time.Second
	// watchdogBound bounds the watchdog's kill rounds (processes in uninterruptible sleep).
	watchdogBound = 10 * time.Second
	// hostExitWait bounds the wait, after the pipe closed, for the host to be gone:
	// its descriptors close before it becomes a zombie.
	hostExitWait = 2 * time.Second
	// watchRound paces the watchdog's scan-and-signal rounds.
	watchRound = 20 * time.Millisecond
	// reportWait bounds a report's write to the pipe (a stopped watchdog).
	reportWait = time.Second
)

func init() {
	inst, ok := os.LookupEnv(watchdogEnv)
	if !ok {
		return
	}
	os.Unsetenv(watchdogEnv) // never passed on, whatever this process is
	if len(os.Args) != 1 || os.Args[0] != watchdogArg0 {
		return
	}
	host, ok := parseInstance(inst)
	if !ok {
		return
	}
	os.Exit(runWatchdog(host, os.NewFile(3, "host"), os.Stderr))
}

// ErrNoWatchdog is Watchdog's error before any job started one in this process
// (or when every job started so far set Config.NoWatchdog).
var ErrNoWatchdog = errors.New("no watchdog started: no job has started in this process yet, or every job set NoWatchdog")

// watchdog is this process's watchdog, started by the first job that wants one.
var watchdog struct {
	mu   sync.Mutex                // serialises starts: conn is replaced only under it
	conn atomic.Pointer[watchConn] // the current watchdog (nil: none yet)
	err  error                     // why the last start failed (under mu)
}

// watchConn is the host's end of one watchdog.
type watchConn struct {
	w    *os.File // the pipe's write end
	pid  int
	dead atomic.Bool // a write found the read end closed: the watchdog is gone
}

// Watchdog returns the pid of this process's watchdog, or why none is running.
func Watchdog() (int, error) {
	watchdog.mu.Lock()
	defer watchdog.mu.Unlock()
	if c := watchdog.conn.Load(); c != nil && !c.dead.Load() {
		return c.pid, nil
	}
	if watchdog.err != nil {
		return 0, watchdog.err
	}
	return 0, ErrNoWatchdog
}

// ensureWatchdog starts the watchdog if none is running (a watchdog found dead is
// reaped and replaced; it knew the jobs only by their marker then).
func ensureWatchdog() error {
	watchdog.mu.Lock()
	defer watchdog.mu.Unlock()
	old := watchdog.conn.Load()
	if old != nil && !old.dead.Load() {
		if info, ok := readStat(old.pid); ok && info.state != 'Z' && info.state != 'X' {
			return nil
		}
		old.dead.Store(true) // killed: replace it now, not after a report fails
	}
	if old != nil {
		old.w.Close()
		reapChild(old.pid, time.Now().Add(reportWait))
	}
	c, err := startWatchdog()
	watchdog.err = err
	if err != nil {
		watchdog.conn.Store(nil)
		return err
	}
	watchdog.conn.Store(c)
	return nil
}

func startWatchdog() (*watchConn, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("watchdog: %w", err)
	}
	defer r.Close()
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("watchdog: %w", err)
	}
	defer null.Close()
	env := make([]string, 0, len(os.Environ())+1)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, watchdogEnv+"=") {
			env = append(env, kv)
		}
	}
	env = append(env, watchdogEnv+"="+Instance())
	p, err := os.StartProcess("/proc/self/exe", []string{watchdogArg0}, &os.ProcAttr{
		Dir:   "/",
		Env:   env,
		Files: []*os.File{null, null, os.Stderr, r},
		// Its own group: a terminal's ^C to the host's group does not reach it.
		Sys: &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("watchdog: %w", err)
	}
	pid := p.Pid
	_ = p.Release() // reaped by pid (ensureWatchdog), or by whoever adopts it after the host
	return &watchConn{w: w, pid: pid}, nil
}

// reapChild reaps pid, a child of this process that has died or is dying, waiting
// until deadline at most: a multi-threaded process's leader reads as a zombie
// before its last thread has exited, and cannot be reaped until then.
func reapChild(pid int, deadline time.Time) {
	for awaitExit(pid, 0, deadline) {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		switch {
		case err == syscall.EINTR:
		case got == pid || err != nil: // reaped, or not (or no longer) our child
			return
		case time.Now().After(deadline):
			return
		}
	}
}

// report tells the watchdog one fact about a job (a no-op without a watchdog).
// Lines are far below PIPE_BUF, so concurrent reports never interleave.
func report(line string) {
	c := watchdog.conn.Load()
	if c == nil || c.dead.Load() {
		return
	}
	_ = c.w.SetWriteDeadline(time.Now().Add(reportWait))
	if _, err := c.w.WriteString(line); errors.Is(err, syscall.EPIPE) {
		c.dead.Store(true)
	}
}

// Reports: "J <job> <pgid>" a job started with its own group; "P <job> <pid>
// <start>" a process of the job seen; "E <job>" the job's processes are all gone.
func reportJob(job string, pgid int) { report("J " + job + " " + strconv.Itoa(pgid) + "\n") }
func reportProc(job string, pid int, start uint64) {
	report("P " + job + " " + strconv.Itoa(pid) + " " + strconv.FormatUint(start, 10) + "\n")
}
func reportEnd(job string) { report("E " + job + "\n") }

// watchState is what the watchdog knows of its host's jobs: a pure core, fed the
// host's reports and asked which processes of a snapshot are the host's.
type watchState struct {
	host instanceID
	jobs map[string]*watchedJob
}

type watchedJob struct {
	pgid  int
	procs map[int]uint64 // pid → start time
}

func newWatchState(host instanceID) *watchState {
	return &watchState{host: host, jobs: map[string]*watchedJob{}}
}

// apply takes one report line; a malformed one is ignored.
func (w *watchState) apply(line string) {
	f := strings.Fields(line)
	if len(f) < 2 {
		return
	}
	job := w.jobs[f[1]]
	switch {
	case f[0] == "J" && len(f) == 3:
		pgid, err := strconv.Atoi(f[2])
		if err != nil || pgid <= 1 {
			return
		}
		if job == nil {
			job = &watchedJob{procs: map[int]uint64{}}
			w.jobs[f[1]] = job
		}
		job.pgid = pgid
	case f[0] == "P" && len(f) == 4:
		pid, err1 := strconv.Atoi(f[2])
		start, err2 := strconv.ParseUint(f[3], 10, 64)
		if err1 != nil || err2 != nil || pid <= 1 {
			return
		}
		if job == nil {
			job = &watchedJob{procs: map[int]uint64{}}
			w.jobs[f[1]] = job
		}
		job.procs[pid] = start
	case f[0] == "E" && len(f) == 2:
		delete(w.jobs, f[1])
	}
}

// claim returns the live processes of snap that belong to the host's jobs: those
// carrying a marker of the host's instance, those the host reported (same pid and
// start time: a reused pid is never taken), the members of a live job's process
// group (a group id is not reused while the group has a member), and every live
// descendant of one of them.
func (w *watchState) claim(snap []procEntry) []procEntry {
	prefix := w.host.String() + "/"
	groups := map[int]bool{}
	known := map[int]uint64{}
	for _, j := range w.jobs {
		if j.pgid > 1 {
			groups[j.pgid] = true
		}
		for pid, start := range j.procs {
			known[pid] = start
		}
	}
	claimed := map[int]bool{}
	for _, p := range snap {
		if !p.alive() || p.pid <= 1 || p.pid == w.host.pid {
			continue
		}
		start, reported := known[p.pid]
		if (reported && start == p.start) || groups[p.pgrp] || markedWith(p, prefix) {
			claimed[p.pid] = true
		}
	}
	descendants(snap, claimed)
	var out []procEntry
	for _, p := range snap {
		if claimed[p.pid] {
			out = append(out, p)
		}
	}
	return out
}

func markedWith(p procEntry, prefix string) bool {
	for _, m := range p.markers {
		if strings.HasPrefix(m, prefix) {
			return true
		}
	}
	return false
}

// runWatchdog is the watchdog process: it reads the host's reports until the pipe
// closes, waits for the host to be gone (a host that closed the pipe and lives on
// keeps its jobs), then stops every process of the host's jobs: SIGTERM, and
// SIGKILL after HostDeathGrace; it says on stderr what it stopped.
func runWatchdog(host instanceID, pipe io.Reader, stderr io.Writer) int {
	// A terminal's hangup or ^C, or a SIGTERM meant for the host's group, must not
	// end the watchdog before the host: it exits when the host has.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	name := []byte(watchdogArg0 + "\x00")
	_ = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0, 0, 0)
	return watch(host, pipe, stderr)
}

// watch is the watchdog's work, once its process is set up.
func watch(host instanceID, pipe io.Reader, stderr io.Writer) int {
	w := newWatchState(host)
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		w.apply(sc.Text())
	}
	if !awaitExit(host.pid, host.start, time.Now().Add(hostExitWait)) {
		return 0
	}
	stopped, stubborn := w.stopAll(os.Getpid())
	if len(stopped) > 0 {
		fmt.Fprintf(stderr, "troupe watchdog: host %d ended without stopping its jobs; stopped %d of their processes (%d after SIGKILL): %s\n",
			host.pid, len(stopped), stubborn, summarise(stopped))
	}
	return 0
}

// stopAll signals the host's processes in rounds until none is left (or
// watchdogBound passes): SIGTERM once to each, SIGKILL to all after the grace. It
// returns what it signalled and how many got SIGKILL.
func (w *watchState) stopAll(skip int) (stopped []string, killed int) {
	type key struct {
		pid   int
		start uint64
	}
	termed := map[key]bool{}
	sigkilled := map[key]bool{}
	began := time.Now()
	for time.Since(began) < watchdogBound {
		live := w.claim(snapshot(skip))
		if len(live) == 0 {
			break
		}
		kill := time.Since(began) >= HostDeathGrace
		for _, p := range live {
			k := key{p.pid, p.start}
			if !termed[k] {
				termed[k] = true
				stopped = append(stopped, strconv.Itoa(p.pid)+" "+commandOf(p.pid))
				if !kill {
					_ = syscall.Kill(p.pid, syscall.SIGTERM)
					continue
				}
			}
			if kill {
				if !sigkilled[k] {
					sigkilled[k] = true
					killed++
				}
				_ = syscall.Kill(p.pid, syscall.SIGKILL)
			}
		}
		time.Sleep(watchRound)
	}
	return stopped, killed
}

// summarise joins records, bounded to about 1 KiB.
func summarise(items []string) string {
	var b strings.Builder
	for i, s := range items {
		if b.Len() > 1024 {
			fmt.Fprintf(&b, "; and %d more", len(items)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(s)
	}
	return b.String()
}
