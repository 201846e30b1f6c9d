// Package process has troupe's real producers: shell jobs (kind "bash") and
// interactive programs under a pseudo-terminal (kind "pty-send").
//
// Every job's process runs in its own process group and carries a marker in its
// environment, TROUPE_JOB=<instance>/<token>, which its descendants inherit: the
// instance names this host process (see Instance), the token the job. Killing a job
// is verified: SIGTERM to the group and to every process carrying the marker (so
// children that escaped the group with setsid or by daemonising are found too), a
// grace period (default 2 s), then SIGKILL; the job settles only after none of
// them is alive and every one that is this process's child has been reaped. When
// the job's main process exits on its own, whatever it left running is stopped the
// same way: a job owns its work, and nothing outlives it.
//
// Reaping escaped processes needs this process to be their parent: the package
// makes it a child subreaper (PR_SET_CHILD_SUBREAPER) the first time a job starts,
// unless Config.NoSubreaper is set. That is process-wide: orphans of any child of
// this process are then reparented here instead of to init. troupe reaps only the
// processes it found carrying a job's marker; an embedder that spawns its own
// daemons should set NoSubreaper (escapees are then still killed, and reaped by init).
//
// # Host death
//
// Jobs do not outlive their host, however it ends — Shutdown, SIGKILL, a panic, a
// SIGTERM it does not handle, os.Exit. Three mechanisms, from the first job start:
//
//  1. The watchdog. The first job (unless it sets Config.NoWatchdog) starts one
//     watchdog process: this program's own executable (/proc/self/exe) run again
//     as "troupe-watchdog" with TROUPE_WATCHDOG set; this package's init function
//     recognises it and runs the watchdog instead of the program, so the embedder's
//     main needs no hook (the init functions of packages initialised before this
//     one run in it too; the main package's do not). It holds the read end of a
//     pipe whose write end only the host holds, and the host reports to it every
//     process its jobs' scans find. When the host ends, the kernel closes the pipe;
//     the watchdog waits for the host to be gone (a host that is still alive keeps
//     its jobs), then SIGTERMs every process carrying the host's instance marker,
//     every process the host reported (same pid and start time), every member of a
//     live job's process group and every descendant of those, and SIGKILLs what is
//     left after HostDeathGrace (1 s); it says what it stopped on the host's
//     stderr. It runs in its own process group and ignores SIGINT, SIGTERM, SIGHUP
//     and SIGQUIT, so a terminal's ^C or hangup does not end it before the host.
//     Watchdog reports its pid, or why it could not start.
//  2. Pdeathsig. Each job's main process gets SIGKILL from the kernel when the
//     host dies, even if the watchdog is gone too.
//  3. The startup sweep. The first job started in a process runs Sweep once
//     (StartupSweep returns its record, and a record that found survivors is
//     logged with slog.Default): every process carrying a marker whose instance is
//     in this pid namespace, of this executable, and whose host (pid and start
//     time) no longer runs, and every descendant of one, is SIGKILLed and listed.
//     An embedder may call Sweep itself at startup.
//
// Limits, honestly: a process that clears its environment and leaves the group
// is found only while its host lives — by the host's scans (every 100 ms, as a
// descendant of the job) and then by the watchdog from the host's reports; one
// that does so between two scans, or outlives both host and watchdog, is found by
// nothing. The watchdog is a process like any other: killed together with the
// host (kill -9 of both, the OOM killer choosing it), it stops nothing, and the
// survivors wait for the next host's sweep — which runs only when a job starts
// (or Sweep is called), from the same executable path (SweepOptions.AnyProgram
// widens it). Only the job's main process has Pdeathsig, and the kernel ties it to
// the OS thread that started the process: Go ends a thread only when a goroutine
// locked to it (runtime.LockOSThread) returns, so a job started from such a
// goroutine (troupe starts jobs on its job actors, which lock none) would be
// SIGKILLed then. Another user's processes (a setuid program a job
// ran) have an unreadable environment and are not found. A marker from another pid
// namespace is never judged. A host that replaced itself with exec keeps its pid
// and start time, so its jobs count as its own still. PID reuse is harmless: a
// process is identified by pid and start time, and a group id is not reused while
// the group has a member. Only a cgroup (systemd's KillMode=control-group, or a
// delegated cgroup v2 subtree) contains a job completely; troupe does not need one.
//
// Limits of the verified kill: a descendant that clears its environment and leaves
// the process group is not found by the marker; one that escapes and exits before
// the next scan (every ScanInterval) stays a zombie of this process until it
// exits, since it was never seen; reading another user's /proc/<pid>/environ is
// not allowed, so only same-user descendants are found (which, without
// privileges, are the only ones a job can have anyway).
package process
