package confine

import (
	"encoding/binary"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// runFilter runs prog, a classic BPF seccomp program of the instructions
// SeccompFilter uses, on a system call and returns its verdict.
func runFilter(t *testing.T, prog []unix.SockFilter, arch, nr uint32, args [6]uint64) uint32 {
	t.Helper()
	// struct seccomp_data: nr, arch, instruction_pointer, args[6].
	var data [64]byte
	binary.LittleEndian.PutUint32(data[0:], nr)
	binary.LittleEndian.PutUint32(data[4:], arch)
	for i, a := range args {
		binary.LittleEndian.PutUint64(data[16+8*i:], a)
	}
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code {
		case bpfLdAbs:
			acc = binary.LittleEndian.Uint32(data[in.K:])
		case bpfAnd:
			acc &= in.K
		case bpfJa:
			pc += int(in.K)
		case bpfJeq, bpfJge, bpfJset:
			hit := acc == in.K
			switch in.Code {
			case bpfJge:
				hit = acc >= in.K
			case bpfJset:
				hit = acc&in.K != 0
			}
			if hit {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case bpfRet:
			return in.K
		default:
			t.Fatalf("instruction %d: code %#x not known to this test", pc, in.Code)
		}
	}
	t.Fatal("ran off the end of the program")
	return 0
}

// TestSeccompFilter checks the filter's verdicts for each network mode's
// row: every system call allowed but the refused ones, which are refused
// whatever their arguments, foreign-architecture and x32 calls refused,
// and the calls checked by argument as each row says.
func TestSeccompFilter(t *testing.T) {
	t.Parallel()
	if SeccompArch == 0 {
		t.Skip("no seccomp filter for this GOARCH")
	}
	refused := map[uint32]bool{}
	for _, nr := range append(slices.Clone(seccompRefusedCalls), seccompArchRefusedCalls...) {
		refused[nr] = true
	}
	for _, nr := range []uint32{unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY, unix.SYS_IO_URING_SETUP,
		unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER, unix.SYS_BPF, unix.SYS_USERFAULTFD, unix.SYS_PERF_EVENT_OPEN,
		unix.SYS_FSOPEN, unix.SYS_MOUNT, unix.SYS_SETNS, unix.SYS_OPEN_BY_HANDLE_AT} {
		if !refused[nr] {
			t.Errorf("system call %d: not among the refused calls, want it there", nr)
		}
	}
	byArgs := map[uint32]bool{unix.SYS_SOCKET: true, unix.SYS_SOCKETPAIR: true, unix.SYS_IOCTL: true, unix.SYS_PERSONALITY: true,
		unix.SYS_LISTEN: true, unix.SYS_SENDTO: true, unix.SYS_SENDMSG: true, unix.SYS_SENDMMSG: true, unix.SYS_SETSOCKOPT: true,
		unix.SYS_OPENAT2: true, unix.SYS_PRLIMIT64: true}
	byArgs[unix.SYS_FCNTL] = true // leases (ninth attack review)
	for _, c := range append(slices.Clone(seccompModeCalls), seccompArchModeCalls...) {
		byArgs[c.nr] = true
	}
	rows := []struct {
		name  string
		rules SeccompRules
	}{{"none", SeccompNone}, {"ports", SeccompPorts}, {"own", SeccompOwnNet}}
	a3 := func(x, y, z uint64) [6]uint64 { return [6]uint64{x, y, z} }
	for _, row := range rows {
		prog := SeccompFilter(row.rules)
		verdict := func(nr uint32, args [6]uint64) uint32 { return runFilter(t, prog, SeccompArch, nr, args) }
		t.Logf("%s: %d instructions", row.name, len(prog))
		for nr := uint32(0); nr < 600; nr++ {
			if byArgs[nr] {
				continue
			}
			want := uint32(secAllow)
			if refused[nr] {
				want = secDeny
			}
			// Arguments never matter: the same verdict with all ones.
			for _, args := range [][6]uint64{{}, {^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}} {
				if got := verdict(nr, args); got != want {
					t.Errorf("%s, system call %d: got %#x, want %#x", row.name, nr, got, want)
				}
			}
		}
		if got := runFilter(t, prog, SeccompArch^1, unix.SYS_READ, [6]uint64{}); got != secDeny {
			t.Errorf("%s, another architecture: got %#x, want refused", row.name, got)
		}
		if SeccompArch == unix.AUDIT_ARCH_X86_64 {
			if got := verdict(x32Bit|unix.SYS_READ, [6]uint64{}); got != secDeny {
				t.Errorf("%s, x32 read: got %#x, want refused", row.name, got)
			}
		}
		if got := verdict(unix.SYS_OPENAT2, [6]uint64{}); got != secNoSys {
			t.Errorf("%s, openat2: got %#x, want ENOSYS (its mode is out of the filter's reach)", row.name, got)
		}
		for _, c := range []struct {
			nr               uint32
			args             [6]uint64
			none, ports, own uint32 // the verdict under each row
		}{
			// No file lease; every other fcntl.
			{unix.SYS_FCNTL, a3(3, unix.F_SETLEASE, unix.F_WRLCK), secDeny, secDeny, secDeny},
			{unix.SYS_FCNTL, a3(3, unix.F_SETLEASE|1<<32, unix.F_RDLCK), secDeny, secDeny, secDeny}, // the kernel reads an unsigned int
			{unix.SYS_FCNTL, a3(3, unix.F_GETLEASE, 0), secAllow, secAllow, secAllow},
			{unix.SYS_FCNTL, a3(3, unix.F_SETFL, unix.O_NONBLOCK), secAllow, secAllow, secAllow},
			{unix.SYS_FCNTL, a3(3, unix.F_SETLK, 0), secAllow, secAllow, secAllow},
			// Limits: the caller's set, another process's read only.
			{unix.SYS_PRLIMIT64, [6]uint64{0, unix.RLIMIT_NOFILE, 0x7ffc00001000, 0}, secAllow, secAllow, secAllow},
			{unix.SYS_PRLIMIT64, [6]uint64{1234, unix.RLIMIT_NOFILE, 0, 0x7ffc00001000}, secAllow, secAllow, secAllow},
			{unix.SYS_PRLIMIT64, [6]uint64{1234, unix.RLIMIT_CPU, 0x7ffc00001000, 0}, secDeny, secDeny, secDeny},
			{unix.SYS_PRLIMIT64, [6]uint64{1234, unix.RLIMIT_CPU, 0x7ffc00000000, 0}, secDeny, secDeny, secDeny},
			// No set-user-ID or set-group-ID bit, made or changed.
			{unix.SYS_FCHMODAT, a3(3, 0, 0o4755), secDeny, secDeny, secDeny},
			{unix.SYS_FCHMODAT, a3(3, 0, 0o755), secAllow, secAllow, secAllow},
			{unix.SYS_FCHMODAT2, [6]uint64{3, 0, 0o2755, 0}, secDeny, secDeny, secDeny},
			{unix.SYS_FCHMOD, a3(3, 0o6755, 0), secDeny, secDeny, secDeny},
			{unix.SYS_FCHMOD, a3(3, 0o1777, 0), secAllow, secAllow, secAllow},
			{unix.SYS_MKNODAT, a3(3, 0, unix.S_IFREG|0o4755), secDeny, secDeny, secDeny},
			{unix.SYS_OPENAT, [6]uint64{3, 0, unix.O_CREAT | unix.O_WRONLY, 0o4755}, secDeny, secDeny, secDeny},
			{unix.SYS_OPENAT, [6]uint64{3, 0, unix.O_TMPFILE | unix.O_RDWR, 0o4755}, secDeny, secDeny, secDeny},
			{unix.SYS_OPENAT, [6]uint64{3, 0, unix.O_CREAT | unix.O_WRONLY, 0o644}, secAllow, secAllow, secAllow},
			{unix.SYS_OPENAT, [6]uint64{3, 0, unix.O_RDONLY, 0o4755}, secAllow, secAllow, secAllow}, // no mode without O_CREAT
			{unix.SYS_SOCKET, a3(unix.AF_UNIX, unix.SOCK_STREAM, 0), secAllow, secAllow, secAllow},
			{unix.SYS_SOCKET, a3(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0), secAllow, secAllow, secAllow},
			{unix.SYS_SOCKETPAIR, a3(unix.AF_UNIX, unix.SOCK_STREAM, 0), secAllow, secAllow, secAllow},
			{unix.SYS_SOCKET, a3(unix.AF_INET, unix.SOCK_STREAM, 0), secFamily, secAllow, secAllow},
			{unix.SYS_SOCKET, a3(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP), secFamily, secAllow, secAllow},
			{unix.SYS_SOCKET, a3(unix.AF_INET, unix.SOCK_DGRAM, 0), secFamily, secDeny, secAllow},
			{unix.SYS_SOCKET, a3(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP), secFamily, secDeny, secAllow},
			{unix.SYS_SOCKET, a3(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_SCTP), secFamily, secDeny, secAllow},
			{unix.SYS_SOCKET, a3(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_MPTCP), secDeny, secDeny, secDeny},
			{unix.SYS_SOCKET, a3(unix.AF_UNIX, unix.SOCK_STREAM, unix.IPPROTO_MPTCP), secDeny, secDeny, secDeny},
			{unix.SYS_SOCKET, a3(unix.AF_NETLINK, unix.SOCK_RAW, 0), secFamily, secFamily, secAllow},
			{unix.SYS_SOCKET, a3(unix.AF_PACKET, unix.SOCK_RAW, 0), secFamily, secFamily, secFamily},
			{unix.SYS_SOCKET, a3(unix.AF_VSOCK, unix.SOCK_STREAM, 0), secFamily, secFamily, secFamily},
			{unix.SYS_SOCKET, a3(unix.AF_SMC, unix.SOCK_STREAM, 0), secFamily, secFamily, secFamily},
			{unix.SYS_SOCKET, a3(unix.AF_UNIX|1<<32, unix.SOCK_STREAM, 0), secAllow, secAllow, secAllow}, // the kernel reads an int
			{unix.SYS_SOCKET, a3(unix.AF_MAX+7, unix.SOCK_STREAM, 0), secFamily, secFamily, secFamily},   // a family of the future
			{unix.SYS_SOCKETPAIR, a3(unix.AF_VSOCK, unix.SOCK_STREAM, 0), secFamily, secFamily, secFamily},
			{unix.SYS_SOCKETPAIR, a3(unix.AF_INET, unix.SOCK_STREAM, 0), secFamily, secAllow, secAllow},
			{unix.SYS_LISTEN, a3(3, 1, 0), secAllow, secDeny, secAllow},
			{unix.SYS_SENDTO, [6]uint64{3, 0, 1, unix.MSG_FASTOPEN}, secAllow, secDeny, secAllow},
			{unix.SYS_SENDTO, [6]uint64{3, 0, 1, unix.MSG_FASTOPEN | unix.MSG_DONTWAIT}, secAllow, secDeny, secAllow},
			{unix.SYS_SENDTO, [6]uint64{3, 0, 1, unix.MSG_DONTWAIT}, secAllow, secAllow, secAllow},
			{unix.SYS_SENDMSG, a3(3, 0, unix.MSG_FASTOPEN), secAllow, secDeny, secAllow},
			{unix.SYS_SENDMSG, a3(3, 0, unix.MSG_NOSIGNAL), secAllow, secAllow, secAllow},
			{unix.SYS_SENDMMSG, [6]uint64{3, 0, 1, unix.MSG_FASTOPEN}, secAllow, secDeny, secAllow},
			{unix.SYS_SENDMMSG, [6]uint64{3, 0, 1, 0}, secAllow, secAllow, secAllow},
			{unix.SYS_SETSOCKOPT, a3(3, unix.IPPROTO_TCP, unix.TCP_FASTOPEN_CONNECT), secAllow, secDeny, secAllow},
			{unix.SYS_SETSOCKOPT, a3(3, unix.IPPROTO_TCP, unix.TCP_FASTOPEN), secAllow, secDeny, secAllow},
			{unix.SYS_SETSOCKOPT, a3(3, unix.IPPROTO_TCP, unix.TCP_NODELAY), secAllow, secAllow, secAllow},
			{unix.SYS_SETSOCKOPT, a3(3, unix.SOL_SOCKET, unix.TCP_FASTOPEN_CONNECT), secAllow, secAllow, secAllow}, // 30 at SOL_SOCKET is another option
			{unix.SYS_IOCTL, a3(0, unix.TIOCSTI, 0), secDeny, secDeny, secDeny},
			{unix.SYS_IOCTL, a3(0, unix.TIOCSTI|1<<32, 0), secDeny, secDeny, secDeny}, // the kernel reads an unsigned int
			{unix.SYS_IOCTL, a3(0, unix.TIOCLINUX, 0), secDeny, secDeny, secDeny},
			{unix.SYS_IOCTL, a3(0, unix.TIOCGWINSZ, 0), secAllow, secAllow, secAllow},
			{unix.SYS_IOCTL, a3(0, unix.TIOCINQ, 0), secAllow, secAllow, secAllow},
			{unix.SYS_PERSONALITY, a3(0xffffffff, 0, 0), secAllow, secAllow, secAllow},
			{unix.SYS_PERSONALITY, a3(0x8, 0, 0), secAllow, secAllow, secAllow},
			{unix.SYS_PERSONALITY, a3(0, 0, 0), secAllow, secAllow, secAllow},
			{unix.SYS_PERSONALITY, a3(0x0400000, 0, 0), secDeny, secDeny, secDeny},
			{unix.SYS_PERSONALITY, a3(0x0040000, 0, 0), secDeny, secDeny, secDeny},
		} {
			want := map[string]uint32{"none": c.none, "ports": c.ports, "own": c.own}[row.name]
			if got := verdict(c.nr, c.args); got != want {
				t.Errorf("%s, system call %d%v: got %#x, want %#x", row.name, c.nr, c.args[:4], got, want)
			}
		}
	}
}

// TestSeccompTreeRuns checks that the search over call numbers costs one
// instruction per change of verdict, not per call: a run of consecutive
// refused calls is one range (the install cost grows with the program,
// docs/measurements.md).
func TestSeccompTreeRuns(t *testing.T) {
	t.Parallel()
	var calls []seccompCall
	for nr := uint32(10); nr < 30; nr++ {
		calls = append(calls, seccompCall{nr, "deny"})
	}
	calls = append(calls, seccompCall{41, "socket"}, seccompCall{42, "deny"}, seccompCall{100, "deny"})
	// Runs: 0 allow, 10 deny, 30 allow, 41 socket, 42 deny, 43 allow,
	// 100 deny, 101 allow.
	var a bpfAsm
	seccompTree(&a, calls, "t")
	tree := len(a.prog)
	a.label("allow")
	a.op(bpfRet, secAllow)
	a.label("deny")
	a.op(bpfRet, secDeny)
	a.label("socket")
	a.op(bpfRet, secFamily)
	prog := a.done()
	if want := 8 - 1; tree != want {
		t.Errorf("search: got %d instructions, want %d (one per run but the first)", tree, want)
	}
	for nr := uint32(0); nr < 200; nr++ {
		want := uint32(secAllow)
		switch {
		case nr >= 10 && nr < 30, nr == 42, nr == 100:
			want = secDeny
		case nr == 41:
			want = secFamily
		}
		// The program expects the number loaded: prepend the load.
		full := append([]unix.SockFilter{{Code: bpfLdAbs, K: offNR}}, prog...)
		if got := runFilter(t, full, SeccompArch, nr, [6]uint64{}); got != want {
			t.Errorf("call %d: got %#x, want %#x", nr, got, want)
		}
	}
}

// TestSeccompForkFilter checks the verdicts of the filter stacked at the
// fork: clone with CLONE_PARENT refused, without it allowed; clone3
// ENOSYS where the tree's own fork does not need it, else allowed; with
// NoNamespaces, unshare and clone with any CLONE_NEW* flag refused, and
// the host's own fork (CLONE_VM|CLONE_VFORK) allowed; every other call
// allowed, whatever its arguments.
func TestSeccompForkFilter(t *testing.T) {
	t.Parallel()
	if SeccompArch == 0 {
		t.Skip("no seccomp filter for this GOARCH")
	}
	ones := [6]uint64{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}
	newFlags := []uint64{unix.CLONE_NEWNS, unix.CLONE_NEWCGROUP, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC,
		unix.CLONE_NEWUSER, unix.CLONE_NEWPID, unix.CLONE_NEWNET}
	for _, r := range []ForkRules{{NoClone3: true}, {}, {NoClone3: true, NoNamespaces: true}, {NoNamespaces: true}} {
		prog := SeccompForkFilter(r)
		clone3 := uint32(secAllow)
		if r.NoClone3 {
			clone3 = secNoSys
		}
		ns := uint32(secAllow)
		if r.NoNamespaces {
			ns = secDeny
		}
		type call struct {
			nr   uint32
			args [6]uint64
			want uint32
		}
		calls := []call{
			{unix.SYS_CLONE, [6]uint64{unix.CLONE_PARENT | uint64(unix.SIGCHLD)}, secDeny},
			{unix.SYS_CLONE, [6]uint64{unix.CLONE_VM | unix.CLONE_VFORK | uint64(unix.SIGCHLD)}, secAllow},
			{unix.SYS_CLONE, [6]uint64{uint64(unix.SIGCHLD)}, secAllow},
			// glibc's fork and pthread_create.
			{unix.SYS_CLONE, [6]uint64{unix.CLONE_CHILD_SETTID | unix.CLONE_CHILD_CLEARTID | uint64(unix.SIGCHLD)}, secAllow},
			{unix.SYS_CLONE, [6]uint64{unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND |
				unix.CLONE_THREAD | unix.CLONE_SYSVSEM | unix.CLONE_SETTLS | unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID}, secAllow},
			{unix.SYS_CLONE3, [6]uint64{}, clone3},
			{unix.SYS_CLONE3, ones, clone3},
			{unix.SYS_UNSHARE, [6]uint64{}, secAllow},
			{unix.SYS_UNSHARE, [6]uint64{unix.CLONE_FILES | unix.CLONE_FS | unix.CLONE_SYSVSEM}, secAllow},
			{unix.SYS_UNSHARE, [6]uint64{unix.CLONE_NEWTIME}, ns},
			{unix.SYS_UNSHARE, ones, ns},
			{unix.SYS_CLONE, ones, secDeny},
		}
		for _, f := range newFlags {
			calls = append(calls,
				call{unix.SYS_UNSHARE, [6]uint64{f}, ns},
				call{unix.SYS_UNSHARE, [6]uint64{f | unix.CLONE_FS}, ns},
				call{unix.SYS_CLONE, [6]uint64{f | uint64(unix.SIGCHLD)}, ns})
		}
		for _, c := range calls {
			if got := runFilter(t, prog, SeccompArch, c.nr, c.args); got != c.want {
				t.Errorf("%+v, call %d args %#x: got %#x, want %#x", r, c.nr, c.args[0], got, c.want)
			}
		}
		for nr := uint32(0); nr < 600; nr++ {
			if nr == unix.SYS_CLONE || nr == unix.SYS_CLONE3 || (r.NoNamespaces && nr == unix.SYS_UNSHARE) {
				continue
			}
			for _, args := range [][6]uint64{{}, ones} {
				if got := runFilter(t, prog, SeccompArch, nr, args); got != secAllow {
					t.Errorf("%+v, call %d: got %#x, want allowed", r, nr, got)
				}
			}
		}
		if got := runFilter(t, prog, SeccompArch+1, unix.SYS_UNSHARE, [6]uint64{unix.CLONE_NEWUSER}); got != secAllow {
			t.Errorf("%+v, another architecture: got %#x, want allowed (the first filter refuses it)", r, got)
		}
	}
}
