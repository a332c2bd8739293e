package agentproc

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// runFilter runs prog, a classic BPF seccomp program of the instructions
// seccompFilter uses, on a system call and returns its verdict.
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
		case bpfJeq, bpfJge:
			hit := acc == in.K
			if in.Code == bpfJge {
				hit = acc >= in.K
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

// TestSeccompFilter checks the filter's verdicts: every ordinary system
// call allowed, io_uring, x32 and foreign-architecture calls refused,
// MPTCP always refused, and inet sockets as each network mode says.
func TestSeccompFilter(t *testing.T) {
	t.Parallel()
	if seccompArch == 0 {
		t.Skip("no seccomp filter for this GOARCH")
	}
	uring := map[uint32]bool{unix.SYS_IO_URING_SETUP: true, unix.SYS_IO_URING_ENTER: true, unix.SYS_IO_URING_REGISTER: true}
	sock := func(domain, typ, proto uint64) [6]uint64 { return [6]uint64{domain, typ, proto} }
	for _, net := range []seccompNet{seccompNetAny, seccompNetNone, seccompNetStreamOnly} {
		prog := seccompFilter(net)
		for nr := uint32(0); nr < 600; nr++ {
			if nr == unix.SYS_SOCKET {
				continue
			}
			want := uint32(secAllow)
			if uring[nr] {
				want = secDeny
			}
			if got := runFilter(t, prog, seccompArch, nr, [6]uint64{}); got != want {
				t.Errorf("net %d, system call %d: got %#x, want %#x", net, nr, got, want)
			}
		}
		if got := runFilter(t, prog, seccompArch^1, unix.SYS_READ, [6]uint64{}); got != secDeny {
			t.Errorf("net %d, another architecture: got %#x, want refused", net, got)
		}
		if seccompArch == unix.AUDIT_ARCH_X86_64 {
			if got := runFilter(t, prog, seccompArch, x32Bit|unix.SYS_READ, [6]uint64{}); got != secDeny {
				t.Errorf("net %d, x32 read: got %#x, want refused", net, got)
			}
		}
		for _, c := range []struct {
			args               [6]uint64
			any, none, onlyTCP bool // allowed under each mode
		}{
			{sock(unix.AF_UNIX, unix.SOCK_STREAM, 0), true, true, true},
			{sock(unix.AF_INET, unix.SOCK_STREAM, 0), true, false, true},
			{sock(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP), true, false, true},
			{sock(unix.AF_INET, unix.SOCK_DGRAM, 0), true, false, false},
			{sock(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_MPTCP), false, false, false},
			{sock(unix.AF_UNIX, unix.SOCK_STREAM, unix.IPPROTO_MPTCP), false, false, false},
			{sock(unix.AF_NETLINK, unix.SOCK_RAW, 0), true, true, true},
		} {
			allowed := map[seccompNet]bool{seccompNetAny: c.any, seccompNetNone: c.none, seccompNetStreamOnly: c.onlyTCP}[net]
			want := uint32(secDeny)
			if allowed {
				want = secAllow
			}
			if got := runFilter(t, prog, seccompArch, unix.SYS_SOCKET, c.args); got != want {
				t.Errorf("net %d, socket%v: got %#x, want %#x", net, c.args[:3], got, want)
			}
		}
	}
}
