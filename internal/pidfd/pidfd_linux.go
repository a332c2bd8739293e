package pidfd

import (
	"time"

	"golang.org/x/sys/unix"
)

// Open returns a pidfd for pid, or -1 when none can be had. Every error
// means "no pidfd" and nothing more: ENOSYS on kernels before 5.3, EPERM or
// anything else a seccomp profile chooses, ESRCH for a process that is
// gone. The caller then checks and signals by PID (see the package doc);
// reading an error as "exited" would let every process survive where
// pidfd_open is denied.
func Open(pid int) int {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return -1
	}
	return fd
}

// OpenChild returns a pidfd for pid, a child the caller has not waited for
// (so its PID cannot be reused meanwhile), or the error, for a caller that
// needs one and reports why there is none.
func OpenChild(pid int) (int, error) { return unix.PidfdOpen(pid, 0) }

// OpenThread returns a pidfd for tid, a thread of the calling process
// (PIDFD_THREAD, Linux 6.9): it polls readable once that thread has
// exited, whatever the rest of the process does. It signals nothing.
func OpenThread(tid int) (int, error) { return unix.PidfdOpen(tid, unix.PIDFD_THREAD) }

// Pin opens a pidfd for pid and then calls check, which must look at the
// process again: a PID reused before the pidfd was opened fails it. It
// returns the pidfd (-1 when none could be had) and whether check passed;
// when it did not, the pidfd is closed already.
func Pin(pid int, check func() bool) (fd int, ok bool) {
	fd = Open(pid)
	if !check() {
		Close(fd)
		return -1, false
	}
	return fd, true
}

// Signal sends sig to the process named by fd, a pidfd, or by pid when fd
// is -1. A pidfd keeps naming the same process after its PID is reused, so
// once the process was checked the signal cannot go astray; without one,
// the caller must have checked pid immediately before.
func Signal(pid, fd int, sig unix.Signal) error {
	if fd >= 0 {
		return unix.PidfdSendSignal(fd, sig, nil, 0)
	}
	return unix.Kill(pid, sig)
}

// Exited reports whether the process behind a pidfd has exited: a pidfd
// polls readable from then on. It is false for -1.
func Exited(fd int) bool {
	if fd < 0 {
		return false
	}
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(pfd, 0)
	return err == nil && n > 0
}

// Close closes fd unless it is -1.
func Close(fd int) {
	if fd >= 0 {
		_ = unix.Close(fd)
	}
}

// Wait blocks in poll until the process of every pidfd in fds has exited
// or deadline passes, and reports whether all had.
func Wait(fds []int, deadline time.Time) bool {
	pfds := make([]unix.PollFd, 0, len(fds))
	for _, fd := range fds {
		pfds = append(pfds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	}
	for len(pfds) > 0 {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		n, err := unix.Poll(pfds, int(left/time.Millisecond)+1)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			return false
		}
		waiting := pfds[:0]
		for _, p := range pfds {
			if p.Revents == 0 {
				waiting = append(waiting, p)
			}
		}
		pfds = waiting
	}
	return true
}
