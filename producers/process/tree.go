package process

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// markerVar is the environment variable that marks a job's processes.
const markerVar = "TROUPE_JOB"

var subreaper struct {
	once sync.Once
	err  error
}

// becomeSubreaper makes this process the reaper of orphaned descendants, once.
func becomeSubreaper() error {
	subreaper.once.Do(func() {
		subreaper.err = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	})
	return subreaper.err
}

// procInfo is what /proc/<pid>/stat says about a process.
type procInfo struct {
	pid, ppid, pgrp int
	state           byte
	start           uint64 // start time in clock ticks since boot: with pid, an identity
}

func readStat(pid int) (procInfo, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	// pid (comm) state ppid pgrp ...; comm may contain spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return procInfo{}, false
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 20 {
		return procInfo{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	pgrp, _ := strconv.Atoi(f[2])
	start, _ := strconv.ParseUint(f[19], 10, 64)
	return procInfo{pid: pid, ppid: ppid, pgrp: pgrp, state: f[0][0], start: start}, true
}

func hasMarker(pid int, marker []byte) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	for len(b) > 0 {
		i := bytes.IndexByte(b, 0)
		var kv []byte
		if i < 0 {
			kv, b = b, nil
		} else {
			kv, b = b[:i], b[i+1:]
		}
		if bytes.Equal(kv, marker) {
			return true
		}
	}
	return false
}

// tree tracks the processes of one job: its process group and every process seen
// carrying its marker.
type tree struct {
	pgid     int
	job      string         // the job's token, as the watchdog's reports name it
	onReport func(pid int)  // Config.reportHook
	marker   []byte         // "TROUPE_JOB=<instance>/<token>"
	seen     map[int]uint64 // pid → start time, of processes seen in the group or carrying the marker
	full     bool           // scan all of /proc (no subreaper: orphans are not our children)
}

func newTree(token string) *tree {
	return &tree{job: token, marker: []byte(markerVar + "=" + Instance() + "/" + token), seen: map[int]uint64{}}
}

// scan records every process that is the job's (in its group, carrying its marker,
// or seen so before with the same start time — an exiting process's environment
// is no longer readable) and returns the live ones (zombies count as dead). A pid
// and its start time identify a process, so a reused pid is never taken for the job's.
//
// It walks descendants, not all of /proc (reading a /proc/<pid>/stat costs tens of
// microseconds here): from the processes already seen and from this process's own
// children — where escaped orphans land, this process being their subreaper. Without
// the subreaper (t.full) orphans go to init, so the whole of /proc is read instead.
func (t *tree) scan() []procInfo {
	self := os.Getpid()
	var queue []int
	if t.full {
		queue = allPIDs()
	} else {
		for pid := range t.seen {
			queue = append(queue, pid)
		}
		queue = append(queue, children(self)...)
	}
	// A child of one of the job's processes is the job's, whatever its environment
	// shows at this instant (it may be mid-exec, when environ reads empty): only this
	// process's own children (adopted orphans) need the marker to be claimed.
	descendant := map[int]bool{}
	visited := map[int]bool{self: true}
	var live []procInfo
	for len(queue) > 0 {
		pid := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		if visited[pid] {
			continue
		}
		visited[pid] = true
		info, ok := readStat(pid)
		if !ok {
			continue
		}
		known, wasSeen := t.seen[pid]
		_, parentSeen := t.seen[info.ppid]
		mine := (wasSeen && known == info.start) || descendant[pid] || (t.full && parentSeen && info.ppid != self) ||
			(t.pgid > 0 && info.pgrp == t.pgid) || hasMarker(pid, t.marker)
		if !mine {
			continue
		}
		if !wasSeen || known != info.start {
			t.report(pid, info.start)
		}
		t.seen[pid] = info.start
		if info.state == 'Z' || info.state == 'X' {
			continue
		}
		live = append(live, info)
		if !t.full {
			for _, c := range children(pid) {
				descendant[c] = true
				queue = append(queue, c)
			}
		}
	}
	return live
}

// children lists the children of every thread of pid.
func children(pid int) []int {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	d, err := os.Open(dir)
	if err != nil {
		return nil
	}
	tids, _ := d.Readdirnames(-1)
	d.Close()
	var out []int
	for _, tid := range tids {
		b, err := os.ReadFile(dir + "/" + tid + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

func allPIDs() []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	out := make([]int, 0, len(names))
	for _, n := range names {
		if pid, err := strconv.Atoi(n); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// track records the job's main process (its group's leader) and tells the watchdog.
func (t *tree) track(pid int) {
	t.pgid = pid
	reportJob(t.job, pid)
	if info, ok := readStat(pid); ok {
		t.seen[pid] = info.start
		t.report(pid, info.start)
	}
}

func (t *tree) report(pid int, start uint64) {
	reportProc(t.job, pid, start)
	if t.onReport != nil {
		t.onReport(pid)
	}
}

// signal sends sig to the group and to every live process of the job. It scans
// before signalling the group too: a member the signal kills orphans its children,
// and an orphan caught mid-exec (its environment unreadable) could then be claimed
// by nothing — while its parent lives it is claimed by descent.
func (t *tree) signal(sig syscall.Signal) {
	sent := map[int]bool{}
	for _, p := range t.scan() {
		sent[p.pid] = true
		_ = syscall.Kill(p.pid, sig)
	}
	if t.pgid > 0 {
		_ = syscall.Kill(-t.pgid, sig)
	}
	for _, p := range t.scan() {
		if !sent[p.pid] {
			_ = syscall.Kill(p.pid, sig)
		}
	}
}

// reap reaps every seen process that is now a zombie child of this process
// (adopted as subreaper), except skip (the main process, which os/exec waits for).
// A zombie's pid cannot be reused and only its parent can reap it, so this never
// touches a process that is not the job's.
func (t *tree) reap(skip int) {
	self := os.Getpid()
	for pid, start := range t.seen {
		if pid == skip {
			continue
		}
		info, ok := readStat(pid)
		if !ok || info.start != start {
			delete(t.seen, pid)
			continue
		}
		if info.ppid != self || info.state != 'Z' {
			continue
		}
		var ws syscall.WaitStatus
		for {
			if _, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); err != syscall.EINTR {
				break
			}
		}
		delete(t.seen, pid)
	}
}
