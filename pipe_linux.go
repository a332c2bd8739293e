package agentproc

import (
	"os"

	"golang.org/x/sys/unix"
)

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
