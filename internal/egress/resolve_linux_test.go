package egress

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// resolvConfEnv names, in the child TestProxyResolvesRooted starts, the
// directory holding the resolv.conf and hosts to bind over /etc's.
const resolvConfEnv = "AGENTPROC_EGRESS_TEST_RESOLV_DIR"

// TestProxyResolvesRooted runs the proxy as the Manager makes it
// (net.DefaultResolver) under a Kubernetes pod's resolv.conf (ndots:5 and
// a cluster search list), once with Go's resolver and once with the C
// library's, in a child with its own mount and network namespaces: test
// files are bound over /etc/resolv.conf and /etc/hosts there and the
// test's DNS server listens on that namespace's 127.0.0.1:53, so the
// machine's files and port are untouched. The server answers each listed
// name's cluster form (example.com.default.svc.cluster.local, a service
// the list never named) with a cluster address: an allowed name, however
// the tree spells it (upper case, a trailing dot; CONNECT, plain HTTP,
// SOCKS), must reach only the name's own address, from DNS or the hosts
// file, and the server must never be asked for a search-list name.
func TestProxyResolvesRooted(t *testing.T) {
	if dir := os.Getenv(resolvConfEnv); dir != "" {
		resolveRootedChild(t, dir)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for private mount and network namespaces (CI runs it as root)")
	}
	dir := t.TempDir()
	for name, text := range map[string]string{
		"resolv.conf": "nameserver 127.0.0.1\n" +
			"search default.svc.cluster.local svc.cluster.local cluster.local\n" +
			"options ndots:5 timeout:2 attempts:1\n",
		"hosts": "127.0.0.1 localhost\n" + pinnedAddr.String() + " mirror.example.com mirror\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// netdns=cgo makes net.DefaultResolver the C library's getaddrinfo;
	// the other run leaves Go its default choice (Go's resolver here).
	for _, godebug := range []string{"", "netdns=cgo"} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestProxyResolvesRooted$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), resolvConfEnv+"="+dir, "GODEBUG="+godebug)
		// Go's fork makes the new mount namespace private (MS_REC|MS_PRIVATE
		// on /) before the exec, so the child's bind mounts stay its own.
		cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWNET}
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil || !bytes.Contains(out, []byte("--- PASS: TestProxyResolvesRooted")) {
			t.Errorf("child with GODEBUG=%s: got %v, want a pass:\n%s", godebug, err, out)
		}
	}
}

var (
	rootedAddr  = netip.MustParseAddr("192.0.2.7")    // example.com. in DNS
	pinnedAddr  = netip.MustParseAddr("192.0.2.9")    // mirror.example.com and mirror in the hosts file
	clusterAddr = netip.MustParseAddr("198.51.100.7") // every name.default.svc.cluster.local. in DNS
)

func resolveRootedChild(t *testing.T, dir string) {
	for _, name := range []string{"resolv.conf", "hosts"} {
		if err := unix.Mount(filepath.Join(dir, name), "/etc/"+name, "", unix.MS_BIND, ""); err != nil {
			t.Fatalf("bind the test's %s over /etc/%s: %v", name, name, err)
		}
	}
	if err := loopbackUp(); err != nil {
		t.Fatalf("bring up the namespace's loopback: %v", err)
	}
	names := map[string]netip.Addr{"example.com.": rootedAddr}
	for _, n := range []string{"example.com", "mirror.example.com", "mirror", "nowhere.example.com", "localhost"} {
		names[n+".default.svc.cluster.local."] = clusterAddr
	}
	dns := startTestDNS(t, names)

	var mu sync.Mutex
	var dialed []string
	p := New(Config{
		Dial: func(_ context.Context, _, addr string) (net.Conn, error) {
			mu.Lock()
			dialed = append(dialed, addr)
			mu.Unlock()
			return nil, errors.New("test: not dialled")
		},
		AddrFilter:  &AddrFilter{LocalAddrs: func() ([]netip.Addr, error) { return nil, nil }},
		DialTimeout: 10 * time.Second,
	})
	defer func() { _ = p.Close() }()
	l, err := ParseList([]string{"example.com", "mirror.example.com", "mirror", "nowhere.example.com", "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Serve(ln, Policy{List: l}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, send string
		want       []string // nil: nothing dialled
	}{
		{"CONNECT", "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", []string{"192.0.2.7:443"}},
		{"CONNECT upper case, trailing dot", "CONNECT EXAMPLE.Com.:443 HTTP/1.1\r\nHost: EXAMPLE.Com.:443\r\n\r\n", []string{"192.0.2.7:443"}},
		{"plain HTTP", "GET http://Example.COM./ HTTP/1.1\r\nHost: example.com.\r\n\r\n", []string{"192.0.2.7:80"}},
		{"SOCKS", "socks:Example.com.", []string{"192.0.2.7:443"}},
		{"hosts file", "CONNECT mirror.example.com:443 HTTP/1.1\r\n\r\n", []string{"192.0.2.9:443"}},
		{"hosts file, one label", "CONNECT mirror:443 HTTP/1.1\r\n\r\n", []string{"192.0.2.9:443"}},
		{"NXDOMAIN", "CONNECT nowhere.example.com:443 HTTP/1.1\r\n\r\n", nil},
		{"hosts file loopback", "CONNECT localhost:443 HTTP/1.1\r\n\r\n", nil},
	} {
		mu.Lock()
		dialed = nil
		mu.Unlock()
		status := send(t, ln.Addr().String(), c.send)
		mu.Lock()
		got := slices.Clone(dialed)
		mu.Unlock()
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: dialled %v, want %v (never the cluster address %s)", c.name, got, c.want, clusterAddr)
		}
		if c.name == "hosts file loopback" && status != "403" {
			t.Errorf("%s: got %s, want 403 (resolves to a loopback address)", c.name, status)
		}
	}
	for _, q := range dns.questions() {
		if strings.HasSuffix(q, ".cluster.local.") {
			t.Errorf("the DNS server was asked for %q, want no search-list name", q)
		}
	}
}

// send writes req to the proxy at addr (a SOCKS5 CONNECT to port 443 for
// "socks:name") and returns the HTTP status or SOCKS reply code.
func send(t *testing.T, addr, req string) string {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	if name, ok := strings.CutPrefix(req, "socks:"); ok {
		msg := append([]byte{5, 1, 0, 5, 1, 0, 3, byte(len(name))}, name...)
		_, _ = conn.Write(append(msg, 1, 187))
		reply := make([]byte, 12)
		if _, err := io.ReadFull(conn, reply); err != nil {
			return err.Error()
		}
		return "socks " + strconv.Itoa(int(reply[3]))
	}
	_, _ = io.WriteString(conn, req)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return err.Error()
	}
	_ = resp.Body.Close()
	return strconv.Itoa(resp.StatusCode)
}

// loopbackUp sets the network namespace's lo up (a new namespace has it
// down, with 127.0.0.1 already assigned).
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// testDNS is a DNS server on 127.0.0.1:53 (UDP) that answers A queries for
// its names and NXDOMAIN for others, and records each name it is asked.
type testDNS struct {
	mu    sync.Mutex
	asked []string
}

func (s *testDNS) questions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.asked)
}

func startTestDNS(t *testing.T, names map[string]netip.Addr) *testDNS {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:53")
	if err != nil {
		t.Fatal(err)
	}
	s := &testDNS{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if reply := s.answer(buf[:n], names); reply != nil {
				_, _ = pc.WriteTo(reply, from)
			}
		}
	}()
	t.Cleanup(func() { _ = pc.Close(); <-done })
	return s
}

// answer builds the reply to query q: its header and question echoed,
// then an A record for a known name's A query (NOERROR and no answer for
// its other types, NXDOMAIN for an unknown name).
func (s *testDNS) answer(q []byte, names map[string]netip.Addr) []byte {
	if len(q) < 12 || binary.BigEndian.Uint16(q[4:]) != 1 {
		return nil
	}
	var name strings.Builder
	i := 12
	for i < len(q) && q[i] != 0 {
		n := int(q[i])
		if n > 63 || i+1+n > len(q) {
			return nil
		}
		name.Write(q[i+1 : i+1+n])
		name.WriteByte('.')
		i += 1 + n
	}
	end := i + 5 // the root label, QTYPE, QCLASS
	if end > len(q) {
		return nil
	}
	qname := strings.ToLower(name.String())
	s.mu.Lock()
	s.asked = append(s.asked, qname)
	s.mu.Unlock()
	qtype := binary.BigEndian.Uint16(q[i+1:])
	r := append([]byte{}, q[:end]...)
	flags := uint16(0x8180) // a response, recursion desired and available
	a, known := names[qname]
	switch {
	case !known:
		flags |= 3 // NXDOMAIN
		binary.BigEndian.PutUint16(r[6:], 0)
	case qtype == 1:
		binary.BigEndian.PutUint16(r[6:], 1)
		v4 := a.As4()
		r = append(r, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4)
		r = append(r, v4[:]...)
	default:
		binary.BigEndian.PutUint16(r[6:], 0)
	}
	binary.BigEndian.PutUint16(r[2:], flags)
	binary.BigEndian.PutUint16(r[8:], 0)  // NSCOUNT
	binary.BigEndian.PutUint16(r[10:], 0) // ARCOUNT: the query's OPT record is dropped
	return r
}
