package egress

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestParseListRefuses(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"", "*", "*:443", "*.com", "a.*.com", "exa mple.com", "example.com:0", "example.com:65536",
		"example.com:+1", "example.com:x", "-a.com", "a-.com", "a..com", "127.0.0.1", "::1", "[::1]:80",
		"169.254.169.254", "0.0.0.0", "0.0.0.0/0", "::/0", "224.0.0.1", "fe80::1", "10.0.0.1/8",
		"::ffff:127.0.0.1", "user@example.com", "http://example.com", "example.com/path", "1.2.3",
		"2130706433", "bücher.de", "[fd00::1", "[fd00::1]x", "fe80::1%eth0", "64:ff9b::7f00:1",
		strings.Repeat("a", 64) + ".com",
	} {
		if _, err := ParseList([]string{s}); !errors.Is(err, ErrBadEntry) || !strings.Contains(err.Error(), s) {
			t.Errorf("ParseList(%q): got %v, want ErrBadEntry naming it", s, err)
		}
	}
}

// TestParseTargetRefuses: a target is one spelling of one name, so what
// the list checks is what the proxy resolves (rooted). Percent-encoding
// is not decoded and refused (net/http refuses most of it in a CONNECT
// authority or URL before ParseTarget sees it; a Host header and a SOCKS
// name arrive raw), as is more than one trailing dot.
func TestParseTargetRefuses(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"example.com..:443", ".:443", ".example.com:443", "exa%6dple.com:443", "example.com%2e:443",
		"example%2ecom:443", "%65xample.com:443", "example.com.%00:443", "example.com\x00:443",
		"example.com :443", "ex ample.com:443", "example.com:443.",
	} {
		if tg, err := ParseTarget(s); err == nil {
			t.Errorf("ParseTarget(%q): got %+v, want an error", s, tg)
		}
	}
	for s, want := range map[string]string{"EXAMPLE.Com.:443": "example.com:443", "a.B.c.:80": "a.b.c:80"} {
		if tg, err := ParseTarget(s); err != nil || tg.String() != want {
			t.Errorf("ParseTarget(%q): got %v %v, want %s", s, tg, err, want)
		}
	}
}

func TestListAllows(t *testing.T) {
	t.Parallel()
	l, err := ParseList([]string{
		"example.com", "Go.Dev.", "git.example.org:8443", "*.cdn.example.net", "*.api.example.io:9000",
		"203.0.113.7", "198.51.100.0/24:8080", "10.1.0.0/16", "[2001:db8::1]:22", "2001:db8:1::/48",
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		target string
		want   bool
	}{
		{"example.com:443", true},
		{"example.com:80", true},
		{"EXAMPLE.com.:443", true},
		{"example.com:22", false},
		{"www.example.com:443", false},
		{"go.dev:443", true},
		{"git.example.org:8443", true},
		{"git.example.org:443", false},
		{"a.cdn.example.net:443", true},
		{"a.b.cdn.example.net:80", true},
		{"cdn.example.net:443", false},
		{"A.CDN.Example.NET.:443", true},
		{"cdn.example.net.:443", false}, // a trailing dot does not make the apex a subdomain
		{"xcdn.example.net.:443", false},
		{"example.com..:443", false}, // refused by ParseTarget (TestParseTargetRefuses)
		{"xcdn.example.net:443", false},
		{"v1.api.example.io:9000", true},
		{"v1.api.example.io:443", false},
		{"203.0.113.7:443", true},
		{"[::ffff:203.0.113.7]:443", true},
		{"203.0.113.7:22", false},
		{"203.0.113.8:443", false},
		{"198.51.100.9:8080", true},
		{"198.51.100.9:443", false},
		{"10.1.2.3:80", true},
		{"10.2.0.1:80", false},
		{"[2001:db8::1]:22", true},
		{"[2001:db8::1]:443", false},
		{"[2001:db8:1::5]:443", true},
		{"93.184.216.34:443", false}, // an IP literal is never allowed by a name
	} {
		tg, err := ParseTarget(c.target)
		if err != nil {
			if !c.want {
				continue
			}
			t.Fatalf("ParseTarget(%q): %v", c.target, err)
		}
		if got := l.Allows(tg); got != c.want {
			t.Errorf("Allows(%s): got %v, want %v", c.target, got, c.want)
		}
	}
}

func TestAddrFilterCheck(t *testing.T) {
	t.Parallel()
	l, err := ParseList([]string{"10.9.0.0/16", "fd00:1::/32"})
	if err != nil {
		t.Fatal(err)
	}
	g := &AddrFilter{LocalAddrs: func() ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("198.18.0.5"), netip.MustParseAddr("2001:db8:5::1")}, nil
	}}
	for _, c := range []struct {
		addr string
		want string // a part of the rule; "" for allowed
	}{
		{"127.0.0.1", "loopback"},
		{"127.5.5.5", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "loopback"},
		{"64:ff9b::7f00:1", "loopback"},
		{"169.254.169.254", "metadata"},
		{"169.254.1.1", "link-local"},
		{"fe80::1", "link-local"},
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "unspecified"},
		{"::", "unspecified"},
		{"224.0.0.251", "multicast"},
		{"ff02::1", "multicast"},
		{"198.18.0.5", "this host"},
		{"2001:db8:5::1", "this host"},
		{"10.0.0.1", "private"},
		{"192.168.1.1", "private"},
		{"172.16.0.1", "private"},
		{"fd12::1", "private"},
		{"10.9.3.4", ""},
		{"fd00:1::9", ""},
		{"100.64.0.1", "private"}, // shared address space
		{"192.0.0.8", "private"},  // IETF protocol assignments
		{"240.0.0.1", "private"},  // reserved
		{"fec0::1", "private"},    // deprecated site-local
		{"5f00::1", "private"},    // SRv6 segment identifiers
		{"2002:a00:1::1", "private address (10.0.0.1; name the IP or CIDR in AllowHosts to allow it) (10.0.0.1 inside 6to4 2002:a00:1::1)"},
		{"203.0.113.80", ""}, // documentation range: the registries here
		{"192.0.2.1", ""},
		{"2001:db8::1", ""},
		{"3fff::1", ""},
		{"198.19.0.1", ""}, // benchmarking: fake-IP DNS answers in it
		{"2001:2::1", ""},
		{"100::1", ""},          // discard-only
		{"192.88.99.1", ""},     // deprecated 6to4 relay anycast
		{"192.31.196.1", ""},    // AS112, globally reachable
		{"2001:1::1", ""},       // PCP anycast, globally reachable
		{"2001:20::1", ""},      // ORCHIDv2, globally reachable
		{"2002:c000:201::", ""}, // 6to4 of 192.0.2.1
		{"198.51.100.1", ""},
		{"93.184.216.34", ""},
	} {
		got := g.Check(netip.MustParseAddr(c.addr), l)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("Check(%s): got %q, want a rule containing %q", c.addr, got, c.want)
		}
	}
}

// FuzzParseList checks that an entry either fails with ErrBadEntry or
// allows nothing a bare * would and never an always-refused address.
func FuzzParseList(f *testing.F) {
	for _, s := range []string{"example.com", "*.example.com:8443", "10.0.0.0/8", "[::1]:80", "*", "a.b", "::ffff:1.2.3.4"} {
		f.Add(s, "x.example.com:443")
	}
	f.Fuzz(func(t *testing.T, entry, target string) {
		l, err := ParseList([]string{entry})
		if err != nil {
			if !errors.Is(err, ErrBadEntry) {
				t.Fatalf("ParseList(%q): got %v, want ErrBadEntry", entry, err)
			}
			return
		}
		// The list may contain such an address (a wide CIDR); the filter,
		// which every dial passes, never lets it through.
		g := &AddrFilter{LocalAddrs: func() ([]netip.Addr, error) { return nil, nil }}
		for _, probe := range []string{"127.0.0.1:443", "[::1]:443", "169.254.169.254:80", "0.0.0.0:443", "[::ffff:127.0.0.1]:443", target} {
			tg, err := ParseTarget(probe)
			if err != nil {
				continue
			}
			if a, ok := tg.Addr(); ok && l.Allows(tg) && alwaysRefused(a) != "" && g.Check(a, l) == "" {
				t.Fatalf("entry %q lets %s through", entry, probe)
			}
		}
		var probes int
		for _, e := range l.entries {
			probes += len(e.ports)
			if e.isPrefix && e.prefix.Bits() == 0 {
				t.Fatalf("entry %q allows every address", entry)
			}
		}
		if probes == 0 {
			t.Fatalf("entry %q has no port", entry)
		}
	})
}
