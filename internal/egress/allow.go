// Package egress is the proxy through which a NetworkHosts tree reaches
// the hosts its Sandbox.AllowHosts names: HTTP CONNECT, plain-HTTP
// forwarding and SOCKS5, each connection checked against an allowlist
// (List) and a address filter (AddrFilter) before the proxy dials, from the
// host, the address it checked.
//
// One Proxy serves any number of listeners (Serve), each with its own list
// and its own denial callback, so that a connection is attributed by the
// listener it arrived on, which the tree cannot choose.
package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// ErrBadEntry is what ParseList's errors match for an entry that is not
// one of the forms an allowlist takes.
var ErrBadEntry = errors.New("egress: bad allowlist entry")

// defaultPorts are the ports an entry without one allows: HTTPS and HTTP.
var defaultPorts = []uint16{443, 80}

// entry is one parsed allowlist entry.
type entry struct {
	raw      string
	name     string       // an exact host name, lower case, no trailing dot
	suffix   string       // "*.example.com": ".example.com"
	prefix   netip.Prefix // an IP literal (a /32 or /128) or a CIDR
	ports    []uint16
	isPrefix bool
}

// List is a parsed allowlist. The zero value allows nothing. It is
// immutable once made: a tree's list is fixed when it starts.
type List struct {
	entries []entry
}

// ParseList parses entries: `name` (ports 443 and 80), `name:port`,
// `*.suffix` or `*.suffix:port` (subdomains, not the apex), or an IP
// literal or CIDR, with an optional port (`[v6]:port`, `10.0.0.0/8:5432`,
// `[fd00::/8]:5432`). The error names the first bad entry and matches
// ErrBadEntry.
func ParseList(entries []string) (*List, error) {
	l := &List{entries: make([]entry, 0, len(entries))}
	for i, s := range entries {
		e, err := parseEntry(s)
		if err != nil {
			return nil, fmt.Errorf("entry %d %q: %s: %w", i, s, err, ErrBadEntry)
		}
		l.entries = append(l.entries, e)
	}
	return l, nil
}

// Len is the number of entries.
func (l *List) Len() int { return len(l.entries) }

func parseEntry(s string) (entry, error) {
	e := entry{raw: s}
	if s == "" {
		return e, errors.New("empty")
	}
	if strings.ContainsAny(s, " \t\r\n\x00/\\@?#") && !looksLikeCIDR(s) {
		return e, errors.New("not a host name, IP address or CIDR")
	}
	host, port, err := splitEntry(s)
	if err != nil {
		return e, err
	}
	if port == 0 {
		e.ports = defaultPorts
	} else {
		e.ports = []uint16{port}
	}
	if strings.Contains(host, "/") {
		p, err := netip.ParsePrefix(host)
		if err != nil {
			return e, errors.New("not a CIDR")
		}
		p = normalisePrefix(p)
		if p != p.Masked() {
			return e, fmt.Errorf("the CIDR has host bits set (did you mean %s?)", p.Masked())
		}
		if err := checkListedAddr(p.Addr()); err != nil {
			return e, err
		}
		if p.Bits() == 0 {
			return e, errors.New("a CIDR of every address is not allowed (no bare *)")
		}
		e.prefix, e.isPrefix = p, true
		return e, nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return e, errors.New("an IPv6 zone is not allowed")
		}
		a = a.Unmap()
		if err := checkListedAddr(a); err != nil {
			return e, err
		}
		e.prefix, e.isPrefix = netip.PrefixFrom(a, a.BitLen()), true
		return e, nil
	}
	if host == "*" {
		return e, errors.New("a bare * allows every host and is not allowed")
	}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		name, err := normaliseName(rest)
		if err != nil {
			return e, err
		}
		if !strings.Contains(name, ".") {
			return e, errors.New("a wildcard needs at least two labels after *. (*.example.com, not *.com)")
		}
		e.suffix = "." + name
		return e, nil
	}
	name, err := normaliseName(host)
	if err != nil {
		return e, err
	}
	e.name = name
	return e, nil
}

func looksLikeCIDR(s string) bool {
	return strings.Count(s, "/") == 1 && !strings.ContainsAny(s, " \t\r\n\x00\\@?#")
}

// splitEntry splits an entry into its host (a name, an address or a CIDR)
// and its port, 0 when it has none.
func splitEntry(s string) (string, uint16, error) {
	if rest, ok := strings.CutPrefix(s, "["); ok {
		host, after, ok := strings.Cut(rest, "]")
		if !ok {
			return "", 0, errors.New("missing ]")
		}
		if after == "" {
			return host, 0, nil
		}
		p, ok := strings.CutPrefix(after, ":")
		if !ok {
			return "", 0, errors.New("unexpected text after ]")
		}
		port, err := parsePort(p)
		return host, port, err
	}
	if strings.Count(s, ":") > 1 {
		return s, 0, nil // a bare IPv6 address or CIDR, no port
	}
	host, p, ok := strings.Cut(s, ":")
	if !ok {
		return s, 0, nil
	}
	port, err := parsePort(p)
	return host, port, err
}

func parsePort(p string) (uint16, error) {
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 || p[0] == '+' {
		return 0, fmt.Errorf("port %q is not a number in 1-65535", p)
	}
	return uint16(n), nil
}

// normaliseName lower-cases a DNS name, drops one trailing dot, and checks
// its labels: letters, digits, '-' and '_', 1 to 63 bytes each, 253 in all.
// A name of digits and dots only is refused: resolvers read it as an
// address.
func normaliseName(s string) (string, error) {
	s = strings.TrimSuffix(strings.ToLower(s), ".")
	if s == "" || len(s) > 253 {
		return "", errors.New("not a host name")
	}
	allDigits := true
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 {
			return "", errors.New("not a host name (an empty or over-long label)")
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return "", errors.New("not a host name (a label starts or ends with -)")
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			switch {
			case c >= '0' && c <= '9':
			case c >= 'a' && c <= 'z', c == '-', c == '_':
				allDigits = false
			case c == '*':
				return "", errors.New("* is allowed only as the whole first label (*.example.com)")
			case c >= 0x80:
				return "", errors.New("not ASCII: write an internationalised name in its xn-- form")
			default:
				return "", fmt.Errorf("not a host name (%q)", c)
			}
		}
	}
	if allDigits {
		return "", errors.New("digits and dots only: write an IP address in dotted form")
	}
	return s, nil
}

// checkListedAddr refuses addresses no entry may name: the proxy never
// connects to them (AddrFilter).
func checkListedAddr(a netip.Addr) error {
	if r := alwaysRefused(a); r != "" {
		return errors.New("the proxy never connects to " + r)
	}
	return nil
}

func normalisePrefix(p netip.Prefix) netip.Prefix {
	a := p.Addr()
	if a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p
}

// Target is what a client asked to reach: a host name or an IP literal,
// and a port.
type Target struct {
	Host string // lower case, no trailing dot; an IP literal unbracketed
	Port uint16
}

func (t Target) String() string {
	return joinHostPort(t.Host, t.Port)
}

func joinHostPort(h string, p uint16) string {
	if strings.Contains(h, ":") {
		return "[" + h + "]:" + strconv.Itoa(int(p))
	}
	return h + ":" + strconv.Itoa(int(p))
}

// ParseTarget parses "host:port" as a client sends it (a CONNECT's
// authority, a URL's host with its port filled in).
func ParseTarget(hostport string) (Target, error) {
	var host, p string
	if rest, ok := strings.CutPrefix(hostport, "["); ok {
		h, after, ok := strings.Cut(rest, "]")
		if !ok || !strings.HasPrefix(after, ":") {
			return Target{}, errors.New("bad host:port")
		}
		host, p = h, after[1:]
	} else {
		i := strings.LastIndexByte(hostport, ':')
		if i < 0 || strings.Contains(hostport[:i], ":") {
			return Target{}, errors.New("bad host:port")
		}
		host, p = hostport[:i], hostport[i+1:]
	}
	port, err := parsePort(p)
	if err != nil {
		return Target{}, err
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return Target{}, errors.New("an IPv6 zone is not allowed")
		}
		return Target{Host: a.Unmap().String(), Port: port}, nil
	}
	name, err := normaliseName(host)
	if err != nil {
		return Target{}, err
	}
	return Target{Host: name, Port: port}, nil
}

// Addr is the target's IP literal, if it is one.
func (t Target) Addr() (netip.Addr, bool) {
	a, err := netip.ParseAddr(t.Host)
	return a, err == nil
}

// Allows reports whether the list allows t by name or, for an IP literal,
// by an IP or CIDR entry; a name entry never allows an IP literal, even
// one the name resolves to.
func (l *List) Allows(t Target) bool {
	if l == nil {
		return false
	}
	a, isAddr := t.Addr()
	for _, e := range l.entries {
		if !slices.Contains(e.ports, t.Port) {
			continue
		}
		switch {
		case isAddr:
			if e.isPrefix && e.prefix.Contains(a) {
				return true
			}
		case e.name != "":
			if t.Host == e.name {
				return true
			}
		case e.suffix != "":
			if strings.HasSuffix(t.Host, e.suffix) && len(t.Host) > len(e.suffix) {
				return true
			}
		}
	}
	return false
}

// AllowsHostOnAnyPort reports whether some entry names t's host, whatever
// its port: a refusal then says the port is the problem.
func (l *List) AllowsHostOnAnyPort(t Target) bool {
	if l == nil {
		return false
	}
	for _, port := range l.ports() {
		if l.Allows(Target{Host: t.Host, Port: port}) {
			return true
		}
	}
	return false
}

func (l *List) ports() []uint16 {
	var out []uint16
	for _, e := range l.entries {
		out = append(out, e.ports...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// onPort is the list of l's entries that allow port: what the address
// filter may take as naming a private address for a target on that port.
// An entry "10.0.0.7:5432" names the address for 5432 alone; taken for
// any port, a listed name resolving there reached 10.0.0.7:443 too
// (thirteenth attack review, TestAttackPrivateAddressOnAnotherPort).
func (l *List) onPort(port uint16) *List {
	if l == nil {
		return nil
	}
	out := &List{}
	for _, e := range l.entries {
		if slices.Contains(e.ports, port) {
			out.entries = append(out.entries, e)
		}
	}
	return out
}

// NamesPrivate reports whether an IP or CIDR entry contains a, which lets
// the filter pass a private-range address.
func (l *List) NamesPrivate(a netip.Addr) bool {
	if l == nil {
		return false
	}
	for _, e := range l.entries {
		if e.isPrefix && e.prefix.Contains(a) {
			return true
		}
	}
	return false
}

// Covers reports whether every target entry s allows, l allows too: the
// test of a narrowing (a server's client asking for a subset of the
// operator's list). A wildcard is covered only by a wildcard of the same
// or a wider suffix, a CIDR only by a CIDR that contains it.
func (l *List) Covers(s string) (bool, error) {
	e, err := parseEntry(s)
	if err != nil {
		return false, fmt.Errorf("entry %q: %s: %w", s, err, ErrBadEntry)
	}
	for _, port := range e.ports {
		ok := false
		for _, b := range l.entries {
			if !slices.Contains(b.ports, port) {
				continue
			}
			switch {
			case e.name != "":
				ok = b.name == e.name || b.suffix != "" && strings.HasSuffix(e.name, b.suffix)
			case e.suffix != "":
				ok = b.suffix != "" && strings.HasSuffix(e.suffix, b.suffix)
			case e.isPrefix:
				ok = b.isPrefix && b.prefix.Bits() <= e.prefix.Bits() && b.prefix.Contains(e.prefix.Addr())
			}
			if ok {
				break
			}
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}
