package egress

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// sendBuf is the SO_SNDBUF the kernel reports for c.
func sendBuf(t *testing.T, c net.Conn) int {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var gerr error
	if err := rc.Control(func(fd uintptr) { n, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF) }); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	return n
}

// TestProxyBoundsLoopbackClientSendBuffer: a tunnel's connection to a
// client on the loopback gets a fixed send buffer (boundClientSend), so
// a download does not pile up megabytes between the proxy and the client;
// the connection to the origin keeps the kernel's autotuning, and so
// does a client that is not on the loopback.
func TestProxyBoundsLoopbackClientSendBuffer(t *testing.T) {
	t.Parallel()
	oln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = oln.Close() })
	go func() {
		for {
			c, err := oln.Accept()
			if err != nil {
				return
			}
			// The origin speaks first: the client's read of its byte
			// through the tunnel means the proxy's copy back has begun.
			go func() { defer c.Close(); _, _ = c.Write([]byte("x")); _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	fn := &fakeNet{names: map[string][]netip.Addr{"allowed.test": {originAddr}},
		origins: map[uint16]string{443: oln.Addr().String()}}
	list, err := ParseList([]string{"allowed.test"})
	if err != nil {
		t.Fatal(err)
	}
	p := New(Config{Resolver: fn, Dial: fn.dial, AddrFilter: &AddrFilter{LocalAddrs: func() ([]netip.Addr, error) { return nil, nil }},
		DialTimeout: 5 * time.Second})
	t.Cleanup(func() { _ = p.Close() })

	// tunnel opens a CONNECT tunnel from a client bound to from, waits for
	// the origin's byte through it and returns the proxy's two ends.
	tunnel := func(t *testing.T, ln net.Listener, l *Listener, from netip.Addr) (client, origin net.Conn) {
		t.Helper()
		d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: from.AsSlice()}}
		c, err := d.Dial("tcp", netip.AddrPortFrom(from, uint16(ln.Addr().(*net.TCPAddr).Port)).String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, "CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("CONNECT: got %v, %v; want 200", resp, err)
		}
		if b, err := br.ReadByte(); err != nil || b != 'x' {
			t.Fatalf("through the tunnel: got %q, %v; want the origin's x", b, err)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		for pc := range l.conns {
			if pc.RemoteAddr().String() == c.LocalAddr().String() {
				client = pc
			} else {
				origin = pc
			}
		}
		if client == nil || origin == nil || len(l.conns) != 2 {
			t.Fatalf("got %d proxy connections, want the client's and the origin's", len(l.conns))
		}
		return client, origin
	}

	t.Run("loopback client", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		l, err := p.Serve(ln, Policy{List: list})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		client, origin := tunnel(t, ln, l, netip.MustParseAddr("127.0.0.1"))
		if got, want := sendBuf(t, client), 2*clientSendBuf; got != want {
			t.Errorf("client's send buffer: got %d, want %d (the kernel doubles what is set)", got, want)
		}
		if got := sendBuf(t, origin); got == 2*clientSendBuf {
			t.Errorf("origin's send buffer: got %d, want the kernel's own (autotuned), not the client's bound", got)
		}
	})

	t.Run("client not on the loopback", func(t *testing.T) {
		var from netip.Addr
		addrs, _ := net.InterfaceAddrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap().Is4() && !ip.IsLoopback() {
					from = ip.Unmap()
					break
				}
			}
		}
		if !from.IsValid() {
			t.Skip("this host has no IPv4 address outside the loopback")
		}
		ln, err := net.Listen("tcp", from.String()+":0")
		if err != nil {
			t.Fatal(err)
		}
		l, err := p.Serve(ln, Policy{List: list})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		client, _ := tunnel(t, ln, l, from)
		if got := sendBuf(t, client); got == 2*clientSendBuf {
			t.Errorf("client's send buffer: got %d, want the kernel's own (autotuned) for a client off the loopback", got)
		}
	})
}
