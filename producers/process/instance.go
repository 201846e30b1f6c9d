package process

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// The instance is this host process, as its jobs' markers name it:
// "<program>-<pidns>-<pid>-<start>". program is a hash of the executable's path (a
// sweep handles the dead hosts of its own program unless asked otherwise); pidns
// is the pid namespace's inode (a marker from another namespace is never judged,
// its pids mean other processes); pid and start (clock ticks since boot) identify
// the host process whatever pid reuse happens, so anyone reading a marker can tell
// whether its host still lives. A job's marker is TROUPE_JOB=<instance>/<job token>.

// instanceID is a parsed instance name.
type instanceID struct {
	program string
	ns      uint64
	pid     int
	start   uint64
}

func (i instanceID) String() string {
	return fmt.Sprintf("%s-%d-%d-%d", i.program, i.ns, i.pid, i.start)
}

// parseInstance parses "<program>-<pidns>-<pid>-<start>".
func parseInstance(s string) (instanceID, bool) {
	f := strings.Split(s, "-")
	if len(f) != 4 || f[0] == "" {
		return instanceID{}, false
	}
	ns, err1 := strconv.ParseUint(f[1], 10, 64)
	pid, err2 := strconv.Atoi(f[2])
	start, err3 := strconv.ParseUint(f[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || pid <= 0 {
		return instanceID{}, false
	}
	return instanceID{program: f[0], ns: ns, pid: pid, start: start}, true
}

// parseMarker splits a TROUPE_JOB value into its instance and job token.
func parseMarker(v string) (instanceID, string, bool) {
	inst, job, ok := strings.Cut(v, "/")
	if !ok || job == "" {
		return instanceID{}, "", false
	}
	id, ok := parseInstance(inst)
	return id, job, ok
}

// self is this process's instance, computed once.
var self = sync.OnceValue(func() instanceID {
	id := instanceID{program: programHash(), ns: pidNamespace("self"), pid: os.Getpid()}
	if info, ok := readStat(id.pid); ok {
		id.start = info.start
	}
	return id
})

// Instance returns the name of this host process as its jobs' markers carry it
// (TROUPE_JOB=<instance>/<job token>): the instance a watchdog or a later sweep
// stops the jobs of once this process has died.
func Instance() string { return self().String() }

// programHash names the executable: the first 8 bytes of the SHA-256 of its path.
func programHash() string {
	exe, err := os.Executable()
	if err != nil {
		exe = "unknown"
	}
	exe = strings.TrimSuffix(exe, " (deleted)")
	sum := sha256.Sum256([]byte(exe))
	return hex.EncodeToString(sum[:8])
}

// pidNamespace is the inode of /proc/<pid>/ns/pid ("pid:[4026531836]"), 0 if unreadable.
func pidNamespace(pid string) uint64 {
	link, err := os.Readlink("/proc/" + pid + "/ns/pid")
	if err != nil {
		return 0
	}
	link = strings.TrimSuffix(strings.TrimPrefix(link, "pid:["), "]")
	n, _ := strconv.ParseUint(link, 10, 64)
	return n
}

// procEntry is one process of a /proc snapshot: its stat and the TROUPE_JOB values
// in its environment (more than one if a program put several there).
type procEntry struct {
	procInfo
	markers []string
}

func (p procEntry) alive() bool { return p.state != 'Z' && p.state != 'X' }

// snapshot reads every process of /proc but skip. Environments that cannot be read
// (another user's, or a process exiting) read as none.
func snapshot(skip int) []procEntry {
	pids := allPIDs()
	out := make([]procEntry, 0, len(pids))
	for _, pid := range pids {
		if pid == skip {
			continue
		}
		info, ok := readStat(pid)
		if !ok {
			continue
		}
		out = append(out, procEntry{procInfo: info, markers: readMarkers(pid)})
	}
	return out
}

// readMarkers returns the TROUPE_JOB values in pid's environment.
func readMarkers(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return nil
	}
	prefix := []byte(markerVar + "=")
	var out []string
	for len(b) > 0 {
		kv := b
		if i := bytes.IndexByte(b, 0); i >= 0 {
			kv, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if v, ok := bytes.CutPrefix(kv, prefix); ok {
			out = append(out, string(v))
		}
	}
	return out
}

// descendants extends claimed (pid → true) with every live process below one of
// them, by the parent links of snap.
func descendants(snap []procEntry, claimed map[int]bool) {
	kids := map[int][]int{}
	for _, p := range snap {
		if p.alive() {
			kids[p.ppid] = append(kids[p.ppid], p.pid)
		}
	}
	var queue []int
	for pid := range claimed {
		queue = append(queue, pid)
	}
	for len(queue) > 0 {
		pid := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for _, c := range kids[pid] {
			if !claimed[c] {
				claimed[c] = true
				queue = append(queue, c)
			}
		}
	}
}

// commandOf is pid's command line, bounded and valid UTF-8, for records.
func commandOf(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		return ""
	}
	b = bytes.TrimRight(b, "\x00")
	b = bytes.ReplaceAll(b, []byte{0}, []byte{' '})
	const max = 200
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8Start(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
