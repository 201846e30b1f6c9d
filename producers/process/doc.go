// Package process has troupe's real producers: shell jobs (kind "bash") and
// interactive programs under a pseudo-terminal (kind "pty-send").
//
// Every job's process runs in its own process group and carries a private marker
// in its environment (TROUPE_JOB=<token>), which its descendants inherit. Killing
// a job is verified: SIGTERM to the group and to every process carrying the marker
// (so children that escaped the group with setsid or by daemonising are found too),
// a grace period (default 2 s), then SIGKILL; the job settles only after none of
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
// Limits: a descendant that clears its environment and leaves the process group is
// not found; one that escapes and exits before the next scan (every ScanInterval)
// stays a zombie of this process until it exits, since it was never seen; reading
// another user's /proc/<pid>/environ is not allowed, so only same-user descendants
// are found (which, without privileges, are the only ones a job can have anyway).
package process
