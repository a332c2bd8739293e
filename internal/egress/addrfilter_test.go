package egress

import (
	"net/netip"
	"strings"
	"testing"
)

// carried is an IPv6 address and an IPv4 address it carries.
type carried struct{ v6, v4 string }

// checkCarried is the test of an IPv6 form that carries IPv4 addresses:
// each of refused is refused with the rule its IPv4 address gets, naming
// that address inside form and the IPv6 address (the control: the IPv4 address alone is refused), also
// when a listed name resolves to it through the proxy, which records the
// denial; named is dialled when AllowHosts names 10.0.0.0/8, the range of
// the only address it carries that is refused; open, which carries public
// addresses, is dialled.
func checkCarried(t *testing.T, form string, refused []carried, named, open string) {
	t.Helper()
	g := &AddrFilter{LocalAddrs: func() ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr("198.18.0.5")}, nil }}
	l, err := ParseList([]string{"attacker.test"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range refused {
		want := g.Check(netip.MustParseAddr(c.v4), l)
		if want == "" {
			t.Fatalf("control: %s is dialled for a name the list allows; want it refused", c.v4)
		}
		want += " (" + c.v4 + " inside " + form + " " + c.v6 + ")"
		if got := g.Check(netip.MustParseAddr(c.v6), l); got != want {
			t.Errorf("Check(%s), %s of %s: got %q, want %q", c.v6, form, c.v4, got, want)
		}
	}
	withTen, err := ParseList([]string{"attacker.test", "10.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	if got := g.Check(netip.MustParseAddr(named), l); got == "" {
		t.Errorf("Check(%s) without 10.0.0.0/8 listed: got dialled, want refused", named)
	}
	if got := g.Check(netip.MustParseAddr(named), withTen); got != "" {
		t.Errorf("Check(%s) with 10.0.0.0/8 listed: got %q, want dialled", named, got)
	}
	if got := g.Check(netip.MustParseAddr(open), l); got != "" {
		t.Errorf("Check(%s), public addresses inside %s: got %q, want dialled", open, form, got)
	}

	names := map[string][]netip.Addr{}
	for i, c := range refused {
		names["carried"+string(rune('a'+i))+".test"] = []netip.Addr{netip.MustParseAddr(c.v6)}
	}
	var list []string
	for n := range names {
		list = append(list, n)
	}
	h := newHarnessNames(t, names, list...)
	for i, c := range refused {
		name := "carried" + string(rune('a'+i)) + ".test"
		if got := raw(t, h, "CONNECT "+name+":443 HTTP/1.1\r\nHost: "+name+":443\r\n\r\n"); strings.HasPrefix(got, "200 ") {
			t.Errorf("CONNECT %s (%s, %s of %s): got %q, want a refusal", name, c.v6, form, c.v4, got)
		}
		wantDenial(t, h, "resolve", name+":443", "("+c.v4+" inside "+form+" "+c.v6+")")
	}
	if d := h.net.dials(); len(d) != 0 {
		t.Errorf("dialled %v, want nothing", d)
	}
}

// TestAddrFilter6to4: an address in 2002::/16 reaches the IPv4 address in
// its bits 16–47 through a 6to4 relay or Linux's sit device, and was
// dialled whatever that address was (the sixth attack review's note).
func TestAddrFilter6to4(t *testing.T) {
	t.Parallel()
	checkCarried(t, "6to4", []carried{
		{"2002:a00:5::1", "10.0.0.5"},
		{"2002:c0a8:101:1::1", "192.168.1.1"},
		{"2002:6440:1::1", "100.64.0.1"},
		{"2002:7f00:1::1", "127.0.0.1"},
		{"2002:a9fe:a9fe::1", "169.254.169.254"},
		{"2002:c612:5::1", "198.18.0.5"}, // this host
	}, "2002:a00:5::1", "2002:c000:204::1")
}

// TestAddrFilterTeredo: an address in 2001::/32 carries the Teredo
// server's IPv4 address in bits 32–63 and the client's, inverted, in the
// last 32; either is where a relay sends packets, and both were ignored.
func TestAddrFilterTeredo(t *testing.T) {
	t.Parallel()
	checkCarried(t, "Teredo", []carried{
		{"2001:0:a00:5:8000:63bf:3fff:fdd2", "10.0.0.5"},     // server; the client 192.0.2.45
		{"2001:0:4136:e378:8000:63bf:f5ff:fffa", "10.0.0.5"}, // client; the server 65.54.227.120
		{"2001:0:4136:e378:8000:63bf:80ff:fffe", "127.0.0.1"},
		{"2001:0:7f00:1:8000:63bf:3fff:fdd2", "127.0.0.1"},
		{"2001:0:4136:e378:8000:63bf:5601:5601", "169.254.169.254"},
		{"2001:0:4136:e378:8000:63bf:39ed:fffa", "198.18.0.5"}, // this host
	}, "2001:0:4136:e378:8000:63bf:f5ff:fffa", "2001:0:4136:e378:8000:63bf:3fff:fdd2")
}

// TestAddrFilterIPv4Compatible: the deprecated IPv4-compatible form
// ::a.b.c.d (RFC 4291), which Linux's sit device tunnels to a.b.c.d, was
// judged as an IPv6 address and dialled for a private or own IPv4.
func TestAddrFilterIPv4Compatible(t *testing.T) {
	t.Parallel()
	checkCarried(t, "an IPv4-compatible address", []carried{
		{"::a00:5", "10.0.0.5"},
		{"::c0a8:101", "192.168.1.1"},
		{"::7f00:1", "127.0.0.1"},
		{"::a9fe:a9fe", "169.254.169.254"},
		{"::c612:5", "198.18.0.5"}, // this host
		{"::2", "0.0.0.2"},
	}, "::a00:5", "::c000:204")
	// ::1 and :: are named for what they are, not for what they carry.
	g := &AddrFilter{LocalAddrs: func() ([]netip.Addr, error) { return nil, nil }}
	for a, want := range map[string]string{"::1": "resolves to a loopback address", "::": "resolves to an unspecified address"} {
		if got := g.Check(netip.MustParseAddr(a), nil); got != want {
			t.Errorf("Check(%s): got %q, want %q", a, got, want)
		}
	}
}

// TestAddrFilterSharedAddressSpace: 100.64.0.0/10 (RFC 6598: carrier-grade
// NAT, every Tailscale address) is not routed on the internet, yet was
// dialled for any listed name that resolved into it; it is a private
// range now, reached only where AllowHosts names the IP or a CIDR holding
// it. The control: a public address next to it is dialled.
func TestAddrFilterSharedAddressSpace(t *testing.T) {
	t.Parallel()
	g := &AddrFilter{LocalAddrs: func() ([]netip.Addr, error) { return nil, nil }}
	l, err := ParseList([]string{"tailnet.test", "100.101.102.103"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ addr, want string }{
		{"100.64.0.1", "private"},
		{"100.100.1.1", "private"},
		{"100.127.255.254", "private"},
		{"::ffff:100.64.0.1", "private"},
		{"64:ff9b::6440:1", "private"}, // NAT64 of 100.64.0.1
		{"100.101.102.103", ""},        // named
		{"100.63.255.255", ""},         // public, below the range
		{"100.128.0.0", ""},            // public, above it
	} {
		got := g.Check(netip.MustParseAddr(c.addr), l)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("Check(%s): got %q, want a rule containing %q", c.addr, got, c.want)
		}
	}
	h := newHarnessNames(t, map[string][]netip.Addr{"tailnet.test": {netip.MustParseAddr("100.100.1.1")}}, "tailnet.test")
	if got := raw(t, h, "CONNECT tailnet.test:443 HTTP/1.1\r\nHost: tailnet.test:443\r\n\r\n"); strings.HasPrefix(got, "200 ") {
		t.Errorf("CONNECT tailnet.test (100.100.1.1): got %q, want a refusal", got)
	}
	wantDenial(t, h, "resolve", "tailnet.test:443", "private address")
	if d := h.net.dials(); len(d) != 0 {
		t.Errorf("dialled %v, want nothing", d)
	}
}
