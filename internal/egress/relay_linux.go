package egress

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// relayChunk is the most copyConn reads at once: of the sizes tried, the
// one at which the proxy's copy cost least CPU on the loopback without a
// larger buffer held through a slow client's write (docs/measurements.md).
const relayChunk = 256 << 10

var relayBufs = sync.Pool{New: func() any { b := make([]byte, relayChunk); return &b }}

// clientSendBuf is the send buffer boundClientSend asks for (the kernel
// doubles it: two chunks in flight).
const clientSendBuf = relayChunk

// boundClientSend fixes the send buffer of c, the client's connection, at
// clientSendBuf when the client is on the loopback (every agentproc
// tree's is: its proxy listens on 127.0.0.1). Left to autotuning, a
// loopback connection's send buffer grows to a few MiB, so that much of
// the download sits between the proxy's write and the client's read, in
// pages gone cold by the time the client copies them; bounded, the kernel
// reuses the few pages it writes into, and the client's copy finds them
// in the cache (docs/measurements.md, the client send buffer's row). The
// loopback's round trip is microseconds, so 512 KiB in flight does not
// bound throughput; a client over a real network keeps autotuning.
func boundClientSend(c net.Conn) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	if a, ok := tc.RemoteAddr().(*net.TCPAddr); !ok || !a.IP.IsLoopback() {
		return
	}
	_ = tc.SetWriteBuffer(clientSendBuf)
}

// copyConnOS reads src's socket itself, through its RawConn, so that a
// buffer is taken from the pool only once the socket is readable and
// goes back on EAGAIN: the runtime's poller does the waiting. A src that
// is not a *net.TCPConn (a Config.Dial of the caller's; a stream's read of
// 0 bytes is its end, a datagram's is not) is copied with io.Copy.
func copyConnOS(dst, src net.Conn, g *stallGuard) {
	tc, ok := src.(*net.TCPConn)
	if !ok {
		_, _ = io.Copy(dst, src)
		return
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		_, _ = io.Copy(dst, src)
		return
	}
	for {
		var buf *[]byte
		var n int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			buf = relayBufs.Get().(*[]byte)
			for {
				n, rerr = syscall.Read(int(fd), *buf)
				if !errors.Is(rerr, syscall.EINTR) {
					break
				}
			}
			if errors.Is(rerr, syscall.EAGAIN) {
				relayBufs.Put(buf)
				buf = nil
				return false // wait until readable
			}
			return true
		})
		if err != nil || rerr != nil || n <= 0 {
			// Closed (Listener.Close), reset, or the end of src.
			if buf != nil {
				relayBufs.Put(buf)
			}
			return
		}
		werr := writeGuarded(dst, rc, (*buf)[:n], g)
		relayBufs.Put(buf)
		if werr != nil {
			return
		}
	}
}

// guardedWriterOS writes to dst through writeGuarded, src's socket being
// what holds the bytes not yet read; dst itself when src's socket cannot
// be reached (a Config.Dial's connection).
func guardedWriterOS(dst, src net.Conn, g *stallGuard) io.Writer {
	tc, ok := src.(*net.TCPConn)
	if !ok {
		return dst
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return dst
	}
	return guarded{dst: dst, src: rc, g: g}
}

// guarded is an io.Writer over writeGuarded.
type guarded struct {
	dst net.Conn
	src syscall.RawConn
	g   *stallGuard
}

func (w guarded) Write(b []byte) (int, error) {
	if err := writeGuarded(w.dst, w.src, b, w.g); err != nil {
		return 0, err
	}
	return len(b), nil
}

// errOverBudget ends a relay whose tree left too much unread.
var errOverBudget = errors.New("egress: unread budget passed")

// writeGuarded writes b to dst. With a guard, each write carries its
// deadline; when one expires, the relay's share of the account is set to
// what it still holds plus what src's socket holds unread and dst's holds
// unsent (the host's memory in both: the tree's stall keeps all three),
// and the relay
// ends (g.over) if that passes the budget. The write's deadline is wall
// time, as the kernel's poller keeps it, not the Manager's clock: a mock
// clock would set it in the past.
func writeGuarded(dst net.Conn, src syscall.RawConn, b []byte, g *stallGuard) error {
	if g == nil {
		_, err := dst.Write(b)
		return err
	}
	defer g.share.clear()
	for {
		_ = dst.SetWriteDeadline(time.Now().Add(g.timeout))
		n, err := dst.Write(b)
		b = b[n:]
		if err == nil {
			return nil
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		if !g.share.record(int64(len(b)) + int64(unreadIn(src)) + int64(unsentIn(dst))) {
			g.over()
			return errOverBudget
		}
	}
}

// unreadIn is what src's socket may hold unread while its relay does not
// read: the larger of its receive queue (SIOCINQ) and its receive
// buffer's size (SO_RCVBUF, the kernel's own figure, doubled from what was
// asked and grown by autotuning), 0 when it cannot tell. The buffer's
// size is counted, not only the queue, because the queue keeps filling
// after it was read, up to the buffer, and autotuning grows the buffer
// only when the socket is read: so the share a stalled relay records is
// what it will hold until it writes again, and the account bounds the
// memory, not a snapshot of it.
func unreadIn(src syscall.RawConn) int {
	n := 0
	_ = src.Control(func(fd uintptr) {
		if q, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ); err == nil {
			n = q
		}
		if b, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF); err == nil {
			n = max(n, b)
		}
	})
	return n
}

// unsentIn is what dst's socket holds unsent (SIOCOUTQ): a stalled
// relay's destination has its send buffer full, up to tcp_wmem's maximum
// for an upstream connection (4 MiB by default) and 512 KiB for a
// loopback client's (boundClientSend). 0 when it cannot tell.
func unsentIn(dst net.Conn) int {
	tc, ok := dst.(*net.TCPConn)
	if !ok {
		return 0
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	_ = rc.Control(func(fd uintptr) {
		if q, err := unix.IoctlGetInt(int(fd), unix.SIOCOUTQ); err == nil {
			n = q
		}
	})
	return n
}
