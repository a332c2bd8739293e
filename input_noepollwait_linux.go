//go:build linux && (arm64 || riscv64 || loong64)

package agentproc

// This architecture has only epoll_pwait and epoll_pwait2; -1 matches no
// system call.
const sysEpollWait = -1
