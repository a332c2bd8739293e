package egress

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// The address filter: which addresses the proxy dials. Only the ranges
// named here are refused; everything else, reserved documentation ranges
// included (this project's machines resolve the package registries into
// one), is dialled when the list allows the target.

// metadataAddrs are the cloud instance metadata services: 169.254.169.254
// (most clouds; link-local anyway), Alibaba Cloud's 100.100.100.200 (in the
// shared address space, otherwise dialled) and AWS's IPv6 fd00:ec2::254 (in
// a private range an operator may list).
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

// alwaysRefused names why a is never dialled, whatever the list says; ""
// when it may be.
func alwaysRefused(a netip.Addr) string {
	a = a.Unmap()
	for _, v4 := range nat64Targets(a) {
		if r := alwaysRefused(v4); r != "" {
			return r + " (inside NAT64)"
		}
	}
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
	return ""
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
	if v4s := nat64Targets(a); v4s != nil {
		// The gateway connects to v4: the host's own address or a private
		// one unless listed, as if v4 had been answered (fifth attack
		// review: TestAttackNAT64PrivateAddress); in the local-use prefix
		// to any of its candidates (TestAttackNAT64LocalPrefixLengths).
		for _, v4 := range v4s {
			if r := g.Check(v4, l); r != "" {
				return r + " (inside NAT64)"
			}
		}
		return ""
	}
	switch local, known := g.isLocal(a); {
	case !known:
		return "resolves to an address the proxy cannot check (this host's addresses are unreadable)"
	case local:
		return "resolves to an address of this host"
	}
	if a.IsPrivate() && !l.NamesPrivate(a) {
		return "resolves to a private address (name the IP or CIDR in AllowHosts to allow it)"
	}
	return ""
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
