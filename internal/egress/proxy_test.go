package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeNet is a network for the proxy under test: names resolve as
// listed, and a dial to a documentation address reaches the local origin
// servers by port. The proxy's checks see the addresses a real network
// would give; only the last hop is redirected.
type fakeNet struct {
	names   map[string][]netip.Addr
	origins map[uint16]string // port → the origin's real address

	mu     sync.Mutex
	dialed []string
}

// LookupNetIP resolves only rooted names: the proxy must never ask for a
// name a search list could extend.
func (n *fakeNet) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	name, rooted := strings.CutSuffix(host, ".")
	if !rooted {
		return nil, &net.DNSError{Err: "fake network: an unrooted name", Name: host}
	}
	if a, ok := n.names[name]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (n *fakeNet) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	ap := netip.MustParseAddrPort(addr)
	n.mu.Lock()
	n.dialed = append(n.dialed, addr)
	real, ok := n.origins[ap.Port()]
	n.mu.Unlock()
	if !ok || ap.Addr() != originAddr {
		return nil, errors.New("fake network: unreachable " + addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, real)
}

func (n *fakeNet) dials() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.dialed)
}

var originAddr = netip.MustParseAddr("203.0.113.10")

type harness struct {
	net     *fakeNet
	addr    string // the proxy's
	mu      sync.Mutex
	denials []Denial
}

func (h *harness) denied() []Denial {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.denials)
}

// newHarness runs origins (HTTP on 80 and 8080, HTTPS on 443, a raw echo
// on 7000) and a proxy allowing list.
func newHarness(t *testing.T, list ...string) *harness {
	t.Helper()
	return newHarnessNames(t, nil, list...)
}

// newHarnessNames is newHarness with names resolving as extra says too.
func newHarnessNames(t *testing.T, extra map[string][]netip.Addr, list ...string) *harness {
	t.Helper()
	return newHarnessToken(t, extra, "", list...)
}

// newHarnessToken is newHarnessNames with a listener that requires token
// (Policy.Token; none when empty).
func newHarnessToken(t *testing.T, extra map[string][]netip.Addr, token string, list ...string) *harness {
	t.Helper()
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "origin %s %s host=%s", r.Method, r.URL.Path, r.Host)
	}))
	t.Cleanup(plain.Close)
	secure := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "secure %s", r.URL.Path)
	}))
	t.Cleanup(secure.Close)
	fn := &fakeNet{
		names: map[string][]netip.Addr{
			"allowed.test":  {originAddr},
			"other.test":    {originAddr},
			"loop.test":     {netip.MustParseAddr("127.0.0.1")},
			"mapped.test":   {netip.MustParseAddr("::ffff:127.0.0.1")},
			"meta.test":     {netip.MustParseAddr("169.254.169.254")},
			"private.test":  {netip.MustParseAddr("10.0.0.7")},
			"self.test":     {netip.MustParseAddr("198.18.0.5")},
			"mixed.test":    {netip.MustParseAddr("127.0.0.1"), originAddr},
			"a.wild.test":   {originAddr},
			"wild.test":     {originAddr},
			"rebind.test":   {netip.MustParseAddr("127.0.0.1")},
			"denied.test":   {originAddr},
			"localhost":     {netip.MustParseAddr("127.0.0.1")},
			"metadata.test": {netip.MustParseAddr("fe80::1")},
		},
		origins: map[uint16]string{80: plain.Listener.Addr().String(), 8080: plain.Listener.Addr().String(),
			443: secure.Listener.Addr().String()},
	}
	maps.Copy(fn.names, extra)
	l, err := ParseList(list)
	if err != nil {
		t.Fatal(err)
	}
	p := New(Config{Resolver: fn, Dial: fn.dial, AddrFilter: &AddrFilter{LocalAddrs: func() ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("198.18.0.5")}, nil
	}}, DialTimeout: 5 * time.Second})
	t.Cleanup(func() { _ = p.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{net: fn, addr: ln.Addr().String()}
	if _, err := p.Serve(ln, Policy{List: l, Token: token, Deny: func(d Denial) {
		h.mu.Lock()
		h.denials = append(h.denials, d)
		h.mu.Unlock()
	}}); err != nil {
		t.Fatal(err)
	}
	return h
}

func needCurl(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed (.ci/install-test-deps.sh installs it)")
	}
	return p
}

// curl runs curl with args and returns its output and whether it
// succeeded.
func curl(t *testing.T, args ...string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, needCurl(t), append([]string{"-sSf", "--max-time", "8"}, args...)...).CombinedOutput()
	return string(out), err == nil
}

func wantDenial(t *testing.T, h *harness, op, target, rule string) {
	t.Helper()
	for _, d := range h.denied() {
		if d.Op == op && d.Target == target && strings.Contains(d.Rule, rule) {
			return
		}
	}
	t.Errorf("denials: got %+v, want {%s %s %q}", h.denied(), op, target, rule)
}

func TestProxyCurlAllowed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "allowed.test", "allowed.test:8080", "*.wild.test")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"connect", []string{"-k", "-x", "http://" + h.addr, "https://allowed.test/a"}, "secure /a"},
		{"plain", []string{"-x", "http://" + h.addr, "http://allowed.test/b"}, "origin GET /b host=allowed.test"},
		{"plain port", []string{"-x", "http://" + h.addr, "http://allowed.test:8080/c"}, "origin GET /c host=allowed.test:8080"},
		{"connect http", []string{"-p", "-x", "http://" + h.addr, "http://allowed.test/d"}, "origin GET /d"},
		{"socks5h", []string{"-k", "--socks5-hostname", h.addr, "https://allowed.test/e"}, "secure /e"},
		{"wildcard", []string{"-k", "-x", "http://" + h.addr, "https://a.wild.test/f"}, "secure /f"},
		{"post", []string{"-x", "http://" + h.addr, "-d", "x=1", "http://allowed.test/g"}, "origin POST /g"},
	} {
		out, ok := curl(t, c.args...)
		if !ok || !strings.Contains(out, c.want) {
			t.Errorf("%s: got %q (ok %v), want %q", c.name, out, ok, c.want)
		}
	}
	if d := h.denied(); len(d) != 0 {
		t.Errorf("denials: got %+v, want none", d)
	}
}

func TestProxyCurlRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "allowed.test", "loop.test", "mapped.test", "meta.test", "private.test", "self.test",
		"metadata.test", "*.wild.test", "localhost")
	for _, c := range []struct {
		name             string
		args             []string
		op, target, rule string
	}{
		{"unlisted", []string{"-x", "http://" + h.addr, "https://denied.test/"}, "connect", "denied.test:443", RuleNotListed},
		{"unlisted plain", []string{"-x", "http://" + h.addr, "http://denied.test/"}, "connect", "denied.test:80", RuleNotListed},
		{"unlisted socks", []string{"--socks5-hostname", h.addr, "https://denied.test/"}, "connect", "denied.test:443", RuleNotListed},
		{"port", []string{"-x", "http://" + h.addr, "https://allowed.test:8443/"}, "connect", "allowed.test:8443", RulePortNotAllowed},
		{"socks port", []string{"--socks5-hostname", h.addr, "http://allowed.test:25/"}, "connect", "allowed.test:25", RulePortNotAllowed},
		{"ip of allowed", []string{"-x", "http://" + h.addr, "https://203.0.113.10/"}, "connect", "203.0.113.10:443", RuleNotListed},
		{"loopback name", []string{"-x", "http://" + h.addr, "https://loop.test/"}, "resolve", "loop.test:443", "loopback"},
		{"localhost", []string{"-x", "http://" + h.addr, "http://localhost/"}, "resolve", "localhost:80", "loopback"},
		{"mapped", []string{"-x", "http://" + h.addr, "https://mapped.test/"}, "resolve", "mapped.test:443", "loopback"},
		{"mapped literal", []string{"-x", "http://" + h.addr, "https://[::ffff:127.0.0.1]/"}, "connect", "127.0.0.1:443", RuleNotListed},
		{"metadata", []string{"-x", "http://" + h.addr, "http://meta.test/"}, "resolve", "meta.test:80", "metadata"},
		{"metadata literal", []string{"-x", "http://" + h.addr, "http://169.254.169.254/"}, "connect", "169.254.169.254:80", RuleNotListed},
		{"link-local", []string{"-x", "http://" + h.addr, "http://metadata.test/"}, "resolve", "metadata.test:80", "link-local"},
		{"private", []string{"-x", "http://" + h.addr, "http://private.test/"}, "resolve", "private.test:80", "private"},
		{"this host", []string{"-x", "http://" + h.addr, "http://self.test/"}, "resolve", "self.test:80", "this host"},
		{"wildcard apex", []string{"-x", "http://" + h.addr, "https://wild.test/"}, "connect", "wild.test:443", RuleNotListed},
	} {
		out, ok := curl(t, c.args...)
		if ok {
			t.Errorf("%s: got success %q, want a refusal", c.name, out)
		}
		wantDenial(t, h, c.op, c.target, c.rule)
	}
	for _, d := range h.net.dials() {
		if !strings.HasPrefix(d, originAddr.String()+":") {
			t.Errorf("dialled %s, want only the checked origin address", d)
		}
	}
}

// raw sends req on a new connection to the proxy and returns what comes
// back until the proxy closes it.
func raw(t *testing.T, h *harness, steps ...string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", h.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	var got strings.Builder
	for _, s := range steps {
		if _, err := io.WriteString(c, s); err != nil {
			break
		}
		// Read one response head (and a body by Content-Length) or until EOF.
		method, _, _ := strings.Cut(s, " ")
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			break
		}
		var b []byte
		if method != "CONNECT" || resp.StatusCode != 200 {
			b, _ = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		}
		_ = resp.Body.Close()
		fmt.Fprintf(&got, "%d %s|", resp.StatusCode, b)
	}
	rest, _ := io.ReadAll(br)
	got.Write(rest)
	return got.String()
}

func TestProxyHostHeaderDiffers(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "allowed.test", "other.test")
	got := raw(t, h, "GET http://allowed.test/ HTTP/1.1\r\nHost: denied.test\r\n\r\n")
	if !strings.HasPrefix(got, "403 ") {
		t.Errorf("got %q, want 403", got)
	}
	wantDenial(t, h, "connect", "allowed.test:80", RuleHostMismatch)
	// Two Host lines, one matching.
	got = raw(t, h, "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nHost: other.test\r\n\r\n")
	if strings.Contains(got, "origin") {
		t.Errorf("two Host headers: got %q, want no origin response", got)
	}
	// Second request on a kept-alive forward names another Host.
	got = raw(t, h, "GET http://allowed.test/1 HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
		"GET http://allowed.test/2 HTTP/1.1\r\nHost: other.test\r\n\r\n")
	if !strings.Contains(got, "origin GET /1") || strings.Contains(got, "/2") {
		t.Errorf("keep-alive: got %q, want only /1 served", got)
	}
}

func TestProxyNestedConnect(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "allowed.test")
	// CONNECT inside a CONNECT tunnel to an allowed host.
	got := raw(t, h, "CONNECT allowed.test:80 HTTP/1.1\r\nHost: allowed.test:80\r\n\r\n",
		"CONNECT denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n")
	if !strings.HasPrefix(got, "200 ") || strings.Count(got, "|") != 1 {
		t.Errorf("nested CONNECT: got %q, want the tunnel's 200 and then a closed connection", got)
	}
	wantDenial(t, h, "connect", "denied.test:443", RuleNestedConnect)
	// CONNECT on a kept-alive plain forward.
	got = raw(t, h, "GET http://allowed.test/1 HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
		"CONNECT denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n")
	if !strings.Contains(got, "origin GET /1") || strings.Count(got, "|") != 1 {
		t.Errorf("CONNECT after a forward: got %q, want /1 and then a closed connection", got)
	}
	// Plain HTTP inside a tunnel, naming another Host.
	got = raw(t, h, "CONNECT allowed.test:80 HTTP/1.1\r\n\r\n", "GET / HTTP/1.1\r\nHost: denied.test\r\n\r\n")
	if strings.Contains(got, "origin") {
		t.Errorf("Host in tunnel: got %q, want no origin response", got)
	}
	wantDenial(t, h, "connect", "allowed.test:80", RuleHostMismatch)
	// And the control: plain HTTP inside a tunnel to its own host works.
	got = raw(t, h, "CONNECT allowed.test:80 HTTP/1.1\r\n\r\n", "GET /ok HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n")
	if !strings.Contains(got, "origin GET /ok") {
		t.Errorf("control: got %q, want the origin's answer", got)
	}
}

func TestProxyServerNameDiffers(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "allowed.test")
	for _, c := range []struct {
		sni  string
		want bool
	}{{"allowed.test", true}, {"denied.test", false}} {
		conn, err := net.DialTimeout("tcp", h.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = io.WriteString(conn, "CONNECT allowed.test:443 HTTP/1.1\r\n\r\n")
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("CONNECT: got %v %v, want 200", resp, err)
		}
		tc := tls.Client(conn, &tls.Config{ServerName: c.sni, InsecureSkipVerify: true})
		err = tc.Handshake()
		_ = conn.Close()
		if (err == nil) != c.want {
			t.Errorf("SNI %s: got handshake error %v, want success %v", c.sni, err, c.want)
		}
	}
	wantDenial(t, h, "connect", "allowed.test:443", RuleServerName)
}

func TestProxySOCKSCommands(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "allowed.test")
	for _, c := range []struct {
		name string
		cmd  byte
		want byte
	}{{"udp associate", 3, 7}, {"bind", 2, 7}, {"connect", 1, 0}} {
		conn, err := net.DialTimeout("tcp", h.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		msg := []byte{5, 1, 0, 5, c.cmd, 0, 3, byte(len("allowed.test"))}
		msg = append(append(msg, "allowed.test"...), 0, 80)
		_, _ = conn.Write(msg)
		reply := make([]byte, 12)
		_, err = io.ReadFull(conn, reply)
		_ = conn.Close()
		if err != nil || reply[3] != c.want {
			t.Errorf("%s: got %v %v, want reply code %d", c.name, reply, err, c.want)
		}
	}
	wantDenial(t, h, "connect", "allowed.test:80", RuleSOCKSCommand)
}

func TestProxyCloseEndsTunnels(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "allowed.test")
	l, err := ParseList([]string{"allowed.test"})
	if err != nil {
		t.Fatal(err)
	}
	p := New(Config{Resolver: h.net, Dial: h.net.dial, AddrFilter: &AddrFilter{LocalAddrs: func() ([]netip.Addr, error) { return nil, nil }}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis, err := p.Serve(ln, Policy{List: l})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(conn, "CONNECT allowed.test:80 HTTP/1.1\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: got %v %v, want 200", resp, err)
	}
	if err := lis.Close(); err != nil {
		t.Errorf("Close: got %v, want nil", err)
	}
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Errorf("read after Close: got nil, want the tunnel closed")
	}
	_ = p.Close()
	if _, err := p.Serve(ln, Policy{List: l}); !errors.Is(err, ErrClosed) {
		t.Errorf("Serve after Close: got %v, want ErrClosed", err)
	}
}

func TestProxyHeadTooLarge(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "allowed.test")
	got := raw(t, h, "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nX: "+strings.Repeat("a", 40<<10)+"\r\n\r\n")
	if !strings.HasPrefix(got, "400 ") || !strings.Contains(got, "too large") {
		t.Errorf("got %.80q, want 400 naming the size", got)
	}
	if len(h.net.dials()) != 0 {
		t.Errorf("dialled %v, want nothing", h.net.dials())
	}
}

// TestProxyTunnelTricks: a ClientHello split across records (which could
// hide its server name) is refused, and an Upgrade inside a tunnel does
// not turn the rest of the tunnel into unread bytes.
func TestProxyTunnelTricks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "allowed.test")
	// A record holding only the start of a ClientHello.
	got := raw(t, h, "CONNECT allowed.test:443 HTTP/1.1\r\n\r\n", string([]byte{0x16, 3, 1, 0, 6, 1, 0, 2, 0, 3, 3}))
	if got != "200 |" {
		t.Errorf("split ClientHello: got %q, want the tunnel closed after its 200", got)
	}
	wantDenial(t, h, "connect", "allowed.test:443", RuleUnreadableHello)
	got = raw(t, h, "CONNECT allowed.test:80 HTTP/1.1\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: allowed.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
		"CONNECT denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n")
	if strings.Count(got, "|") > 2 {
		t.Errorf("upgrade: got %q, want no answer to the inner CONNECT", got)
	}
	wantDenial(t, h, "connect", "denied.test:443", RuleNestedConnect)
}

// TestProxyPercentEncodedNames: a name is checked and resolved in one
// spelling, so a percent-encoded one is refused wherever a client can
// put it (net/http refuses most escapes in a CONNECT authority or a URL's
// host and decodes only bytes above 0x7f, which ParseTarget refuses; a
// Host header and a SOCKS name reach ParseTarget raw), and nothing is
// dialled. "allowed.test" is listed; TestProxyCurlAllowed reaches it
// unencoded.
func TestProxyPercentEncodedNames(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "allowed.test")
	for _, c := range []struct{ name, req string }{
		{"CONNECT", "CONNECT allowed%2etest:443 HTTP/1.1\r\nHost: allowed%2etest:443\r\n\r\n"},
		{"CONNECT escaped letter", "CONNECT %61llowed.test:443 HTTP/1.1\r\n\r\n"},
		{"CONNECT escaped high byte", "CONNECT allowed.test%c3%a9:443 HTTP/1.1\r\n\r\n"},
		{"URL", "GET http://allowed%2etest/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n"},
		{"URL escaped percent", "GET http://allowed.test%25/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n"},
		{"Host", "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed%2etest\r\n\r\n"},
	} {
		got := raw(t, h, c.req)
		if !strings.HasPrefix(got, "400 ") && !strings.HasPrefix(got, "403 ") {
			t.Errorf("%s: got %q, want 400 or 403", c.name, got)
		}
	}
	conn, err := net.DialTimeout("tcp", h.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	name := "allowed%2etest"
	msg := append([]byte{5, 1, 0, 5, 1, 0, 3, byte(len(name))}, name...)
	_, _ = conn.Write(append(msg, 0, 80))
	reply := make([]byte, 12)
	if _, err := io.ReadFull(conn, reply); err != nil || reply[3] == 0 {
		t.Errorf("SOCKS: got %v %v, want a refusal", reply, err)
	}
	if d := h.net.dials(); len(d) != 0 {
		t.Errorf("dialled %v, want nothing", d)
	}
}
