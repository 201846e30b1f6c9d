package process

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// awaitExit waits until the process pid that started at tick start (its /proc
// stat start time, which tells it from a later process given the same pid) has
// exited — it is a zombie or gone — or until deadline, and reports whether it
// has. It is an exit event, not a poll: a pidfd (pidfd_open(2), Linux 5.3)
// pins the process, is checked to be the one meant, and becomes readable when
// its whole thread group has exited, which is when a zombie leader can be
// reaped. Only where the kernel has no pidfd (ENOSYS) does it fall back to
// reading /proc every pollInterval.
func awaitExit(pid int, start uint64, deadline time.Time) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	switch {
	case errors.Is(err, unix.ESRCH):
		return true
	case err != nil:
		return pollExit(pid, start, deadline)
	}
	defer unix.Close(fd)
	// The pidfd now refers to whatever process has pid: the one meant if it is
	// still there, which only its start time tells. Its state is not looked at: a
	// multi-threaded leader reads as a zombie before its last thread has exited;
	// the pidfd is readable only once that one has.
	if info, ok := readStat(pid); !ok || (start != 0 && info.start != start) {
		return true
	}
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		// Rounded up: a wait of less than a millisecond is not a busy loop. A
		// deadline already past still looks once.
		left := max(time.Until(deadline), 0)
		n, err := unix.Poll(fds, int((left+time.Millisecond-1)/time.Millisecond))
		switch {
		case errors.Is(err, unix.EINTR):
		case err != nil:
			return pollExit(pid, start, deadline)
		case n > 0:
			return true
		case left == 0:
			return false
		}
	}
}

// exited reports whether the process pid that started at tick start is a
// zombie or gone (start 0 matches any process with that pid).
func exited(pid int, start uint64) bool {
	info, ok := readStat(pid)
	return !ok || (start != 0 && info.start != start) || info.state == 'Z' || info.state == 'X'
}

// pollExit is awaitExit without a pidfd: /proc read every pollInterval.
func pollExit(pid int, start uint64, deadline time.Time) bool {
	for !exited(pid, start) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pollInterval)
	}
	return true
}
