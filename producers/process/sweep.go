package process

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// sweepConfirm bounds a sweep's wait for the processes it SIGKILLed to be gone.
const sweepConfirm = time.Second

// SweepRecord is what a sweep found: processes left running by troupe hosts that
// died without stopping their jobs (and whose watchdog could not stop them), and
// what became of each.
type SweepRecord struct {
	At      time.Time  // when the sweep ran
	Scanned int        // processes read from /proc
	Found   []Survivor // the dead hosts' processes, each sent SIGKILL
}

// Survivor is one process of a dead host's job.
type Survivor struct {
	PID      int
	Instance string // the dead host's instance (see Instance)
	HostPID  int    // the dead host's pid
	Job      string // the job's marker token; "" for an unmarked descendant of a survivor
	Command  string // its command line, bounded to 200 bytes, valid UTF-8
	Gone     bool   // it was seen gone (or a zombie) after the SIGKILL
}

// String is the record in one line, for a log.
func (r SweepRecord) String() string {
	if len(r.Found) == 0 {
		return fmt.Sprintf("troupe sweep: %d processes scanned, none left by a dead host", r.Scanned)
	}
	hosts := map[string]bool{}
	items := make([]string, 0, len(r.Found))
	for _, s := range r.Found {
		hosts[s.Instance] = true
		state := "killed"
		if !s.Gone {
			state = "still running"
		}
		items = append(items, fmt.Sprintf("%d %s (host %d, %s)", s.PID, s.Command, s.HostPID, state))
	}
	return fmt.Sprintf("troupe sweep: %d processes scanned, %d left by %d dead hosts: %s",
		r.Scanned, len(r.Found), len(hosts), summarise(items))
}

// SweepOptions widen a sweep.
type SweepOptions struct {
	// AnyProgram sweeps the dead hosts of every program built on troupe, not only
	// of this executable.
	AnyProgram bool
}

// Sweep finds the processes of dead troupe hosts — same user, same pid namespace,
// by default the same executable — kills them with SIGKILL and returns what it
// found. A host is dead when the process its instance names (pid and start time)
// no longer runs; the processes of live hosts, this one's included, are never
// touched. A survivor that is this process's zombie child is reaped.
//
// The first job started in a process runs a sweep once (see StartupSweep); an
// embedder may call Sweep itself at startup, before any job, to log the record.
func Sweep(opts SweepOptions) SweepRecord {
	me := self()
	snap := snapshot(me.pid)
	rec := SweepRecord{At: time.Now(), Scanned: len(snap)}
	found := claimSweep(snap, me, opts)
	for i := range found {
		found[i].Command = commandOf(found[i].PID)
	}
	for _, s := range found {
		_ = syscall.Kill(s.PID, syscall.SIGKILL)
	}
	deadline := time.Now().Add(sweepConfirm)
	for i := range found {
		s := &found[i]
		if awaitExit(s.PID, s.start, deadline) {
			s.Gone = true
			if info, ok := readStat(s.PID); ok && info.start == s.start && info.state == 'Z' && info.ppid == me.pid {
				reapChild(s.PID, deadline)
			}
		}
		rec.Found = append(rec.Found, s.Survivor)
	}
	return rec
}

// survivor is a Survivor with the start time that identifies its process.
type survivor struct {
	Survivor
	start uint64
}

// claimSweep picks, from snap, the live processes of dead hosts: those carrying a
// marker whose instance is in me's pid namespace (and of me's program, unless
// AnyProgram), is not me, and whose host is not in snap alive with the same start
// time; and their live descendants. A pure core over the snapshot.
func claimSweep(snap []procEntry, me instanceID, opts SweepOptions) []survivor {
	byPID := map[int]procEntry{}
	for _, p := range snap {
		byPID[p.pid] = p
	}
	hostAlive := func(h instanceID) bool {
		if h.pid == me.pid {
			return h.start == me.start
		}
		p, ok := byPID[h.pid]
		return ok && p.start == h.start && p.alive()
	}
	type mark struct {
		host instanceID
		job  string
	}
	marks := map[int]mark{}
	claimed := map[int]bool{}
	for _, p := range snap {
		if !p.alive() || p.pid <= 1 {
			continue
		}
		for _, v := range p.markers {
			h, job, ok := parseMarker(v)
			if !ok || h.ns != me.ns || h == me || (!opts.AnyProgram && h.program != me.program) || hostAlive(h) {
				continue
			}
			marks[p.pid] = mark{h, job}
			claimed[p.pid] = true
			break
		}
	}
	descendants(snap, claimed)
	// An unmarked descendant is attributed to its nearest marked ancestor.
	attribute := func(p procEntry) mark {
		for seen := 0; seen < len(snap); seen++ {
			if m, ok := marks[p.pid]; ok {
				return m
			}
			parent, ok := byPID[p.ppid]
			if !ok {
				break
			}
			p = parent
		}
		return mark{}
	}
	var out []survivor
	for _, p := range snap {
		if !claimed[p.pid] || p.pid == me.pid {
			continue
		}
		m, own := marks[p.pid]
		if !own {
			m = attribute(p)
			m.job = ""
		}
		out = append(out, survivor{start: p.start, Survivor: Survivor{
			PID: p.pid, Instance: m.host.String(), HostPID: m.host.pid, Job: m.job,
		}})
	}
	return out
}

// startup is the once-per-process preparation the first job start does.
var startup struct {
	once   sync.Once
	record atomic.Pointer[SweepRecord] // the startup sweep's record, once it ran
}

// StartupSweep returns the record of the sweep that the first job started in this
// process ran, and false if none has run yet. A record that found survivors was
// also logged (slog.Default, at Warn).
func StartupSweep() (SweepRecord, bool) {
	if r := startup.record.Load(); r != nil {
		return *r, true
	}
	return SweepRecord{}, false
}

// prepareHost runs, once per process, the startup sweep.
func prepareHost() {
	startup.once.Do(func() {
		rec := Sweep(SweepOptions{})
		startup.record.Store(&rec)
		if len(rec.Found) > 0 {
			slog.Warn(rec.String())
		}
	})
}
