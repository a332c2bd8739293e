package main

import (
	"errors"
	"net"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc/internal/pidfd"
)

// peerPID is the PID of the process that connected c (SO_PEERCRED),
// recorded by the kernel at connect: the peer cannot choose it. The PID
// outlives that process, though: once it has exited, another process may
// hold it, so whatever is read of /proc/PID is checked against gone
// afterwards. gone reports whether the process that connected has exited
// (then /proc/PID may have described another), and releases what it
// holds; it must be called once. It uses a pidfd of the peer
// (SO_PEERPIDFD, Linux 6.5), which names that process and no later one;
// where the kernel has none it reports false (the PID alone is all there
// is).
func peerPID(c *net.UnixConn) (pid int, gone func() bool, err error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, nil, err
	}
	var credErr error
	pfd := -1
	if err := raw.Control(func(fd uintptr) {
		cred, err := syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
		if err != nil {
			credErr = err
			return
		}
		pid = int(cred.Pid)
		switch n, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PEERPIDFD); {
		case err == nil:
			pfd = n
		case errors.Is(err, unix.ENOPROTOOPT):
			// Before Linux 6.5: no pidfd.
		default:
			// ESRCH or EINVAL: the peer exited (and was reaped)
			// before this call; any process at its PID is another.
			pfd = -2
		}
	}); err != nil {
		return 0, nil, err
	}
	if credErr != nil {
		return 0, nil, credErr
	}
	return pid, func() bool {
		if pfd < 0 {
			return pfd == -2
		}
		defer pidfd.Close(pfd)
		// A pidfd polls readable once its process has exited.
		return pidfd.Exited(pfd)
	}, nil
}
