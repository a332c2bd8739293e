package agentproc

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// The seccomp filter closes what Landlock leaves open: MPTCP sockets, which
// Landlock's TCP rules do not see (an open upstream issue), io_uring, whose
// operations bypass the system call checks, and, where no network
// namespace is available, every IPv4 and IPv6 socket (NetworkNone) or all
// but plain TCP ones (NetworkPorts, whose ports Landlock checks). It is
// installed on the throwaway thread only (no TSYNC flag), after
// no_new_privs, and the child inherits it.

// seccompArch is the audit architecture of this build, 0 where the filter
// is not written for it (the socketcall multiplexer of 386 and s390x would
// need argument checks of its own).
var seccompArch = map[string]uint32{
	"amd64":   unix.AUDIT_ARCH_X86_64,
	"arm64":   unix.AUDIT_ARCH_AARCH64,
	"riscv64": unix.AUDIT_ARCH_RISCV64,
}[runtime.GOARCH]

// seccompNet is what the filter does with inet sockets.
type seccompNet int

const (
	seccompNetAny        seccompNet = iota // only MPTCP refused
	seccompNetNone                         // every AF_INET/AF_INET6 socket refused
	seccompNetStreamOnly                   // AF_INET/AF_INET6 only SOCK_STREAM with TCP
)

const (
	bpfLdAbs  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJeq    = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJge    = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	bpfAnd    = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
	bpfRet    = unix.BPF_RET | unix.BPF_K
	secAllow  = unix.SECCOMP_RET_ALLOW
	secDeny   = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	offNR     = 0
	offArch   = 4
	offArgLow = 16 // args[i]'s low 32 bits on a little-endian machine: 16+8i
	x32Bit    = 0x40000000
)

// seccompFilter returns the filter program for net.
func seccompFilter(net seccompNet) []unix.SockFilter {
	ins := func(code uint16, jt, jf uint8, k uint32) unix.SockFilter {
		return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
	}
	denyIf := func(k uint32) []unix.SockFilter {
		return []unix.SockFilter{ins(bpfJeq, 0, 1, k), ins(bpfRet, 0, 0, secDeny)}
	}
	arg := func(i uint32) unix.SockFilter { return ins(bpfLdAbs, 0, 0, offArgLow+8*i) }
	// Every system call but socket and the io_uring ones takes the first
	// ALLOW after four tests: the kernel runs the program once per system
	// call number when it installs it (to cache the calls it always
	// allows), and compiles it, on every Start, so its length costs there
	// (docs/measurements.md).
	p := []unix.SockFilter{
		// Another architecture's system call numbers mean other calls:
		// refuse them all (a 32-bit int 0x80 call on amd64).
		ins(bpfLdAbs, 0, 0, offArch),
		ins(bpfJeq, 1, 0, seccompArch),
		ins(bpfRet, 0, 0, secDeny),
		ins(bpfLdAbs, 0, 0, offNR),
	}
	tail := []unix.SockFilter{
		ins(bpfJge, 1, 0, unix.SYS_IO_URING_SETUP),
		ins(bpfRet, 0, 0, secAllow),
		// io_uring_setup, io_uring_enter and io_uring_register are
		// consecutive.
		ins(bpfJge, 1, 0, unix.SYS_IO_URING_REGISTER+1),
		ins(bpfRet, 0, 0, secDeny),
	}
	if runtime.GOARCH == "amd64" {
		// The x32 ABI's numbers carry this bit.
		tail = append(tail, ins(bpfJge, 0, 1, x32Bit), ins(bpfRet, 0, 0, secDeny))
	}
	tail = append(tail, ins(bpfRet, 0, 0, secAllow))
	// socket jumps past the tail to its own checks.
	p = append(p, ins(bpfJeq, uint8(len(tail)), 0, unix.SYS_SOCKET))
	p = append(p, tail...)
	// socket(domain, type, protocol)
	p = append(p, arg(2))
	p = append(p, denyIf(unix.IPPROTO_MPTCP)...)
	switch net {
	case seccompNetNone:
		p = append(p, arg(0))
		p = append(p, denyIf(unix.AF_INET)...)
		p = append(p, denyIf(unix.AF_INET6)...)
	case seccompNetStreamOnly:
		p = append(p,
			arg(0),
			ins(bpfJeq, 1, 0, unix.AF_INET),
			ins(bpfJeq, 0, 8, unix.AF_INET6), // not inet: allowed
			arg(1),
			ins(bpfAnd, 0, 0, 0xf), // the type without SOCK_NONBLOCK, SOCK_CLOEXEC
			ins(bpfJeq, 1, 0, unix.SOCK_STREAM),
			ins(bpfRet, 0, 0, secDeny),
			arg(2),
			ins(bpfJeq, 2, 0, 0),
			ins(bpfJeq, 1, 0, unix.IPPROTO_TCP),
			ins(bpfRet, 0, 0, secDeny),
		)
	}
	return append(p, ins(bpfRet, 0, 0, secAllow))
}

// seccompInstall installs prog on the calling thread only. no_new_privs
// must be set.
func seccompInstall(prog []unix.SockFilter) error {
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		return xerrors.Errorf("seccomp: %w", errno)
	}
	return nil
}
