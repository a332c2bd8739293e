package agentproc

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// outputPipe returns the pipe the child writes its output to. Only the read
// end, ours, is non-blocking and in the runtime poller (for its deadline);
// the child's end is made blocking from the start. os.Pipe makes both
// pollable, and os/exec then has to take the child's end out of
// non-blocking mode again and the poller has to drop it on Close: six
// system calls of every Start that nothing needs.
func outputPipe() (r, w *os.File, err error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, xerrors.Errorf("pipe2: %w", err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		_ = unix.Close(fds[0])
		_ = unix.Close(fds[1])
		return nil, nil, xerrors.Errorf("pipe: set non-blocking: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "|0"), os.NewFile(uintptr(fds[1]), "|1"), nil
}

// inputPipe returns the pipe the child reads its stdin from.
func inputPipe() (r, w *os.File, err error) { return os.Pipe() }

// childStdin returns the /dev/null a child without Stdin reads from: one
// descriptor, opened once and kept, which every such child inherits as its
// fd 0 (reading /dev/null has no state to share). os/exec would open and
// close it on every Start. nil when it cannot be opened: os/exec then
// opens its own and reports why.
var childStdin = sync.OnceValue(func() *os.File {
	f, err := os.Open(os.DevNull)
	if err != nil {
		return nil
	}
	return f
})

// pipeSize is the kernel buffer asked for the output pipe. The default
// 64 KiB makes a fast writer and our reader take turns every 64 KiB; 1 MiB
// (the unprivileged maximum by default) lets each side run longer.
const pipeSize = 1 << 20

// growPipe enlarges the output pipe's kernel buffer. Failure only costs
// throughput, so it is ignored.
func growPipe(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, pipeSize)
	})
}
