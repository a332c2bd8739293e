package egress

import (
	"context"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"
)

// Tests of the thirteenth attack review (the proxy and redaction):
// docs/sandbox-threats.md, "Thirteenth attack review (the proxy and
// redaction)".

// TestAttackCloseWaitsForDial: a tree's last act is a CONNECT to a listed
// target whose dial never completes (a listed CIDR behind a firewall that
// drops SYNs, a name under a wildcard whose servers do not answer). The
// proxy dialled under a context of its own, bounded only by DialTimeout
// (30 s), and Listener.Close waits for its connections' goroutines: the
// tree's finish, and Manager.Close (which has no ctx), waited up to 30 s
// after the tree had gone. Close must end a dial in flight. The control:
// the dial is in flight when Close is called, and a dial left alone runs
// until its own deadline.
func TestAttackCloseWaitsForDial(t *testing.T) {
	t.Parallel()
	const dialTimeout = 1500 * time.Millisecond
	started := make(chan struct{}, 4)
	blackhole := func(ctx context.Context, _, _ string) (net.Conn, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	fn := &fakeNet{names: map[string][]netip.Addr{"allowed.test": {originAddr}}}
	list, err := ParseList([]string{"allowed.test"})
	if err != nil {
		t.Fatal(err)
	}
	p := New(Config{Resolver: fn, Dial: blackhole, DialTimeout: dialTimeout,
		AddrFilter: &AddrFilter{LocalAddrs: func() ([]netip.Addr, error) { return nil, nil }}})
	defer func() { _ = p.Close() }()
	serve := func() (*Listener, net.Conn) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		l, err := p.Serve(ln, Policy{List: list})
		if err != nil {
			t.Fatal(err)
		}
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, "CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-started:
		case <-time.After(testDeadline):
			t.Fatal("control: the proxy never dialled")
		}
		return l, c
	}

	// Control: left alone, the dial waits for its own deadline.
	l, c := serve()
	begin := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(testDeadline))
	_, _ = io.ReadAll(c)
	if got := time.Since(begin); got < dialTimeout/2 {
		t.Errorf("control: the dial ended after %v, want about DialTimeout (%v)", got, dialTimeout)
	}
	_ = c.Close()
	_ = l.Close()

	l, c = serve()
	defer func() { _ = c.Close() }()
	begin = time.Now()
	_ = l.Close()
	if got := time.Since(begin); got > dialTimeout/3 {
		t.Errorf("Listener.Close with a dial in flight took %v, want it to end the dial (under %v)", got, dialTimeout/3)
	}
}

// testDeadline bounds every wait of these tests.
const testDeadline = 10 * time.Second
