package egress

import (
	"bufio"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestProxyToken: a listener with a token serves only the clients that
// present it (curl by HTTP Basic, preemptively and, as git asks libcurl
// to, after a 407; by SOCKS5 username and password) and refuses the
// others without a denial: a process outside the tree must not add to
// the tree's report (thirteenth attack review, "denials from outside the
// tree"). The control: with the token, a refused target is a denial.
func TestProxyToken(t *testing.T) {
	t.Parallel()
	const token = "T0KENT0KENT0KENT0KEN"
	h := newHarnessToken(t, nil, token, "allowed.test")
	with := "agentproc:" + token + "@" + h.addr
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"connect", []string{"-k", "-x", "http://" + with, "https://allowed.test/a"}, "secure /a"},
		{"plain", []string{"-x", "http://" + with, "http://allowed.test/b"}, "origin GET /b host=allowed.test"},
		{"anyauth", []string{"-k", "--proxy-anyauth", "-x", "http://" + with, "https://allowed.test/c"}, "secure /c"},
		{"socks5h", []string{"-k", "-x", "socks5h://" + with, "https://allowed.test/d"}, "secure /d"},
	} {
		out, ok := curl(t, c.args...)
		if !ok || !strings.Contains(out, c.want) {
			t.Errorf("%s: got %q (ok %v), want %q", c.name, out, ok, c.want)
		}
	}
	if d := h.denied(); len(d) != 0 {
		t.Fatalf("denials: got %+v, want none", d)
	}
	for _, c := range []struct {
		name string
		args []string
	}{
		{"connect without", []string{"-k", "-x", "http://" + h.addr, "https://denied.test/"}},
		{"plain without", []string{"-x", "http://" + h.addr, "http://denied.test/"}},
		{"connect another token", []string{"-k", "-x", "http://agentproc:" + token[:len(token)-1] + "X@" + h.addr, "https://denied.test/"}},
		{"connect another user", []string{"-k", "-x", "http://root:" + token + "@" + h.addr, "https://denied.test/"}},
		{"socks5h without", []string{"-k", "-x", "socks5h://" + h.addr, "https://denied.test/"}},
		{"socks5h another token", []string{"-k", "-x", "socks5h://agentproc:x" + token + "@" + h.addr, "https://denied.test/"}},
	} {
		if out, ok := curl(t, c.args...); ok {
			t.Errorf("%s: got %q and success, want a refusal", c.name, out)
		}
	}
	if d := h.denied(); len(d) != 0 {
		t.Errorf("denials without the token: got %+v, want none", d)
	}
	if out, ok := curl(t, "-k", "-x", "http://"+with, "https://denied.test/"); ok {
		t.Errorf("control: got %q and success, want a refusal", out)
	}
	wantDenial(t, h, "connect", "denied.test:443", RuleNotListed)
}

// TestProxyTokenStatus: a request without the token gets 407 with a
// Basic challenge, so that a client that sends credentials only when
// asked can; one with another scheme or a bad encoding gets the same.
func TestProxyTokenStatus(t *testing.T) {
	t.Parallel()
	h := newHarnessToken(t, nil, "secret-token-1234", "allowed.test")
	for _, auth := range []string{"", "Bearer secret-token-1234", "Basic !!!", "Basic " + base64.StdEncoding.EncodeToString([]byte("agentproc:secret-token-123"))} {
		c, err := net.DialTimeout("tcp", h.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		head := "CONNECT allowed.test:443 HTTP/1.1\r\n"
		if auth != "" {
			head += "Proxy-Authorization: " + auth + "\r\n"
		}
		_, _ = io.WriteString(c, head+"\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
		_ = c.Close()
		if err != nil {
			t.Fatalf("%q: %v", auth, err)
		}
		if resp.StatusCode != http.StatusProxyAuthRequired || resp.Header.Get("Proxy-Authenticate") != `Basic realm="agentproc"` {
			t.Errorf("%q: got %s %q, want 407 with a Basic challenge", auth, resp.Status, resp.Header.Get("Proxy-Authenticate"))
		}
	}
	if d := h.denied(); len(d) != 0 {
		t.Errorf("denials: got %+v, want none", d)
	}
}

// BenchmarkProxyTokenCheck is what the token costs a connection: the
// check of its Proxy-Authorization header.
func BenchmarkProxyTokenCheck(b *testing.B) {
	l := &Listener{auth: []byte(ProxyUser + ":ABCDEFGHIJKLMNOPQRSTUVWXYZ")}
	h := http.Header{"Proxy-Authorization": {"Basic " + base64.StdEncoding.EncodeToString(l.auth)}}
	for b.Loop() {
		if !l.httpAuthorized(h) {
			b.Fatal("refused")
		}
	}
}

// TestAttackUnauthenticatedConnsHoldListener: without root a tree's
// listener is on the host's loopback, and any process of the machine
// may connect to it. A connection that never sent the token used to take
// one of the listener's MaxConns (256) slots until HeadTimeout (60 s), so
// an outsider that opened 256 idle connections had the tree's own
// refused, with a denial in the tree's report (sixth mend, "noticed, left
// alone"). Now a connection is counted in MaxConns only once it presents
// the token; until then it is held in a pool of its own, the oldest
// closed when another comes. The test: 300 idle connections from outside,
// then the tree's CONNECT is served at once, the oldest idle connection
// is closed, and nothing was reported. The control: on a listener without
// a token (every connection is the tree's), idle connections do fill
// MaxConns and the next is refused.
func TestAttackUnauthenticatedConnsHoldListener(t *testing.T) {
	t.Parallel()
	const token = "T0KENT0KENT0KENT0KEN"
	h := newHarnessToken(t, nil, token, "allowed.test")
	idle := func(addr string, n int) []net.Conn {
		conns := make([]net.Conn, 0, n)
		for range n {
			c, err := net.DialTimeout("tcp", addr, testDeadline)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			conns = append(conns, c)
		}
		return conns
	}
	// connectStatus sends a CONNECT with the token and returns the
	// response's status line, or the error that ended the read.
	connectStatus := func(addr string, within time.Duration) string {
		c, err := net.DialTimeout("tcp", addr, testDeadline)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		_ = c.SetDeadline(time.Now().Add(within))
		auth := base64.StdEncoding.EncodeToString([]byte(ProxyUser + ":" + token))
		if _, err := io.WriteString(c, "CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\nProxy-Authorization: Basic "+auth+"\r\n\r\n"); err != nil {
			return err.Error()
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return err.Error()
		}
		return strings.TrimSpace(line)
	}
	conns := idle(h.addr, 300)
	if got := connectStatus(h.addr, time.Second); got != "HTTP/1.1 200 Connection established" {
		t.Errorf("the tree's CONNECT after 300 idle connections from outside: got %q, want 200 within 1 s", got)
	}
	_ = conns[0].SetReadDeadline(time.Now().Add(testDeadline))
	if n, err := conns[0].Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("the oldest idle connection: got %d bytes, %v; want it closed", n, err)
	}
	if d := h.denied(); len(d) != 0 {
		t.Errorf("denials: got %d, the first %+v; want none (the idle connections are not the tree's)", len(d), d[0])
	}

	// Control: without a token every connection counts in MaxConns.
	list, err := ParseList([]string{"allowed.test"})
	if err != nil {
		t.Fatal(err)
	}
	p := New(Config{Resolver: h.net, Dial: h.net.dial, MaxConns: 16,
		AddrFilter: &AddrFilter{LocalAddrs: func() ([]netip.Addr, error) { return nil, nil }}})
	t.Cleanup(func() { _ = p.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Serve(ln, Policy{List: list}); err != nil {
		t.Fatal(err)
	}
	idle(ln.Addr().String(), 16)
	if got := connectStatus(ln.Addr().String(), testDeadline); strings.HasPrefix(got, "HTTP/1.1 200") {
		t.Errorf("control: a CONNECT past MaxConns idle connections on a listener without a token: got %q, want it refused", got)
	}
}

// TestServeRefusesNegativeBounds: a negative AuthTimeout or UnreadBudget
// is a caller's mistake, refused by name rather than read as "none".
func TestServeRefusesNegativeBounds(t *testing.T) {
	t.Parallel()
	list, err := ParseList([]string{"allowed.test"})
	if err != nil {
		t.Fatal(err)
	}
	p := New(Config{})
	t.Cleanup(func() { _ = p.Close() })
	for _, pol := range []Policy{{List: list, AuthTimeout: -time.Second}, {List: list, UnreadBudget: -1}} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		l, err := p.Serve(ln, pol)
		if err == nil {
			_ = l.Close()
			t.Errorf("Serve(AuthTimeout %v, UnreadBudget %d): got no error, want one", pol.AuthTimeout, pol.UnreadBudget)
			continue
		}
		if !strings.Contains(err.Error(), "AuthTimeout") || !strings.Contains(err.Error(), "UnreadBudget") {
			t.Errorf("Serve: got %q, want it to name the fields", err)
		}
	}
}
