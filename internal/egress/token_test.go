package egress

import (
	"bufio"
	"encoding/base64"
	"io"
	"net"
	"net/http"
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
