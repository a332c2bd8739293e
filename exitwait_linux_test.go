package agentproc_test

import (
	"context"
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// waitExit blocks until pid has exited (a zombie counts as exited) or ctx
// ends, and reports whether it exited. It waits on a pidfd, which the
// kernel makes readable when the process exits: an event, not a poll of
// /proc. ok is false where pidfds are unavailable (kernels before 5.3,
// seccomp filters); the caller then polls instead.
func waitExit(ctx context.Context, pid int) (exited, ok bool) {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return true, true // reaped already
	}
	if err != nil {
		return false, false
	}
	defer unix.Close(fd)
	for {
		timeout := -1
		if deadline, has := ctx.Deadline(); has {
			timeout = int(time.Until(deadline).Milliseconds())
			if timeout <= 0 {
				return false, true
			}
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, timeout)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return false, false
		case n > 0:
			return true, true
		}
		// n == 0: the poll timed out; the loop checks the deadline.
	}
}
