//go:build linux && !arm64 && !riscv64 && !loong64

package agentproc

import "golang.org/x/sys/unix"

// sysEpollWait is epoll_wait, which the architectures that came to Linux
// after epoll_pwait (arm64, riscv64, loong64) do not have; see readingStdin.
const sysEpollWait = unix.SYS_EPOLL_WAIT
