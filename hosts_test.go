package agentproc_test

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/internal/egress"
)

// TestSandboxAllowHostsValidate checks that a bad entry is
// ErrInvalidRequest naming it, and that AllowHosts is refused under every
// other network.
func TestSandboxAllowHostsValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		sb   agentproc.Sandbox
		want string // "" for valid
	}{
		{agentproc.Sandbox{Network: agentproc.NetworkHosts, AllowHosts: []string{"example.com", "*.cdn.example.net:8443", "10.0.0.0/8"}}, ""},
		{agentproc.Sandbox{Network: agentproc.NetworkHosts, AllowHosts: []string{"example.com", "*"}}, `"*"`},
		{agentproc.Sandbox{Network: agentproc.NetworkHosts, AllowHosts: []string{"127.0.0.1"}}, `"127.0.0.1"`},
		{agentproc.Sandbox{Network: agentproc.NetworkHosts, AllowHosts: []string{"example.com:0"}}, `"example.com:0"`},
		{agentproc.Sandbox{Network: agentproc.NetworkPorts, AllowPorts: []int{443}, AllowHosts: []string{"example.com"}}, "AllowHosts"},
		{agentproc.Sandbox{AllowHosts: []string{"example.com"}}, "AllowHosts"},
		{agentproc.Sandbox{Network: agentproc.NetworkHosts, AllowPorts: []int{443}}, "AllowPorts"},
	} {
		err := c.sb.Validate()
		if c.want == "" {
			if err != nil {
				t.Errorf("%+v: got %v, want nil", c.sb, err)
			}
			continue
		}
		if !errors.Is(err, agentproc.ErrInvalidRequest) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want ErrInvalidRequest naming %s", c.sb, err, c.want)
		}
	}
}

// TestSandboxNarrowHosts checks Narrow's rule for AllowHosts: a request
// may name only what the base's list allows.
func TestSandboxNarrowHosts(t *testing.T) {
	t.Parallel()
	base := &agentproc.Sandbox{Network: agentproc.NetworkHosts, AllowHosts: []string{"*.example.com", "go.dev", "10.1.0.0/16:5432"}}
	for _, c := range []struct {
		req  *agentproc.Sandbox
		want []string // nil: loosened
	}{
		{&agentproc.Sandbox{Network: agentproc.NetworkHosts, AllowHosts: []string{"a.example.com", "*.b.example.com", "go.dev:443", "10.1.2.3:5432"}},
			[]string{"a.example.com", "*.b.example.com", "go.dev:443", "10.1.2.3:5432"}},
		{&agentproc.Sandbox{Network: agentproc.NetworkHosts}, base.AllowHosts},
		{&agentproc.Sandbox{}, base.AllowHosts},
		{&agentproc.Sandbox{Network: agentproc.NetworkHosts, AllowHosts: []string{"example.com"}}, nil},
		{&agentproc.Sandbox{Network: agentproc.NetworkHosts, AllowHosts: []string{"go.dev:22"}}, nil},
		{&agentproc.Sandbox{Network: agentproc.NetworkHosts, AllowHosts: []string{"10.0.0.0/8:5432"}}, nil},
		{&agentproc.Sandbox{Network: agentproc.NetworkHosts, AllowHosts: []string{"*.com"}}, nil},
		{&agentproc.Sandbox{Network: agentproc.NetworkHost}, nil},
		{&agentproc.Sandbox{Network: agentproc.NetworkPorts, AllowPorts: []int{443}}, nil},
	} {
		got, err := base.Narrow(c.req)
		if c.want == nil {
			if err == nil {
				t.Errorf("Narrow(%+v): got %+v, want an error", c.req, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got.AllowHosts, c.want) || got.Network != agentproc.NetworkHosts {
			t.Errorf("Narrow(%+v): got %+v, %v; want AllowHosts %v", c.req, got, err, c.want)
		}
	}
	none, err := base.Narrow(&agentproc.Sandbox{Network: agentproc.NetworkNone})
	if err != nil || none.Network != agentproc.NetworkNone || len(none.AllowHosts) != 0 {
		t.Errorf("Narrow to none: got %+v, %v; want none without AllowHosts", none, err)
	}
	if err := none.Validate(); err != nil {
		t.Errorf("Narrow to none: Validate: %v", err)
	}
}

// TestDenialHintCarriedIPv4: an IPv6 address refused for the private IPv4
// address it carries (NAT64, local-use NAT64, 6to4, Teredo,
// IPv4-compatible) got the hint for a name resolving to a private address,
// "add the host's IP address or CIDR", which names neither the IPv4
// address to list nor where it came from. The rule names both now, and the
// hint is the exact change; listing that address lets the filter dial it.
// A plain private address, which the hint did not name either, is named
// now too. The control: a carried loopback address is refused whatever
// the list says.
func TestDenialHintCarriedIPv4(t *testing.T) {
	t.Parallel()
	f := &egress.AddrFilter{LocalAddrs: func() ([]netip.Addr, error) { return nil, nil }}
	list, err := egress.ParseList([]string{"attacker.example"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ form, v6, v4 string }{
		{"NAT64", "64:ff9b::a01:203", "10.1.2.3"},
		{"NAT64", "64:ff9b:1::c0a8:101", "192.168.1.1"},
		{"6to4", "2002:a01:203::1", "10.1.2.3"},
		{"Teredo", "2001:0:a01:203:8000:63bf:3fff:fdd2", "10.1.2.3"},
		{"Teredo", "2001:0:4136:e378:8000:63bf:f5fe:fdfc", "10.1.2.3"},
		{"an IPv4-compatible address", "::a01:203", "10.1.2.3"},
	} {
		rule := f.Check(netip.MustParseAddr(c.v6), list)
		if want := "(" + c.v4 + " inside " + c.form + " " + c.v6 + ")"; !strings.Contains(rule, want) {
			t.Errorf("Check(%s): got rule %q, want it naming %q", c.v6, rule, want)
		}
		d := agentproc.Denial{Kind: "network", Op: "resolve", Target: "attacker.example:443", Rule: rule, Count: 1}
		if got, want := agentproc.DenialHint(d), "add "+c.v4+" (carried in "+c.v6+") or its CIDR to allow_hosts"; got != want {
			t.Errorf("DenialHint(%s): got %q, want %q", c.v6, got, want)
		}
		withV4, err := egress.ParseList([]string{"attacker.example", c.v4})
		if err != nil {
			t.Fatal(err)
		}
		if r := f.Check(netip.MustParseAddr(c.v6), withV4); r != "" {
			t.Errorf("Check(%s) with %s listed, as the hint says: got %q, want dialled", c.v6, c.v4, r)
		}
	}
	for _, a := range []string{"10.1.2.3", "fd12::1", "::ffff:192.168.1.1"} {
		plain := agentproc.Denial{Kind: "network", Op: "resolve", Target: "attacker.example:443", Rule: f.Check(netip.MustParseAddr(a), list)}
		want := "add " + netip.MustParseAddr(a).Unmap().String() + " or its CIDR to allow_hosts (the name attacker.example resolves to that private address)"
		if got := agentproc.DenialHint(plain); got != want {
			t.Errorf("DenialHint(%s): got %q, want %q", a, got, want)
		}
	}
	loop := agentproc.Denial{Kind: "network", Op: "resolve", Target: "attacker.example:443", Rule: f.Check(netip.MustParseAddr("64:ff9b::7f00:1"), list)}
	if got, want := agentproc.DenialHint(loop), "none: the proxy never connects to such an address"; got != want {
		t.Errorf("DenialHint(64:ff9b::7f00:1): got %q, want %q", got, want)
	}
}

// TestDenialHintUnread: a tunnel closed because the tree's tunnels held
// too much unread is advised to read, to send no more than a host reads
// (an upload a host does not read counts too: seventeenth attack review),
// or to open fewer, never to widen AllowHosts, which would not help.
func TestDenialHintUnread(t *testing.T) {
	t.Parallel()
	d := agentproc.Denial{Kind: "network", Op: "connect", Target: "registry.example:443", Rule: egress.RuleUnread(64 << 20)}
	if got, want := agentproc.DenialHint(d), "read each connection's data as it comes, send a host no more than it reads, or open fewer at once"; got != want {
		t.Errorf("DenialHint(%q): got %q, want %q", d.Rule, got, want)
	}
}
