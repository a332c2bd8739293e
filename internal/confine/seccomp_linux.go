package confine

import (
	"fmt"
	"runtime"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// The seccomp filter closes what Landlock and the namespaces leave open
// (docs/sandbox-threats.md lists each refusal, why, and its
// test):
//
//   - sockets: an allow-list of families, the same for socket and
//     socketpair. AF_UNIX always; AF_INET and AF_INET6 only where the
//     network mode needs them, and never MPTCP (which Landlock's TCP rules
//     do not see); AF_NETLINK only where the tree has a network of its
//     own or the host's. Every other family, present and future, fails
//     with EAFNOSUPPORT, as for a family the kernel does not know, so that
//     programs fall back as they would there.
//   - what reaches the network past Landlock's connect and bind hooks,
//     where a mode counts on them (NetworkPorts): listen(2), which binds an
//     unbound socket to a port without bind(2), TCP Fast Open (MSG_FASTOPEN
//     on sendto, sendmsg and sendmmsg sends a SYN without connect(2)), and
//     the TCP_FASTOPEN* socket options;
//   - io_uring, whose operations bypass the system call checks;
//   - what the default profiles of Docker and Flatpak refuse and an
//     unprivileged, no_new_privs tree has no use for: the kernel keyring,
//     the mount API, modules, kexec, userfaultfd, perf_event_open, bpf,
//     terminal input injection (TIOCSTI, TIOCLINUX), odd personalities.
//
// The program is installed on the throwaway thread only (no TSYNC flag),
// after no_new_privs, and the child inherits it. Other refusals fail with
// EPERM.

// SeccompArch is the audit architecture of this build, 0 where the filter
// is not written for it (the socketcall multiplexer of 386 and s390x would
// need argument checks of its own).
var SeccompArch = map[string]uint32{
	"amd64":   unix.AUDIT_ARCH_X86_64,
	"arm64":   unix.AUDIT_ARCH_AARCH64,
	"riscv64": unix.AUDIT_ARCH_RISCV64,
}[runtime.GOARCH]

// SeccompRules is what a network mode needs of the filter, as data: a new
// mode is a new value, not a new branch of the program. The zero value is
// the strictest: Unix sockets only.
type SeccompRules struct {
	// inet allows AF_INET and AF_INET6 sockets (never MPTCP).
	inet bool
	// tcpOnly narrows inet to SOCK_STREAM sockets of protocol 0 or
	// IPPROTO_TCP: what Landlock's TCP port rules see.
	tcpOnly bool
	// netlink allows AF_NETLINK sockets (ip, ss, getifaddrs). Without it
	// glibc's getaddrinfo still works: it assumes both IPv4 and IPv6 when
	// it cannot ask.
	netlink bool
	// noListen refuses listen(2), which on an unbound socket binds a port
	// without bind(2), where Landlock's bind rule sits.
	noListen bool
	// noFastOpen refuses MSG_FASTOPEN on sendto, sendmsg and sendmmsg (a
	// SYN to any address without connect(2), where Landlock's connect
	// rule sits) and the TCP_FASTOPEN* socket options.
	noFastOpen bool
}

// The rows of the network modes (sandboxBuilt.build picks one).
var (
	// SeccompNone: no network. Also as root inside the empty network
	// namespace, so that a tree behaves alike with root and without.
	SeccompNone = SeccompRules{}
	// SeccompPorts: TCP connections that Landlock's port rules check, and
	// nothing that gets past them.
	SeccompPorts = SeccompRules{inet: true, tcpOnly: true, noListen: true, noFastOpen: true}
	// SeccompOwnNet: a network namespace of the tree's own (root's
	// NetworkLoopback) or the host's network (NetworkHost).
	SeccompOwnNet = SeccompRules{inet: true, netlink: true}
)

// seccompRefusedCalls are refused with EPERM in every mode, with the
// architecture's own (seccompArchRefusedCalls). Most need a capability the
// tree has not got, in which case refusing them only narrows what of the
// kernel a tree reaches (a user namespace of its own would give it
// capabilities there); the rest are named.
var seccompRefusedCalls = []uint32{
	// The kernel keyring: a tree of the host's user reads the host's keys.
	unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
	// io_uring: its operations (connect, openat) bypass the checks here.
	unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
	// Kernel attack surface an unprivileged tree has no use for.
	unix.SYS_USERFAULTFD, unix.SYS_PERF_EVENT_OPEN, unix.SYS_BPF,
	// Another process's memory placement (Landlock checks it as ptrace;
	// Flatpak refuses it).
	unix.SYS_MOVE_PAGES, unix.SYS_MIGRATE_PAGES,
	// The mount table, old API and new, and the root: Landlock refuses
	// mount changes too; the new API fails here before reaching it.
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_CHROOT,
	unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT, unix.SYS_FSPICK,
	unix.SYS_MOVE_MOUNT, unix.SYS_OPEN_TREE, unix.SYS_OPEN_TREE_ATTR, unix.SYS_MOUNT_SETATTR,
	// Another process's namespaces.
	unix.SYS_SETNS,
	// A file by handle, past every path check (Docker's "shocker").
	unix.SYS_OPEN_BY_HANDLE_AT,
	// The machine: modules, kexec, reboot, swap, clocks, accounting,
	// quotas, the kernel log, host names, the terminal's hangup.
	unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
	unix.SYS_KEXEC_LOAD, unix.SYS_REBOOT,
	unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_ACCT,
	unix.SYS_SETTIMEOFDAY, unix.SYS_CLOCK_SETTIME, unix.SYS_CLOCK_ADJTIME,
	unix.SYS_QUOTACTL, unix.SYS_QUOTACTL_FD, unix.SYS_SYSLOG,
	unix.SYS_SETHOSTNAME, unix.SYS_SETDOMAINNAME, unix.SYS_VHANGUP,
	unix.SYS_LOOKUP_DCOOKIE, unix.SYS_NFSSERVCTL,
}

// seccompModeCall is a system call that takes a file mode: argument mode
// holds it, and flags, if not -1, holds open flags without which the mode
// is not used.
type seccompModeCall struct {
	nr, mode uint32
	flags    int
}

// block names the filter's block for calls that keep their mode and flags
// in the same arguments.
func (c seccompModeCall) block() string {
	return fmt.Sprintf("mode%d/%d", c.mode, c.flags)
}

// seccompModeCalls take a mode on every architecture the filter is written
// for (seccompArchModeCalls adds the architecture's own).
var seccompModeCalls = []seccompModeCall{
	{unix.SYS_FCHMOD, 1, -1}, {unix.SYS_FCHMODAT, 2, -1}, {unix.SYS_FCHMODAT2, 2, -1},
	{unix.SYS_MKNODAT, 2, -1}, {unix.SYS_OPENAT, 3, 2},
}

// seccompModeBlocks are the blocks seccompModeCalls and
// seccompArchModeCalls use, each once, in the order they are emitted.
var seccompModeBlocks = []seccompModeCall{{mode: 1, flags: -1}, {mode: 2, flags: -1}, {mode: 3, flags: 2}, {mode: 2, flags: 1}}

// seccompPersonalities are the personality(2) values a tree may set:
// Linux, 32-bit Linux, each with UNAME26, and the query (0xffffffff).
// Others (READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE, the other operating
// systems' ABIs) are refused, as Docker does: gdb then warns that it
// cannot disable address randomization, and goes on.
var seccompPersonalities = []uint32{0, 0x8, 0x20000, 0x20008, 0xffffffff}

const (
	bpfLdAbs  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJeq    = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJge    = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	bpfJset   = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	bpfJa     = unix.BPF_JMP | unix.BPF_JA
	bpfAnd    = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
	bpfRet    = unix.BPF_RET | unix.BPF_K
	secAllow  = unix.SECCOMP_RET_ALLOW
	secDeny   = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	secFamily = unix.SECCOMP_RET_ERRNO | uint32(unix.EAFNOSUPPORT)
	secNoSys  = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	offNR     = 0
	offArch   = 4
	offArgLow = 16 // args[i]'s low 32 bits on a little-endian machine: 16+8i
	x32Bit    = 0x40000000
)

// bpfAsm assembles a classic BPF program with forward jumps to labels.
type bpfAsm struct {
	prog   []unix.SockFilter
	labels map[string]int
	fixes  []bpfFix
}

// bpfFix is a jump whose target is a label: jt when true, else jf, or
// k (an unconditional jump).
type bpfFix struct {
	at     int
	field  byte // 't', 'f' or 'k'
	target string
}

// op appends an instruction without jumps.
func (a *bpfAsm) op(code uint16, k uint32) {
	a.prog = append(a.prog, unix.SockFilter{Code: code, K: k})
}

// jump appends a conditional jump to label jt when it holds, else to jf;
// "" is the next instruction.
func (a *bpfAsm) jump(code uint16, k uint32, jt, jf string) {
	at := len(a.prog)
	a.op(code, k)
	for _, f := range []bpfFix{{at, 't', jt}, {at, 'f', jf}} {
		if f.target != "" {
			a.fixes = append(a.fixes, f)
		}
	}
}

// goTo appends an unconditional jump to label.
func (a *bpfAsm) goTo(label string) {
	a.fixes = append(a.fixes, bpfFix{len(a.prog), 'k', label})
	a.op(bpfJa, 0)
}

// arg loads the low 32 bits of argument i: what the kernel reads of an
// int, an unsigned int or an ioctl request.
func (a *bpfAsm) arg(i uint32) { a.op(bpfLdAbs, offArgLow+8*i) }

// label names the next instruction.
func (a *bpfAsm) label(name string) {
	if a.labels == nil {
		a.labels = map[string]int{}
	}
	a.labels[name] = len(a.prog)
}

// done resolves the jumps. A backward or unknown target, or one beyond
// classic BPF's 255 instructions, is a mistake of this file, which
// TestSeccompFilter would meet first.
func (a *bpfAsm) done() []unix.SockFilter {
	for _, f := range a.fixes {
		to, ok := a.labels[f.target]
		off := to - f.at - 1
		if !ok || off < 0 || off > 255 {
			panic(fmt.Sprintf("seccomp filter: jump from %d to %q (%d, known %v)", f.at, f.target, to, ok))
		}
		switch f.field {
		case 't':
			a.prog[f.at].Jt = uint8(off)
		case 'f':
			a.prog[f.at].Jf = uint8(off)
		default:
			a.prog[f.at].K = uint32(off)
		}
	}
	return a.prog
}

// seccompCall is a system call the filter does not simply allow, and the
// label of what it does with it.
type seccompCall struct {
	nr    uint32
	block string
}

// SeccompFilter returns the filter program for rules.
//
// The system call number is looked up in a binary tree of the calls it
// does not simply allow, so that every call takes a dozen instructions at
// most. The length matters at each Start: the kernel runs the program once
// per system call number when it installs it (to cache the calls it
// always allows, which are all those that reach "allow" without reading
// an argument) and compiles it (docs/measurements.md).
func SeccompFilter(rules SeccompRules) []unix.SockFilter {
	calls := []seccompCall{
		{unix.SYS_SOCKET, "socket"}, {unix.SYS_SOCKETPAIR, "socket"},
		{unix.SYS_IOCTL, "ioctl"}, {unix.SYS_PERSONALITY, "personality"},
		{unix.SYS_PRLIMIT64, "prlimit"},
		{unix.SYS_FCNTL, "fcntl"},
	}
	for _, nr := range append(slices.Clone(seccompRefusedCalls), seccompArchRefusedCalls...) {
		calls = append(calls, seccompCall{nr, "deny"})
	}
	// The set-user-ID and set-group-ID bits: as root the tree is uid 0
	// without capabilities, and owns what it makes, so a program it marks
	// set-user-ID (cp /bin/sh s; chmod 4755 s, in the workspace or its
	// temp dir) would run as root for any local user who reaches it.
	modes := map[string]bool{}
	for _, c := range append(slices.Clone(seccompModeCalls), seccompArchModeCalls...) {
		calls = append(calls, seccompCall{c.nr, c.block()})
		modes[c.block()] = true
	}
	// openat2 takes its mode in a structure the filter cannot read:
	// ENOSYS, on which callers fall back to openat.
	calls = append(calls, seccompCall{unix.SYS_OPENAT2, "nosys"})
	if rules.noListen {
		calls = append(calls, seccompCall{unix.SYS_LISTEN, "deny"})
	}
	if rules.noFastOpen {
		calls = append(calls, seccompCall{unix.SYS_SENDTO, "sendto"}, seccompCall{unix.SYS_SENDMSG, "sendmsg"},
			seccompCall{unix.SYS_SENDMMSG, "sendmmsg"}, seccompCall{unix.SYS_SETSOCKOPT, "setsockopt"})
	}
	slices.SortFunc(calls, func(a, b seccompCall) int { return int(a.nr) - int(b.nr) })
	calls = slices.CompactFunc(calls, func(a, b seccompCall) bool { return a.nr == b.nr })

	var a bpfAsm
	// Another architecture's system call numbers mean other calls: refuse
	// them all (a 32-bit int 0x80 call on amd64).
	a.op(bpfLdAbs, offArch)
	a.jump(bpfJeq, SeccompArch, "", "deny")
	a.op(bpfLdAbs, offNR)
	if runtime.GOARCH == "amd64" {
		// The x32 ABI's numbers carry this bit.
		a.jump(bpfJge, x32Bit, "deny", "")
	}
	seccompTree(&a, calls, "t")

	// socket(domain, type, protocol) and socketpair(domain, type,
	// protocol, sv): the family allow-list.
	a.label("socket")
	a.arg(2)
	a.jump(bpfJeq, unix.IPPROTO_MPTCP, "deny", "")
	a.arg(0)
	a.jump(bpfJeq, unix.AF_UNIX, "allow", "")
	if rules.netlink {
		a.jump(bpfJeq, unix.AF_NETLINK, "allow", "")
	}
	if !rules.inet {
		a.goTo("family")
	} else {
		inet := "allow"
		if rules.tcpOnly {
			inet = "inet"
		}
		a.jump(bpfJeq, unix.AF_INET, inet, "")
		a.jump(bpfJeq, unix.AF_INET6, inet, "family")
		if rules.tcpOnly {
			a.label("inet")
			a.arg(1)
			a.op(bpfAnd, 0xf) // the type without SOCK_NONBLOCK, SOCK_CLOEXEC
			a.jump(bpfJeq, unix.SOCK_STREAM, "", "deny")
			a.arg(2)
			a.jump(bpfJeq, 0, "allow", "")
			a.jump(bpfJeq, unix.IPPROTO_TCP, "allow", "deny")
		}
	}

	// ioctl(fd, request): no input pushed into a terminal, no console
	// requests (the kernel compares the request's low 32 bits, as here).
	a.label("ioctl")
	a.arg(1)
	a.jump(bpfJeq, unix.TIOCSTI, "deny", "")
	a.jump(bpfJeq, unix.TIOCLINUX, "deny", "allow")

	seccompFcntl(&a)
	a.label("personality")
	a.arg(0)
	for i, p := range seccompPersonalities {
		no := ""
		if i == len(seccompPersonalities)-1 {
			no = "deny"
		}
		a.jump(bpfJeq, p, "allow", no)
	}

	if rules.noFastOpen {
		for _, c := range []struct {
			label string
			flags uint32 // the argument that holds the send flags
		}{{"sendto", 3}, {"sendmsg", 2}, {"sendmmsg", 3}} {
			a.label(c.label)
			a.arg(c.flags)
			a.jump(bpfJset, unix.MSG_FASTOPEN, "deny", "allow")
		}
		// setsockopt(fd, level, optname, ...)
		a.label("setsockopt")
		a.arg(1)
		a.jump(bpfJeq, unix.IPPROTO_TCP, "", "allow")
		a.arg(2)
		a.jump(bpfJeq, unix.TCP_FASTOPEN, "deny", "")
		a.jump(bpfJeq, unix.TCP_FASTOPEN_CONNECT, "deny", "")
		a.jump(bpfJeq, unix.TCP_FASTOPEN_KEY, "deny", "")
		a.jump(bpfJeq, unix.TCP_FASTOPEN_NO_COOKIE, "deny", "allow")
	}
	// Creating or changing a file with a mode argument: no set-user-ID or
	// set-group-ID bit. The open calls' mode counts only with O_CREAT or
	// O_TMPFILE (without, the register holds whatever the caller left).
	for _, c := range seccompModeBlocks {
		if !modes[c.block()] {
			continue
		}
		a.label(c.block())
		if c.flags >= 0 {
			a.arg(uint32(c.flags))
			a.jump(bpfJset, unix.O_CREAT|(unix.O_TMPFILE&^unix.O_DIRECTORY), "", "allow")
		}
		a.arg(c.mode)
		a.jump(bpfJset, unix.S_ISUID|unix.S_ISGID, "deny", "allow")
	}
	// prlimit64(pid, resource, new, old): another process's limits only
	// read. Setting them needs no capability for a process of the same
	// user, and Landlock has no hook there: a tree lowered the host's
	// RLIMIT_CPU below the time it had used, and the kernel killed it.
	a.label("prlimit")
	a.arg(0)
	a.jump(bpfJeq, 0, "allow", "")
	a.arg(2)
	a.jump(bpfJeq, 0, "", "deny")
	a.op(bpfLdAbs, offArgLow+8*2+4) // the pointer's high half
	a.jump(bpfJeq, 0, "allow", "deny")
	// The verdicts last: classic BPF jumps forward only.
	a.label("allow")
	a.op(bpfRet, secAllow)
	a.label("deny")
	a.op(bpfRet, secDeny)
	a.label("family")
	a.op(bpfRet, secFamily)
	a.label("nosys")
	a.op(bpfRet, secNoSys)
	return a.done()
}

// seccompTree emits a binary search over calls (sorted by number, no
// number twice) that jumps to each call's block and to "allow" for any
// other number; the accumulator holds the number. name prefixes its
// labels.
//
// The search is over ranges, not numbers: the numbers from 0 up are cut
// into runs that go to one label (consecutive refused calls make one run,
// as do the allowed numbers between two of them), and each comparison
// (jge) halves the runs left. Every instruction but the first jumps
// straight to a block when one side is a single run, so the tree is about
// one instruction per run. On amd64 the whole program is 72 instructions
// instead of 96 for NetworkNone with a search over numbers (100 instead of
// 126 for NetworkPorts), which the kernel checks and compiles at each
// install, in time about linear in the length (docs/measurements.md).
func seccompTree(a *bpfAsm, calls []seccompCall, name string) {
	type run struct {
		from  uint32 // the run's first number; it ends where the next begins
		block string
	}
	runs := []run{{0, "allow"}}
	add := func(from uint32, block string) {
		if last := &runs[len(runs)-1]; last.from == from {
			last.block = block // replaces an empty allowed run
		} else if last.block == block {
			return // continues the run before
		} else {
			runs = append(runs, run{from, block})
		}
		if n := len(runs); n >= 2 && runs[n-2].block == runs[n-1].block {
			runs = runs[:n-1]
		}
	}
	for _, c := range calls {
		add(c.nr, c.block)
		add(c.nr+1, "allow")
	}
	var emit func(runs []run, name string)
	emit = func(runs []run, name string) {
		if len(runs) == 1 {
			a.goTo(runs[0].block)
			return
		}
		left, right := runs[:len(runs)/2], runs[len(runs)/2:]
		jt, jf := name+"r", ""
		if len(right) == 1 {
			jt = right[0].block
		}
		if len(left) == 1 {
			jf = left[0].block
		}
		a.jump(bpfJge, right[0].from, jt, jf)
		if len(left) > 1 {
			emit(left, name+"l")
		}
		if len(right) > 1 {
			a.label(name + "r")
			emit(right, name+"r")
		}
	}
	emit(runs, name)
}

// SeccompInstall installs prog on the calling thread only. no_new_privs
// must be set.
func SeccompInstall(prog []unix.SockFilter) error {
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		return xerrors.Errorf("seccomp: %w", errno)
	}
	return nil
}

// seccompFcntl emits the block of fcntl(fd, cmd, arg): no lease
// (F_SETLEASE). A lease on a file the tree owns (without root, every file
// of the user) makes every other process's open of it wait for the
// lease-break time, 45 s by default, again at each new lease: the agent's
// own reads and edits of the workspace, the user's editor, git (ninth
// attack review, TestAttackLeaseStallsOpen). Nothing a tree runs needs one.
func seccompFcntl(a *bpfAsm) {
	a.label("fcntl")
	a.arg(1)
	a.jump(bpfJeq, unix.F_SETLEASE, "deny", "allow")
}
