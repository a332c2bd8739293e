package egress

// The thirteenth review's stalled tunnels (docs/sandbox-threats.md,
// "Thirteenth attack review (the proxy and redaction)"), fixed by the
// sixth mend: Linux's only, as the bound is (relay_linux.go).

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestAttackStalledTunnelsHoldHostMemory: a tree opens connections
// through the proxy to a listed host that sends a large file (a package
// registry's tarball) and never reads them. The proxy reads a chunk from
// the host into a pooled 256 KiB buffer and blocks writing it to the
// stalled client, holding the buffer; meanwhile the kernel keeps what the
// host sends in the proxy's receive queue, grown by autotuning while the
// data flowed. Both are the host's memory, outside the tree's cgroup and
// its Limits.Memory: measured here about 3.6 MiB of receive queue and
// 0.3 MiB of heap a connection within 3 s, so MaxConns (256) stalled
// tunnels hold about 1 GiB of the host's for one tree, and several trees
// at once more (autotuning grows the buffer towards tcp_rmem's maximum,
// 32 MiB here, on a path with a larger bandwidth-delay product). Open:
// the sixth mend fixed each upstream connection's receive buffer at
// 1 MiB, which the lead took back at the merge: it capped one download at
// about half its buffer a round trip (5–10 MiB/s at 100 ms), and where
// net.core.rmem_max is the stock 208 KiB the kernel caps SO_RCVBUF at
// twice that, 2 MiB/s at 100 ms: a sandbox that slows package installs
// is one agents turn off. The test checks the queues and each upstream
// socket's SO_RCVBUF against 1 MiB a connection. The
// control: the same tunnel relays to a client that reads.
func TestAttackStalledTunnelsHoldHostMemory(t *testing.T) {
	if os.Getenv("ATK13N_RUN_OPEN") == "" {
		t.Skip("open: a tree's stalled tunnels make the proxy hold the host's memory (each connection's receive queue, grown by autotuning, and a relay buffer), outside the tree's cgroup; a fixed SO_RCVBUF bounds it but caps a download at its window a round trip, and net.core.rmem_max (208 KiB on a stock kernel) caps the buffer itself (docs/sandbox-threats.md, sixth mend)")
	}
	origin, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = origin.Close() }()
	go func() {
		chunk := make([]byte, 1<<20)
		for {
			c, err := origin.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				for {
					if _, err := c.Write(chunk); err != nil {
						return
					}
				}
			}()
		}
	}()
	fn := &fakeNet{names: map[string][]netip.Addr{"allowed.test": {originAddr}}}
	list, err := ParseList([]string{"allowed.test"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var ups []net.Conn // the proxy's connections to the origin
	p := New(Config{Resolver: fn, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, origin.Addr().String())
		if err == nil {
			mu.Lock()
			ups = append(ups, c)
			mu.Unlock()
		}
		return c, err
	}, AddrFilter: &AddrFilter{LocalAddrs: func() ([]netip.Addr, error) { return nil, nil }}})
	defer func() { _ = p.Close() }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := p.Serve(ln, Policy{List: list})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	tunnel := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, "CONNECT allowed.test:443 HTTP/1.1\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := tunnel()
	_ = c.SetReadDeadline(time.Now().Add(testDeadline))
	if n, err := io.CopyN(io.Discard, c, 4<<20); err != nil {
		t.Fatalf("control: a reading client got %d bytes: %v", n, err)
	}
	_ = c.Close()

	const conns, bound = 32, 1 << 20 // bytes of the host's a stalled connection may hold
	_, originPort, _ := net.SplitHostPort(origin.Addr().String())
	for range conns {
		c := tunnel()
		defer func() { _ = c.Close() }()
		_ = c.(*net.TCPConn).SetReadBuffer(4096) // the tree reads nothing
	}
	deadline := time.Now().Add(time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for held := int64(0); time.Now().Before(deadline); <-tick.C {
		if held = receiveQueued(t, originPort); held > conns*bound {
			t.Fatalf("%d stalled tunnels: the proxy's receive queues hold %d MiB of the host's memory, want at most %d MiB", conns, held>>20, conns*bound>>20)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ups) != conns+1 {
		t.Fatalf("control: the proxy dialled %d connections, want %d", len(ups), conns+1)
	}
	for _, up := range ups[1:] {
		rc, err := up.(*net.TCPConn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		size := 0
		_ = rc.Control(func(fd uintptr) { size, err = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF) })
		if err != nil || size > bound {
			t.Fatalf("an upstream connection's receive buffer: got %d KiB (%v), want at most %d KiB", size>>10, err, bound>>10)
		}
	}
}

// receiveQueued sums the receive queues of the host's TCP connections to
// the given remote port (hex in /proc/net/tcp).
func receiveQueued(t *testing.T, port string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Skipf("no /proc/net/tcp: %v", err)
	}
	p, _ := strconv.Atoi(port)
	want := fmt.Sprintf(":%04X", p)
	var sum int64
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 5 || !strings.HasSuffix(f[2], want) {
			continue
		}
		_, rx, _ := strings.Cut(f[4], ":")
		n, _ := strconv.ParseInt(rx, 16, 64)
		sum += n
	}
	return sum
}
