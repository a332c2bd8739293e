package agentproc

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// seccompHostsFilter is the filter of a NetworkHosts tree: an allow-list
// of socket families (AF_UNIX, and TCP over AF_INET and AF_INET6, which
// only reach the tree's proxy listener), no MPTCP, no listen, no TCP Fast
// Open (MSG_FASTOPEN on sendto, sendmsg and sendmmsg, and
// TCP_FASTOPEN_CONNECT, which connect without the connect hook Landlock's
// port rule sits on), and, as every mode, no io_uring and no other
// architecture's calls. It is written apart from seccompFilter's modes
// while those move to a data-driven builder; it can fold into it as one
// more mode.
func seccompHostsFilter() []unix.SockFilter {
	a := &bpfAsm{}
	deny, allow := "deny", "allow"
	a.ld(offArch)
	a.jeq(seccompArch, "", deny)
	a.ld(offNR)
	a.jeq(unix.SYS_SOCKET, "socket", "")
	a.jeq(unix.SYS_LISTEN, deny, "")
	a.jeq(unix.SYS_SENDTO, "flags3", "")
	a.jeq(unix.SYS_SENDMMSG, "flags3", "")
	a.jeq(unix.SYS_SENDMSG, "flags2", "")
	a.jeq(unix.SYS_SETSOCKOPT, "sockopt", "")
	a.jge(unix.SYS_IO_URING_SETUP, "", allow)
	a.jge(unix.SYS_IO_URING_REGISTER+1, "", deny)
	if runtime.GOARCH == "amd64" {
		a.jge(x32Bit, deny, allow) // the x32 ABI's numbers carry this bit
	}
	a.ret(secAllow)

	a.label("socket") // socket(domain, type, protocol)
	a.ld(offArgLow + 8*2)
	a.jeq(unix.IPPROTO_MPTCP, deny, "")
	a.ld(offArgLow)
	a.jeq(unix.AF_UNIX, allow, "")
	a.jeq(unix.AF_INET, "inet", "")
	a.jeq(unix.AF_INET6, "inet", deny)
	a.label("inet")
	a.ld(offArgLow + 8*1)
	a.and(0xf) // the type without SOCK_NONBLOCK, SOCK_CLOEXEC
	a.jeq(unix.SOCK_STREAM, "", deny)
	a.ld(offArgLow + 8*2)
	a.jeq(0, allow, "")
	a.jeq(unix.IPPROTO_TCP, allow, deny)

	a.label("flags3") // sendto(fd, buf, len, flags, ...), sendmmsg(fd, vec, n, flags)
	a.ld(offArgLow + 8*3)
	a.jset(unix.MSG_FASTOPEN, deny, allow)
	a.label("flags2") // sendmsg(fd, msg, flags)
	a.ld(offArgLow + 8*2)
	a.jset(unix.MSG_FASTOPEN, deny, allow)

	a.label("sockopt") // setsockopt(fd, level, name, ...)
	a.ld(offArgLow + 8*1)
	a.jeq(unix.IPPROTO_TCP, "", allow)
	a.ld(offArgLow + 8*2)
	a.jeq(unix.TCP_FASTOPEN_CONNECT, deny, "")
	a.jeq(unix.TCP_FASTOPEN, deny, allow)

	a.label(allow)
	a.ret(secAllow)
	a.label(deny)
	a.ret(secDeny)
	return a.assemble()
}

// bpfAsm writes a classic BPF program with named jump targets; "" is the
// next instruction.
type bpfAsm struct {
	ins    []unix.SockFilter
	jumps  [][2]string // per instruction: jt, jf labels
	labels map[string]int
}

func (a *bpfAsm) emit(code uint16, k uint32, jt, jf string) {
	a.ins = append(a.ins, unix.SockFilter{Code: code, K: k})
	a.jumps = append(a.jumps, [2]string{jt, jf})
}

func (a *bpfAsm) ld(off uint32)               { a.emit(bpfLdAbs, off, "", "") }
func (a *bpfAsm) and(k uint32)                { a.emit(bpfAnd, k, "", "") }
func (a *bpfAsm) ret(k uint32)                { a.emit(bpfRet, k, "", "") }
func (a *bpfAsm) jeq(k uint32, jt, jf string) { a.emit(bpfJeq, k, jt, jf) }
func (a *bpfAsm) jge(k uint32, jt, jf string) { a.emit(bpfJge, k, jt, jf) }
func (a *bpfAsm) jset(k uint32, jt, jf string) {
	a.emit(unix.BPF_JMP|unix.BPF_JSET|unix.BPF_K, k, jt, jf)
}

func (a *bpfAsm) label(name string) {
	if a.labels == nil {
		a.labels = map[string]int{}
	}
	a.labels[name] = len(a.ins)
}

// assemble resolves the labels; a jump backwards or beyond 255 is a bug
// in the program above and panics.
func (a *bpfAsm) assemble() []unix.SockFilter {
	out := make([]unix.SockFilter, len(a.ins))
	for i, in := range a.ins {
		off := func(l string) uint8 {
			if l == "" {
				return 0
			}
			t, ok := a.labels[l]
			if !ok || t <= i || t-i-1 > 255 {
				panic("seccomp: bad jump to " + l)
			}
			return uint8(t - i - 1)
		}
		in.Jt, in.Jf = off(a.jumps[i][0]), off(a.jumps[i][1])
		out[i] = in
	}
	return out
}
