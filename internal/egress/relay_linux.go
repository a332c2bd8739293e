package egress

import (
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
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

// upstreamRecvBuf is the receive buffer boundUpstreamRecv asks for on a
// tunnel's connection to its target (the kernel doubles it: 1 MiB).
const upstreamRecvBuf = 512 << 10

// boundUpstreamRecv fixes the receive buffer of up, the connection to the
// target, at upstreamRecvBuf. The proxy reads the target only as fast as
// the client takes what it writes, so a client that stops reading leaves
// the target's data in up's receive queue: the host's memory, outside the
// tree's cgroup and its Limits.Memory. Left to autotuning, that buffer
// grows towards net.ipv4.tcp_rmem's maximum (32 MiB on the machine
// measured) on a path with a large bandwidth-delay product, and to
// 2–4 MiB from a loopback origin, for each of a listener's MaxConns
// connections (thirteenth attack review,
// TestAttackStalledTunnelsHoldHostMemory). Fixed, a stalled tunnel holds
// at most about 1 MiB of queue. TCP_WINDOW_CLAMP, which would leave
// autotuning on under a bound, was tried and measured no bound at all on
// this kernel (queues of 1.3–2.1 MiB under a 1 MiB clamp). The cost: one
// connection's download is bounded at its window a round trip, about
// 0.5–1 MiB (25–50 MiB/s at 20 ms, 5–10 MiB/s at 100 ms); on the loopback
// and near mirrors it is not reached (BenchmarkProxyDownload).
func boundUpstreamRecv(up net.Conn) {
	if tc, ok := up.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(upstreamRecvBuf)
	}
}

// copyConnOS reads src's socket itself, through its RawConn, so that a
// buffer is taken from the pool only once the socket is readable and
// goes back on EAGAIN: the runtime's poller does the waiting. A src that
// is not a *net.TCPConn (a Config.Dial of the caller's; a stream's read of
// 0 bytes is its end, a datagram's is not) is copied with io.Copy.
func copyConnOS(dst, src net.Conn) {
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
		_, werr := dst.Write((*buf)[:n])
		relayBufs.Put(buf)
		if werr != nil {
			return
		}
	}
}
