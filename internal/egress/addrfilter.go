package egress

import (
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// The address filter: which addresses the proxy dials. Only the ranges
// named here are refused; everything else, reserved documentation ranges
// included (this project's machines resolve the package registries into
// one), is dialled when the list allows the target.

// metadataAddrs are the cloud instance metadata services: 169.254.169.254
// (most clouds; link-local anyway), Alibaba Cloud's 100.100.100.200 and
// AWS's IPv6 fd00:ec2::254 (both in private ranges an operator may list).
var metadataAddrs = map[netip.Addr]bool{
	netip.MustParseAddr("169.254.169.254"): true,
	netip.MustParseAddr("100.100.100.200"): true,
	netip.MustParseAddr("fd00:ec2::254"):   true,
}

// nat64 is the well-known NAT64 prefix: an address in it reaches the IPv4
// address in its last 32 bits where a NAT64 gateway exists (DNS64 on an
// IPv6-only network answers with such addresses).
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// nat64Local is the local-use NAT64 prefix (RFC 8215), whose operators
// carve prefixes out of it: /48, /56, /64 or /96, each of which carries
// the IPv4 address at a place of its own (RFC 6052, 2.2: bits 64–71 are
// left out), so an address in it is judged as each of them.
var nat64Local = netip.MustParsePrefix("64:ff9b:1::/48")

// nat64Targets are the IPv4 addresses a NAT64 address may reach: for the
// well-known prefix its last 32 bits; for the local-use prefix the
// address each of its prefix lengths carries (sixth attack review: a /64
// gateway maps 64:ff9b:1:0:a:0:500:0 to 10.0.0.5, whose last 32 bits are
// 5.0.0.0). None if a is no NAT64 address. Judging every place refuses
// more than the gateway reaches: a /64 whose subnet ID reads as a private
// address at the /48 or /56 place (64:ff9b:1:a::/64 puts 10 there) has
// its addresses refused unless AllowHosts names that range.
func nat64Targets(a netip.Addr) []netip.Addr {
	if !a.Is6() {
		return nil
	}
	b := a.As16()
	last := netip.AddrFrom4([4]byte(b[12:]))
	switch {
	case nat64.Contains(a):
		return []netip.Addr{last}
	case nat64Local.Contains(a):
		var out []netip.Addr
		for _, v4 := range []netip.Addr{
			netip.AddrFrom4([4]byte{b[6], b[7], b[9], b[10]}),  // /48
			netip.AddrFrom4([4]byte{b[7], b[9], b[10], b[11]}), // /56
			netip.AddrFrom4([4]byte(b[9:13])),                  // /64
		} {
			// The zeros of a longer prefix's address read as 0.0.0.0/8
			// at a shorter one's place: not taken for a target.
			if !thisNetwork.Contains(v4) {
				out = append(out, v4)
			}
		}
		return append(out, last) // /96
	}
	return nil
}

// thisNetwork is 0.0.0.0/8, which Linux treats as this host.
var thisNetwork = netip.MustParsePrefix("0.0.0.0/8")

// The other IPv6 forms that carry an IPv4 address a router or the kernel
// may forward to: 6to4 (RFC 3056; a relay, or Linux's sit device, sends
// 2002:V4::/48 to V4), Teredo (RFC 4380: the server's address in bits
// 32–63, the client's in the last 32, inverted) and the deprecated
// IPv4-compatible ::V4 (RFC 4291, 2.5.5.1; sit's automatic tunnel).
var (
	sixToFour      = netip.MustParsePrefix("2002::/16")
	teredo         = netip.MustParsePrefix("2001::/32")
	ipv4Compatible = netip.MustParsePrefix("::/96")
)

// carriedIPv4 returns the IPv4 addresses a reaches through a gateway or a
// tunnel, and the form's name for the rule; none if a is no such form.
// An address carrying several (Teredo, the local-use NAT64 prefix) is
// refused if any of them would be.
func carriedIPv4(a netip.Addr) (form string, v4s []netip.Addr) {
	if !a.Is6() || a.Is4In6() {
		return "", nil
	}
	b := a.As16()
	switch {
	case nat64.Contains(a), nat64Local.Contains(a):
		return "NAT64", nat64Targets(a)
	case sixToFour.Contains(a):
		return "6to4", []netip.Addr{netip.AddrFrom4([4]byte(b[2:6]))}
	case teredo.Contains(a):
		client := [4]byte(b[12:])
		for i := range client {
			client[i] ^= 0xff
		}
		return "Teredo", []netip.Addr{netip.AddrFrom4([4]byte(b[4:8])), netip.AddrFrom4(client)}
	case ipv4Compatible.Contains(a):
		return "an IPv4-compatible address", []netip.Addr{netip.AddrFrom4([4]byte(b[12:]))}
	}
	return "", nil
}

// privateRanges are refused unless AllowHosts names the IP or a CIDR
// containing it, beside what netip.Addr.IsPrivate covers (10/8,
// 172.16/12, 192.168/16, fc00::/7): ranges not routed on the internet
// whose addresses name machines inside a network. docs/sandbox.md lists
// the special ranges left open and why.
var privateRanges = []netip.Prefix{
	netip.MustParsePrefix("100.64.0.0/10"), // shared address space (RFC 6598): carrier-grade NAT, Tailscale
	netip.MustParsePrefix("192.0.0.0/24"),  // IETF protocol assignments: DS-Lite's link to the carrier's gateway
	netip.MustParsePrefix("240.0.0.0/4"),   // reserved: some clouds number internal networks in it
	netip.MustParsePrefix("fec0::/10"),     // deprecated site-local
	netip.MustParsePrefix("5f00::/16"),     // SRv6 segment identifiers, inside an operator's domain
}

// isPrivate reports whether a is in a private range: dialled only where
// AllowHosts names it.
func isPrivate(a netip.Addr) bool {
	if a.IsPrivate() {
		return true
	}
	for _, p := range privateRanges {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// alwaysRefused names why a is never dialled, whatever the list says; ""
// when it may be.
func alwaysRefused(a netip.Addr) string {
	a = a.Unmap()
	switch {
	case a.IsLoopback():
		return "a loopback address"
	case metadataAddrs[a]:
		return "the cloud metadata address"
	case a.IsMulticast(), a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "a multicast address"
	case a.IsLinkLocalUnicast():
		return "a link-local address"
	case a.IsUnspecified(), a.Is4() && thisNetwork.Contains(a):
		return "an unspecified address"
	}
	// After the checks above, so that ::1 and :: (IPv4-compatible in
	// form) are named for what they are.
	form, v4s := carriedIPv4(a)
	for _, v4 := range v4s {
		if r := alwaysRefused(v4); r != "" {
			return r + carriedSuffix(v4, form, a)
		}
	}
	return ""
}

// carriedSuffix ends the rule refusing a because of the IPv4 address v4
// it carries as form: " (10.0.0.5 inside 6to4 2002:a00:5::1)". Both
// addresses are named, so that the hint (CarriedIn) can say which IPv4
// address AllowHosts would have to name and where it came from.
func carriedSuffix(v4 netip.Addr, form string, a netip.Addr) string {
	return " (" + v4.String() + " inside " + form + " " + a.String() + ")"
}

// CarriedIn returns the IPv4 address a rule refused an IPv6 address for
// (a NAT64, 6to4, Teredo or IPv4-compatible address carrying it) and that
// IPv6 address; ok is false when the rule names none. It reads what
// carriedSuffix wrote and nothing else: the rule is the filter's own text,
// never the tree's.
func CarriedIn(rule string) (v4, v6 netip.Addr, ok bool) {
	inner, found := strings.CutSuffix(rule, ")")
	i := strings.LastIndex(inner, " (")
	if !found || i < 0 {
		return netip.Addr{}, netip.Addr{}, false
	}
	inner = inner[i+2:]
	v4s, rest, found := strings.Cut(inner, " inside ")
	j := strings.LastIndexByte(rest, ' ')
	if !found || j < 0 {
		return netip.Addr{}, netip.Addr{}, false
	}
	v4, err4 := netip.ParseAddr(v4s)
	v6, err6 := netip.ParseAddr(rest[j+1:])
	if err4 != nil || err6 != nil || !v4.Is4() || !v6.Is6() {
		return netip.Addr{}, netip.Addr{}, false
	}
	return v4, v6, true
}

// AddrFilter decides which resolved addresses the proxy may dial.
type AddrFilter struct {
	// LocalAddrs returns the host's own interface addresses; nil means
	// net.InterfaceAddrs. They are read again when older than a second.
	LocalAddrs func() ([]netip.Addr, error)
	// Now is the clock for that refresh; nil means time.Now.
	Now func() time.Time

	mu      sync.Mutex
	local   map[netip.Addr]bool
	readAt  time.Time
	reading bool
}

// Check returns "" when a may be dialled for a target of list l, else the
// rule that refuses it ("resolves to a loopback address").
func (g *AddrFilter) Check(a netip.Addr, l *List) string {
	a = a.Unmap().WithZone("")
	if r := alwaysRefused(a); r != "" {
		return "resolves to " + r
	}
	// The gateway or tunnel connects to v4: the host's own address or a
	// private one unless listed, as if v4 had been answered (fifth attack
	// review: TestAttackNAT64PrivateAddress); in the local-use NAT64
	// prefix to any of its candidates (TestAttackNAT64LocalPrefixLengths),
	// through Teredo to the server or the client (TestAddrFilterTeredo).
	// The address itself is judged after: a host's own 6to4 address is
	// among its interface addresses.
	form, v4s := carriedIPv4(a)
	for _, v4 := range v4s {
		if r := g.Check(v4, l); r != "" {
			// v4 named: it is the address AllowHosts must name to allow a
			// private one, not a itself.
			return r + carriedSuffix(v4, form, a)
		}
	}
	switch local, known := g.isLocal(a); {
	case !known:
		return "resolves to an address the proxy cannot check (this host's addresses are unreadable)"
	case local:
		return "resolves to an address of this host"
	}
	if isPrivate(a) && !l.NamesPrivate(a) {
		return privateRule + " (" + a.String() + "; name the IP or CIDR in AllowHosts to allow it)"
	}
	return ""
}

// privateRule begins the rule refusing a private address AllowHosts does
// not name; the address follows, for the hint (PrivateIn).
const privateRule = "resolves to a private address"

// PrivateIn returns the private address a rule refused, the one AllowHosts
// would have to name (by itself or a CIDR); ok is false when the rule is
// no such refusal. Like CarriedIn it reads only what Check wrote.
func PrivateIn(rule string) (a netip.Addr, ok bool) {
	rest, found := strings.CutPrefix(rule, privateRule+" (")
	s, _, cut := strings.Cut(rest, ";")
	if !found || !cut {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a, true
}

// isLocal reports whether a is an address of this host; known is false
// when the host's addresses were never read. A failed read (EMFILE, which
// a tree holding many connections can cause) keeps the last addresses
// read rather than take "none" for an answer.
func (g *AddrFilter) isLocal(a netip.Addr) (local, known bool) {
	now := time.Now
	if g.Now != nil {
		now = g.Now
	}
	t := now()
	g.mu.Lock()
	stale := g.local == nil || t.Sub(g.readAt) > time.Second
	if stale && !g.reading {
		g.reading = true
		g.mu.Unlock()
		fresh := g.readLocal()
		g.mu.Lock()
		if fresh != nil {
			g.local, g.readAt = fresh, t
		}
		g.reading = false
	}
	addrs := g.local
	g.mu.Unlock()
	if addrs == nil {
		// Read in flight elsewhere on the very first call, or every read
		// failed: read it here too rather than let an address through
		// unchecked.
		if addrs = g.readLocal(); addrs == nil {
			return false, false
		}
	}
	return addrs[a], true
}

// readLocal reads the host's addresses; nil when they cannot be read.
func (g *AddrFilter) readLocal() map[netip.Addr]bool {
	read := g.LocalAddrs
	if read == nil {
		read = interfaceAddrs
	}
	addrs, err := read()
	if err != nil {
		return nil
	}
	out := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		out[a.Unmap().WithZone("")] = true
	}
	return out
}

func interfaceAddrs() ([]netip.Addr, error) {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range as {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out, nil
}
