package egress

// The seventeenth attack review's tests on the proxy's bounds
// (docs/sandbox-threats.md, "Seventeenth attack review (the proxy's
// bounds and the owners' redaction sets)").

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentproc/agentproc/internal/testuser"
)

// TestAttackStalledPlainHTTPBodiesHoldHostMemory: the seventh mend counts
// a tunnel's stalled directions against Policy.UnreadBudget, but a
// plain-HTTP request's body was written to the host by relayHTTP
// (req.Write) with no deadline: a tree that sends endless bodies
// (Content-Length of a TiB) to a listed host on port 80 that reads
// nothing made the proxy hold the host's send queue (up to tcp_wmem's
// maximum) and the client's receive queue for each connection, outside
// the tree's cgroup, uncounted. The body's writes now go through the same
// guard as a tunnel's.
func TestAttackStalledPlainHTTPBodiesHoldHostMemory(t *testing.T) {
	t.Parallel()
	const budget, stall, conns = 12 << 20, 200 * time.Millisecond, 8
	var wg sync.WaitGroup
	defer wg.Wait() // last: the proxy's and the origin's Close end them
	origin, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = origin.Close() }()
	var mu sync.Mutex
	var held []net.Conn // the origin's side: open, never read
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := origin.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	fn := &fakeNet{names: map[string][]netip.Addr{"allowed.test": {originAddr}}}
	list, err := ParseList([]string{"allowed.test"})
	if err != nil {
		t.Fatal(err)
	}
	p := New(Config{Resolver: fn, StallTimeout: stall, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, origin.Addr().String())
	}, AddrFilter: &AddrFilter{LocalAddrs: func() ([]netip.Addr, error) { return nil, nil }}})
	defer func() { _ = p.Close() }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	denied := make(chan struct{}, conns)
	l, err := p.Serve(ln, Policy{List: list, UnreadBudget: budget, Deny: func(d Denial) {
		if d.Rule == RuleUnread(budget) {
			denied <- struct{}{}
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	_, listenPort, _ := net.SplitHostPort(ln.Addr().String())
	_, originPort, _ := net.SplitHostPort(origin.Addr().String())
	chunk := make([]byte, 256<<10)
	for range conns {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), testDeadline)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		_ = c.SetDeadline(time.Now().Add(testDeadline))
		if _, err := io.WriteString(c, "POST http://allowed.test/upload HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 1099511627776\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if _, err := c.Write(chunk); err != nil {
					return
				}
			}
		}()
	}
	// What the proxy's sockets hold for these connections: the receive
	// queues of those it accepted and the send queues of those it dialled.
	proxyHeld := func() (sum, largest int64) {
		b, err := os.ReadFile("/proc/net/tcp")
		if err != nil {
			t.Skipf("no /proc/net/tcp: %v", err)
		}
		lp, _ := strconv.Atoi(listenPort)
		op, _ := strconv.Atoi(originPort)
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 5 {
				continue
			}
			tx, rx, _ := strings.Cut(f[4], ":")
			var q string
			switch {
			case strings.HasSuffix(f[1], fmt.Sprintf(":%04X", lp)):
				q = rx
			case strings.HasSuffix(f[2], fmt.Sprintf(":%04X", op)):
				q = tx
			default:
				continue
			}
			n, _ := strconv.ParseInt(q, 16, 64)
			sum += n
			largest = max(largest, n)
		}
		return sum, largest
	}
	select {
	case <-denied:
	case <-time.After(2 * time.Second):
	}
	<-time.After(5 * stall) // the others' checks: their writers started one after another
	most := heldWithin(t, fmt.Sprintf("%d stalled plain-HTTP bodies: the proxy's queues", conns), budget, proxyHeld)
	if len(denied) == 0 {
		t.Errorf("denials: got none with rule %q, want one for each connection closed", RuleUnread(budget))
	}
	if most < 2<<20 {
		t.Errorf("control: the proxy's queues held at most %d KiB, want more than 2 MiB (the bodies stalled)", most>>10)
	}
}

// A plain-HTTP upload to a host that reads it passes the guard whole.
func TestPlainHTTPBodyThroughGuard(t *testing.T) {
	t.Parallel()
	const size = 4 << 20
	origin, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = origin.Close() }()
	got := make(chan int64, 1)
	go func() {
		c, err := origin.Accept()
		if err != nil {
			got <- -1
			return
		}
		defer func() { _ = c.Close() }()
		_ = c.SetDeadline(time.Now().Add(testDeadline))
		br := bufio.NewReader(c)
		var n int64
		for {
			line, err := br.ReadString('\n')
			if err != nil || line == "\r\n" {
				break
			}
		}
		n, _ = io.CopyN(io.Discard, br, size)
		_, _ = io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
		got <- n
	}()
	fn := &fakeNet{names: map[string][]netip.Addr{"allowed.test": {originAddr}}}
	list, err := ParseList([]string{"allowed.test"})
	if err != nil {
		t.Fatal(err)
	}
	p := New(Config{Resolver: fn, StallTimeout: 50 * time.Millisecond, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, origin.Addr().String())
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
	c, err := net.DialTimeout("tcp", ln.Addr().String(), testDeadline)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(testDeadline))
	go func() {
		_, _ = fmt.Fprintf(c, "POST http://allowed.test/upload HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: %d\r\n\r\n", size)
		_, _ = c.Write(make([]byte, size))
	}()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.Contains(line, " 204 ") {
		t.Fatalf("the upload's response: got %q, %v; want 204", line, err)
	}
	if n := <-got; n != size {
		t.Errorf("the origin read %d bytes of the body, want %d", n, size)
	}
}

// TestAttack17nUnprivileged runs the stalled bodies' test again as the
// unprivileged test user, whose sockets' limits the proxy then has.
func TestAttack17nUnprivileged(t *testing.T) {
	tests := []string{"TestAttackStalledPlainHTTPBodiesHoldHostMemory", "TestPlainHTTPBodyThroughGuard"}
	out, err := testuser.Run(t, time.Minute, nil, "-test.run=^("+strings.Join(tests, "|")+")$")
	if err != nil {
		t.Fatalf("as %s: %v\n%s", testuser.Name, err, out)
	}
	for _, name := range tests {
		if !strings.Contains(out, "--- PASS: "+name+" ") {
			t.Errorf("as %s: got no PASS line for %s, want one\n%s", testuser.Name, name, out)
		}
	}
}
