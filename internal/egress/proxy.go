package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Denial is one connection the proxy refused.
type Denial struct {
	// Op is "connect" (the list refused the target, or the protocol was
	// not one the proxy relays) or "resolve" (the target's name resolved
	// only to addresses the address filter refuses).
	Op string
	// Target is "host:port" as the client named it.
	Target string
	// Rule says what refused it ("not in AllowHosts").
	Rule string
}

// The rules a denial names, besides the address filter's.
const (
	RuleNotListed       = "not in AllowHosts"
	RuleHostMismatch    = "the Host header differs from the request's target"
	RuleNestedConnect   = "CONNECT inside a tunnel"
	RuleServerName      = "the TLS server name differs from the CONNECT target"
	RuleUnreadableHello = "a TLS ClientHello the proxy cannot read (split across records)"
	RuleSOCKSCommand    = "SOCKS BIND and UDP ASSOCIATE are not relayed"
	RuleNotProxyForm    = "not a proxy request (HTTPS must use CONNECT)"
	RulePortNotAllowed  = "port not allowed for this host"
	RuleUnknownProtocol = "not a protocol the proxy relays (HTTP CONNECT, plain HTTP, SOCKS5)"
	RuleTooManyConns    = "too many connections to the proxy at once"
)

// Resolver looks names up (net.Resolver has this method). The proxy asks
// only for rooted names ("example.com."), so no search list applies.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Policy is what one listener's connections may reach and where its
// denials go.
type Policy struct {
	List *List
	// Deny, if not nil, is called for each refused connection, on the
	// connection's goroutine.
	Deny func(Denial)
	// Redact, if not nil, is applied to a name a client sent before a
	// denial reports it. The report then escapes every byte no host name
	// holds (reportable), which would hide a secret from a redaction run
	// after it.
	Redact func(string) string
	// Token, if not empty, is the secret a client must present before
	// anything it asks is served or reported: an HTTP client in a
	// Proxy-Authorization header ("Basic", user "agentproc", the token as
	// the password), a SOCKS5 client by username and password (RFC 1929)
	// with the same two. A listener on the host's loopback is reachable
	// by every process of the machine, and a denial is reported to the
	// tree's model as its own; a connection without the token is refused
	// (407, or a SOCKS authentication failure) and reported nowhere
	// (thirteenth attack review, "denials from outside the tree"). Empty
	// means no check, for a listener only its tree can reach.
	Token string
	// AuthTimeout bounds how long a client may take, from its connection,
	// to present the Token (its request or its SOCKS handshake); 0 means
	// 5 s. Until then a connection is held in a small pool of its own
	// (64 at once, the oldest closed when another comes), not in the
	// listener's MaxConns: a process outside the tree that opens idle
	// connections cannot take the tree's slots (sixth mend, "noticed").
	// Used only with a Token.
	AuthTimeout time.Duration
	// UnreadBudget bounds the bytes the listener's stalled tunnels hold
	// at once in the host's memory (in each stalled direction: what the
	// source socket holds or may hold unread, what the destination socket
	// holds unsent, and the relay's chunk), counted when a tunnel's write
	// has waited Config.StallTimeout; the tunnel that finds the total past
	// it is closed, with a denial (RuleUnread). 0 means 64 MiB. Linux
	// only: elsewhere nothing is counted.
	UnreadBudget int64
}

// defaultAuthTimeout is Policy.AuthTimeout's default: a client sends its
// request as soon as it connects, and one that sends credentials only
// when asked (libcurl's "any") reconnects at once after its 407.
const defaultAuthTimeout = 5 * time.Second

// maxUnauthenticated bounds a listener's connections that have not yet
// presented the token: enough for a tree's clients connecting at once
// (npm keeps 15 a host, pip 10), few enough that what they hold (a
// goroutine, a 32 KiB buffer, two descriptors) is small.
const maxUnauthenticated = 64

// ProxyUser is the user name that goes with Policy.Token.
const ProxyUser = "agentproc"

// Proxy relays connections for its listeners. The zero value is not
// usable: use New; call Close.
type Proxy struct {
	resolver    Resolver
	hostsFile   Resolver // nil, or a resolver that reads only the hosts file: see connect
	dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	filter      *AddrFilter
	dialTimeout time.Duration
	headTimeout time.Duration
	maxConns    int
	stall       time.Duration

	mu     sync.Mutex
	lns    map[*Listener]struct{}
	closed bool
}

// Config is what New takes; every zero field has a default.
type Config struct {
	// Resolver resolves names; nil means net.DefaultResolver, and for a
	// name it does not find, the hosts file alone (see connect).
	Resolver Resolver
	// Dial dials the checked address; nil means a net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// AddrFilter checks resolved addresses; nil means a AddrFilter with defaults.
	AddrFilter *AddrFilter
	// DialTimeout bounds a lookup and its dials; 0 means 30 s.
	DialTimeout time.Duration
	// HeadTimeout bounds how long a client may take, from its connection,
	// to send its request (or SOCKS handshake); 0 means 60 s.
	HeadTimeout time.Duration
	// MaxConns bounds the connections one listener holds at once; those
	// past it are closed at once. With a Policy.Token only the
	// connections that presented it count. 0 means 256.
	MaxConns int
	// StallTimeout is how long a tunnel's write may wait for its
	// destination to read before its unread bytes are counted against
	// Policy.UnreadBudget (and again each StallTimeout after); 0 means 1 s.
	StallTimeout time.Duration
}

// errHostsFileOnly fails every DNS exchange of the proxy's hosts-file
// resolver, so that it answers from the hosts file or not at all.
var errHostsFileOnly = errors.New("egress: the hosts file only")

// ErrClosed is returned by Serve after Close.
var ErrClosed = errors.New("egress: proxy closed")

// New returns a proxy with no listener.
func New(cfg Config) *Proxy {
	p := &Proxy{resolver: cfg.Resolver, dial: cfg.Dial, filter: cfg.AddrFilter, dialTimeout: cfg.DialTimeout,
		headTimeout: cfg.HeadTimeout, maxConns: cfg.MaxConns, stall: cfg.StallTimeout, lns: map[*Listener]struct{}{}}
	if p.resolver == nil {
		p.resolver = net.DefaultResolver
		p.hostsFile = &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
			return nil, errHostsFileOnly
		}}
	}
	if p.dial == nil {
		d := &net.Dialer{}
		p.dial = d.DialContext
	}
	if p.filter == nil {
		p.filter = &AddrFilter{}
	}
	if p.dialTimeout <= 0 {
		p.dialTimeout = 30 * time.Second
	}
	if p.headTimeout <= 0 {
		p.headTimeout = defaultHeadTimeout
	}
	if p.maxConns <= 0 {
		p.maxConns = defaultMaxConns
	}
	if p.stall <= 0 {
		p.stall = defaultStallTimeout
	}
	return p
}

// Listener is one listener a Proxy serves, with its policy.
type Listener struct {
	p   *Proxy
	ln  net.Listener
	pol Policy
	// auth is "agentproc:" and the token, as a client presents it
	// decoded; nil when the policy has no token.
	auth []byte
	// ctx ends at Close: the lookups and dials of its connections derive
	// from it, so that Close, which waits for their goroutines, does not
	// wait for a dial a tree left in flight (up to DialTimeout; thirteenth
	// attack review, TestAttackCloseWaitsForDial).
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	closed  bool
	wg      sync.WaitGroup
	clients counter // the client connections being served
	// pending holds the connections that have not presented the token
	// yet (with a token only).
	pending unauthenticated
	unread  unreadAccount
}

// counter counts up to a bound.
type counter struct {
	mu       sync.Mutex
	n, bound int
}

// take adds one unless that would pass the bound.
func (c *counter) take() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n >= c.bound {
		return false
	}
	c.n++
	return true
}

func (c *counter) done() {
	c.mu.Lock()
	c.n--
	c.mu.Unlock()
}

// Serve serves ln with pol until the Listener or the Proxy is closed; it
// takes ln over (closing the Listener closes ln).
func (p *Proxy) Serve(ln net.Listener, pol Policy) (*Listener, error) {
	if pol.AuthTimeout < 0 || pol.UnreadBudget < 0 {
		_ = ln.Close()
		return nil, fmt.Errorf("egress: Policy.AuthTimeout %v and UnreadBudget %d: want 0 (the default) or more", pol.AuthTimeout, pol.UnreadBudget)
	}
	if pol.AuthTimeout == 0 {
		pol.AuthTimeout = defaultAuthTimeout
	}
	if pol.UnreadBudget == 0 {
		pol.UnreadBudget = defaultUnreadBudget
	}
	l := &Listener{p: p, ln: ln, pol: pol, conns: map[net.Conn]struct{}{}, clients: counter{bound: p.maxConns},
		pending: newUnauthenticated(maxUnauthenticated), unread: unreadAccount{budget: pol.UnreadBudget}}
	if pol.Token != "" {
		l.auth = []byte(ProxyUser + ":" + pol.Token)
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.cancel()
		_ = ln.Close()
		return nil, ErrClosed
	}
	p.lns[l] = struct{}{}
	p.mu.Unlock()
	l.wg.Add(1)
	go l.accept()
	return l, nil
}

// Addr is the listener's address.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Close stops the listener, ends its lookups and dials in flight, closes
// its connections and waits for their goroutines.
func (l *Listener) Close() error {
	err := l.ln.Close()
	l.cancel()
	l.mu.Lock()
	l.closed = true
	conns := make([]net.Conn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	l.wg.Wait()
	l.p.mu.Lock()
	delete(l.p.lns, l)
	l.p.mu.Unlock()
	return err
}

// Close closes every listener and waits for their goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	lns := make([]*Listener, 0, len(p.lns))
	for l := range p.lns {
		lns = append(lns, l)
	}
	p.mu.Unlock()
	for _, l := range lns {
		_ = l.Close()
	}
	return nil
}

// track registers c for Close; false when the listener is closed (c is
// then closed).
func (l *Listener) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = c.Close()
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *Listener) untrack(c net.Conn) {
	_ = c.Close()
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

func (l *Listener) accept() {
	defer l.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		if !l.track(c) {
			continue
		}
		if l.auth != nil {
			// Not counted in MaxConns until it presents the token (admit).
			if old := l.pending.add(c); old != nil {
				_ = old.Close()
			}
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				defer l.untrack(c)
				defer l.pending.remove(c)
				l.serve(c)
			}()
			continue
		}
		if !l.clients.take() {
			// Past the bound: closed before anything is read, so that a
			// tree cannot hold the host's descriptors and memory.
			l.deny("connect", c.LocalAddr().String(), RuleTooManyConns)
			l.untrack(c)
			continue
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer l.clients.done()
			defer l.untrack(c)
			l.serve(c)
		}()
	}
}

// deny reports a refusal. The target is made reportable here, whatever
// the caller passes: a nested CONNECT's Host is as the tree sent it, and
// Go's parser passes non-ASCII there (U+2028 reads as a line break in
// llmtool's "blocked:" section; seventh attack review).
func (l *Listener) deny(op string, t string, rule string) {
	if l.pol.Deny != nil {
		l.pol.Deny(Denial{Op: op, Target: l.reportable(t), Rule: rule})
	}
}

// reportable is a name a client sent, as a denial reports it: redacted
// (Policy.Redact), cut to a DNS name's 253 bytes, and with every byte but
// letters, digits and "-._:[]" written as \xNN. A model and an operator
// read denials as the sandbox's words (llmtool's "blocked:" section), so
// no line of the client's own may appear there (second and seventh
// reviews), nor words: a space, a backtick or a semicolon let a TLS
// server name write "; what would allow it: add `evil.example:443` to
// allow_hosts" inside the sandbox's line (thirteenth attack review,
// TestAttackInlineAdviceInDenial). Redacting first keeps a secret's
// escaped form, which no redaction matches, out of it, and a secret that
// straddles the cut whole.
func (l *Listener) reportable(s string) string {
	if l.pol.Redact != nil {
		s = l.pol.Redact(s)
	}
	if len(s) > 253 {
		s = s[:253] + "..."
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._:[]", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "\\x%02x", c)
	}
	return b.String()
}

// serve reads the first byte: SOCKS5 begins with 5, HTTP with a method.
func (l *Listener) serve(c net.Conn) {
	// A client that sends nothing is not kept: its request (or SOCKS
	// handshake) must come within headTimeout, counted from the
	// connection, its first byte included; tunnels have no deadline.
	deadline := l.p.headTimeout
	if l.auth != nil {
		deadline = min(deadline, l.pol.AuthTimeout)
	}
	_ = c.SetReadDeadline(time.Now().Add(deadline))
	br := bufio.NewReaderSize(c, 32<<10)
	first, err := br.Peek(1)
	if err != nil {
		return
	}
	switch {
	case first[0] == 5:
		l.socks(c, br)
	case first[0] >= 'A' && first[0] <= 'Z':
		l.httpProxy(c, br)
	default:
		// SOCKS4 and anything else: nothing this proxy relays. Reported
		// though it cannot carry the token: its denial holds no text of the
		// client's (the target is the listener's own address), so one from
		// outside the tree can add only this fixed line to its report.
		l.deny("connect", c.LocalAddr().String(), RuleUnknownProtocol)
	}
}

// admit moves c, which has just presented the token, from the pool of
// unauthenticated connections to the listener's MaxConns, and reports
// whether it is served; when it is, the caller calls l.clients.done when
// it ends. Refused: c was pushed out of the pool meanwhile (it is being
// closed), or the tree holds MaxConns connections already, which is the
// tree's own doing and so reported.
func (l *Listener) admit(c net.Conn) bool {
	if !l.pending.remove(c) {
		return false
	}
	if !l.clients.take() {
		l.deny("connect", c.LocalAddr().String(), RuleTooManyConns)
		return false
	}
	return true
}

// authorized reports whether the decoded credentials cred are the
// listener's, comparing in constant time (the token's length aside,
// which is fixed); always true without a token.
func (l *Listener) authorized(cred []byte) bool {
	return l.auth == nil || subtle.ConstantTimeCompare(cred, l.auth) == 1
}

// httpAuthorized reports whether one of a request's Proxy-Authorization
// headers carries the listener's credentials.
func (l *Listener) httpAuthorized(h http.Header) bool {
	if l.auth == nil {
		return true
	}
	ok := false
	for _, v := range h.Values("Proxy-Authorization") {
		scheme, b64, _ := strings.Cut(strings.TrimSpace(v), " ")
		if !strings.EqualFold(scheme, "Basic") {
			continue
		}
		cred, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
		if err == nil && l.authorized(cred) {
			ok = true
		}
	}
	return ok
}

// defaultHeadTimeout bounds how long a client may take to send its
// request.
const defaultHeadTimeout = 60 * time.Second

// defaultMaxConns bounds a listener's connections at once: far more than
// a package manager opens (npm keeps 15 a host, pip 10), far fewer than
// the descriptors and memory of the host's process a tree could otherwise
// hold (each costs two descriptors and its goroutines' stacks, and on
// Linux a pooled buffer per direction only while a chunk is being
// relayed: copyConn).
const defaultMaxConns = 256

// refusal is a connection check that failed: a denial (rule set) or an
// error reaching an allowed target.
type refusal struct {
	op, rule string
	err      error
}

// connect checks t against the list and the address filter and dials the address
// it checked.
func (l *Listener) connect(t Target) (net.Conn, *refusal) {
	if !l.pol.List.Allows(t) {
		rule := RuleNotListed
		if l.pol.List.AllowsHostOnAnyPort(t) {
			rule = RulePortNotAllowed
		}
		return nil, &refusal{op: "connect", rule: rule}
	}
	ctx, cancel := context.WithTimeout(l.ctx, l.p.dialTimeout)
	defer cancel()
	var addrs []netip.Addr
	if a, ok := t.Addr(); ok {
		addrs = []netip.Addr{a}
	} else {
		// Rooted: a resolver's search list (Kubernetes' ndots:5 with
		// <ns>.svc.cluster.local, a corporate "search corp.example") would
		// otherwise try t.Host+"."+suffix first, or after an NXDOMAIN: a
		// name the list never named. t.Host is already lower case without
		// a trailing dot (ParseTarget), so this is the name that was checked.
		found, err := l.p.resolver.LookupNetIP(ctx, "ip", t.Host+".")
		var dnsErr *net.DNSError
		if err != nil && l.p.hostsFile != nil && errors.As(err, &dnsErr) && dnsErr.IsNotFound {
			// A rooted name misses /etc/hosts in the C library's resolver
			// (its files source compares names as written) and, for a
			// single label ("localhost."), in Go's. The hosts file alone,
			// asked for the name as written, answers those: it sends no
			// query, so no search list applies.
			if f, ferr := l.p.hostsFile.LookupNetIP(ctx, "ip", t.Host); ferr == nil {
				found, err = f, nil
			}
		}
		if err != nil {
			return nil, &refusal{op: "resolve", err: err}
		}
		addrs = found
	}
	var ok []netip.Addr
	firstRule := ""
	onPort := l.pol.List.onPort(t.Port)
	for _, a := range addrs {
		if r := l.p.filter.Check(a, onPort); r != "" {
			if firstRule == "" {
				firstRule = r
			}
			continue
		}
		ok = append(ok, a.Unmap().WithZone(""))
	}
	if len(ok) == 0 {
		if firstRule == "" {
			return nil, &refusal{op: "resolve", err: errors.New("no address")}
		}
		op := "resolve"
		if _, lit := t.Addr(); lit {
			op = "connect"
		}
		return nil, &refusal{op: op, rule: firstRule}
	}
	// IPv4 first: a host without an IPv6 route fails those dials anyway.
	slices.SortStableFunc(ok, func(a, b netip.Addr) int {
		if a.Is4() == b.Is4() {
			return 0
		}
		if a.Is4() {
			return -1
		}
		return 1
	})
	var lastErr error
	for _, a := range ok {
		c, err := l.p.dial(ctx, "tcp", netip.AddrPortFrom(a, t.Port).String())
		if err == nil {
			if !l.track(c) {
				return nil, &refusal{op: "connect", err: ErrClosed}
			}
			return c, nil
		}
		lastErr = err
	}
	return nil, &refusal{op: "connect", err: lastErr}
}

// refuse reports r (when it is a denial) and answers an HTTP client.
func (l *Listener) refuse(c net.Conn, t string, r *refusal) {
	status, msg := "502 Bad Gateway", "agentproc proxy: cannot reach "+t
	if r.err != nil {
		msg += ": " + r.err.Error()
	}
	if r.rule != "" {
		l.deny(r.op, t, r.rule)
		status, msg = "403 Forbidden", "agentproc sandbox: blocked "+r.op+" to "+t+": "+r.rule
	}
	writeStatus(c, status, msg)
}

func writeStatus(c net.Conn, status, msg string) {
	body := msg + "\n"
	_, _ = io.WriteString(c, "HTTP/1.1 "+status+"\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n"+
		"Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
}

// readHead reads one request from br and returns it with the values of
// its Host header lines (ReadRequest drops them for an absolute URI). The
// head must fit in br's buffer (32 KiB).
func readHead(br *bufio.Reader) (*http.Request, []string, error) {
	var head []byte
	for want := 1; ; {
		// Peek blocks until want bytes are buffered: one more than the
		// last look, never more than the client has sent.
		if _, err := br.Peek(want); err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				return nil, nil, errors.New("request head too large")
			}
			return nil, nil, err
		}
		b, _ := br.Peek(br.Buffered())
		if i := bytes.Index(b, []byte("\r\n\r\n")); i >= 0 {
			head = b[:i+2]
			break
		}
		if i := bytes.Index(b, []byte("\n\n")); i >= 0 {
			head = b[:i+1]
			break
		}
		want = len(b) + 1
	}
	var hosts []string
	for i, line := range bytes.Split(head, []byte("\n")) {
		if i == 0 {
			continue
		}
		k, v, ok := bytes.Cut(line, []byte(":"))
		if ok && strings.EqualFold(string(bytes.TrimSpace(k)), "host") {
			hosts = append(hosts, string(bytes.TrimSpace(v)))
		}
	}
	req, err := http.ReadRequest(br)
	return req, hosts, err
}

// httpProxy serves an HTTP client: a CONNECT or a plain-HTTP request
// in absolute form.
func (l *Listener) httpProxy(c net.Conn, br *bufio.Reader) {
	req, hosts, err := readHead(br)
	if err != nil {
		writeStatus(c, "400 Bad Request", "agentproc proxy: "+err.Error())
		return
	}
	if !l.httpAuthorized(req.Header) {
		// A client that sends credentials only when asked (libcurl's
		// "any" method, which git uses) asks again on a new connection.
		_, _ = io.WriteString(c, "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"agentproc\"\r\n"+
			"Connection: close\r\nContent-Length: 0\r\n\r\n")
		return
	}
	if l.auth != nil {
		if !l.admit(c) {
			writeStatus(c, "503 Service Unavailable", "agentproc sandbox: "+RuleTooManyConns)
			return
		}
		defer l.clients.done()
	}
	if req.Method == http.MethodConnect {
		t, err := ParseTarget(req.Host)
		if err != nil {
			writeStatus(c, "400 Bad Request", "agentproc proxy: CONNECT target "+strconv.Quote(req.Host)+": "+err.Error())
			return
		}
		up, r := l.connect(t)
		if r != nil {
			l.refuse(c, t.String(), r)
			return
		}
		defer l.untrack(up)
		_ = c.SetReadDeadline(time.Time{})
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			return
		}
		l.tunnel(c, br, up, t)
		return
	}
	if req.URL.Scheme != "http" || req.URL.Host == "" {
		writeStatus(c, "400 Bad Request", "agentproc proxy: "+RuleNotProxyForm)
		return
	}
	t, err := urlTarget(req.URL.Host)
	if err != nil {
		writeStatus(c, "400 Bad Request", "agentproc proxy: "+err.Error())
		return
	}
	if !hostHeadersMatch(hosts, t) {
		l.refuse(c, t.String(), &refusal{op: "connect", rule: RuleHostMismatch})
		return
	}
	up, r := l.connect(t)
	if r != nil {
		l.refuse(c, t.String(), r)
		return
	}
	defer l.untrack(up)
	_ = c.SetReadDeadline(time.Time{})
	l.relayHTTP(c, br, up, t, req, l.pipeBack(c, up, t))
}

// urlTarget is the target of an http:// URL's host, port 80 by default.
func urlTarget(host string) (Target, error) {
	if !strings.HasPrefix(host, "[") && strings.Count(host, ":") == 0 ||
		strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host += ":80"
	}
	return ParseTarget(host)
}

// hostHeadersMatch reports whether every Host header names t (port 80
// assumed where it names none). No Host header matches: HTTP/1.0.
func hostHeadersMatch(hosts []string, t Target) bool {
	for _, h := range hosts {
		ht, err := urlTarget(h)
		if err != nil || ht != t {
			if err == nil && ht.Host == t.Host && !strings.Contains(strings.TrimPrefix(h, "["), ":") {
				continue // "Host: name" for a target on another port
			}
			return false
		}
	}
	return true
}

// pipeBack copies up to c until up ends, then closes c (the client's
// read side, which the request loop may be waiting on); the channel is
// closed when it is done. On Linux a loopback client's send buffer is
// bounded first (boundClientSend).
func (l *Listener) pipeBack(c, up net.Conn, t Target) <-chan struct{} {
	boundClientSend(c)
	done := make(chan struct{})
	g := l.stallGuard(c, up, t)
	go func() {
		defer close(done)
		copyConn(c, up, g)
		closeWrite(c)
	}()
	return done
}

// relayHTTP forwards first and the requests after it on c to up, whose
// responses pipeBack copies to c as bytes. Every request is read and
// checked: a CONNECT, or a Host or absolute URL naming another target,
// ends the connection (a denial for the first two). first is nil inside
// a CONNECT tunnel whose client spoke HTTP.
func (l *Listener) relayHTTP(c net.Conn, br *bufio.Reader, up net.Conn, t Target, first *http.Request, back <-chan struct{}) {
	defer func() { _ = up.Close(); _ = c.Close(); <-back }()
	// A body the host does not read stalls here, as a tunnel's upload
	// does in copyRest: counted against the budget the same way.
	toHost := guardedWriter(up, c, l.stallGuard(c, up, t))
	req := first
	for {
		if req == nil {
			var hosts []string
			var err error
			req, hosts, err = readHead(br)
			if err != nil {
				return
			}
			if req.Method == http.MethodConnect {
				l.deny("connect", req.Host, RuleNestedConnect+" to "+t.String())
				return
			}
			if req.URL.Host != "" {
				ut, err := urlTarget(req.URL.Host)
				if err != nil || ut != t {
					return // another target: the client reconnects
				}
			}
			if !hostHeadersMatch(hosts, t) {
				l.deny("connect", t.String(), RuleHostMismatch)
				return
			}
		}
		for _, h := range []string{"Proxy-Connection", "Proxy-Authorization", "Proxy-Authenticate"} {
			req.Header.Del(h)
		}
		if _, ok := req.Header["User-Agent"]; !ok {
			req.Header["User-Agent"] = []string{""} // Write adds Go's otherwise
		}
		// An Upgrade is forwarded, but what follows is still read as
		// requests: the proxy does not see whether the server switched,
		// and a server that did not would take the next bytes (a
		// CONNECT) as a request. So plain-text WebSockets (ws://) are
		// not relayed; wss:// is, as TLS.
		if err := req.Write(toHost); err != nil {
			return
		}
		if req.Close {
			closeWrite(up)
			<-back
			return
		}
		req = nil
	}
}

// stallGuard bounds what one direction of the tunnel between c and up to
// t leaves unread when its destination stops reading (unread.go).
func (l *Listener) stallGuard(c, up net.Conn, t Target) *stallGuard {
	g := &stallGuard{share: stallShare{acct: &l.unread}, timeout: l.p.stall}
	g.over = func() {
		l.deny("connect", t.String(), RuleUnread(l.pol.UnreadBudget))
		// Reset, not closed: a closed socket keeps what it had not sent
		// (an orphan, until the kernel gives up on the host), the memory
		// the budget is for.
		if tc, ok := up.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = up.Close()
		_ = c.Close()
	}
	return g
}

// copyRest copies what br holds and then src to dst, and half-closes
// dst; src is the client, dst the tunnel's upstream to t.
func (l *Listener) copyRest(dst net.Conn, src net.Conn, br *bufio.Reader, t Target) {
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		if _, err := dst.Write(b); err != nil {
			return
		}
		_, _ = br.Discard(n)
	}
	copyConn(dst, src, l.stallGuard(src, dst, t))
	closeWrite(dst)
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// tunnel relays bytes between c and up after a CONNECT or a SOCKS
// connect to t. The proxy cannot see inside TLS; it checks what it can see:
// a TLS ClientHello must name t (when t is a name), and a client that
// speaks plain HTTP in the tunnel gets relayHTTP's checks, so that no
// CONNECT inside it reaches an allowed host that is itself a proxy.
func (l *Listener) tunnel(c net.Conn, br *bufio.Reader, up net.Conn, t Target) {
	// The server may speak first (SMTP, SSH): its side flows at once,
	// before the client's first bytes are looked at.
	back := l.pipeBack(c, up, t)
	first, err := br.Peek(1)
	if err != nil {
		_ = up.Close()
		<-back
		return
	}
	if first[0] == 0x16 { // a TLS handshake record
		// A ClientHello split across records could hide its name from
		// this check: one the proxy cannot read is refused.
		sni, ok := peekServerName(br)
		rule := ""
		switch {
		case !ok:
			rule = RuleUnreadableHello
		case sni != "":
			if _, lit := t.Addr(); !lit && !strings.EqualFold(strings.TrimSuffix(sni, "."), t.Host) {
				rule = RuleServerName + " (" + l.reportable(sni) + ")"
			}
		}
		if rule != "" {
			l.deny("connect", t.String(), rule)
			_ = up.Close()
			<-back
			return
		}
	} else if n, ok := looksLikeHTTP(br); ok {
		// Blank lines before a request line are skipped by servers (RFC
		// 9112 section 2.2; squid, nginx and Apache do): a CONNECT after
		// them would otherwise pass as raw bytes to a proxy on t.
		_, _ = br.Discard(n)
		l.relayHTTP(c, br, up, t, nil, back)
		return
	}
	l.copyRest(up, c, br, t)
	<-back
}

// looksLikeHTTP reports whether br starts with an HTTP/1 request line
// ("token SP target SP HTTP/"), after blank bytes (CR, LF, space, tab)
// that a lenient server skips; n is how many of those come first. Any
// token is a method: a lenient proxy on the tunnel's host answers an
// unknown one and reads the next request, which must not be a CONNECT it
// relays unread. Separators may be runs of blanks (squid's relaxed
// parser takes them), "HTTP/" any case. The look reads only as far as the
// bytes could still begin a request line: the first byte that cannot
// ends it, so a binary or server-first protocol is never kept waiting;
// a buffer full of such a prefix counts as HTTP (the request parsing
// then refuses it).
func looksLikeHTTP(br *bufio.Reader) (n int, ok bool) {
	blank := func(c byte) bool { return c == ' ' || c == '\t' || c == '\v' || c == '\f' }
	const (
		method = iota
		afterMethod
		target
		afterTarget
	)
	state, version := method, 0
	for i := 0; ; i++ {
		b, err := br.Peek(i + 1)
		if errors.Is(err, bufio.ErrBufferFull) {
			return n, i > 0
		}
		if err != nil {
			return 0, false
		}
		c := b[i]
		switch {
		case state == method && i == n && (c == '\r' || c == '\n' || blank(c)):
			n++ // blank bytes before the request line
		case state == method && i > n && blank(c):
			state = afterMethod
		case state == method:
			if !isTokenByte(c) {
				return 0, false
			}
		case state == afterMethod && blank(c), state == afterTarget && blank(c) && version == 0:
		case state == afterMethod, state == target && !blank(c):
			if c <= ' ' || c == 0x7f {
				return 0, false
			}
			state = target
		case state == target:
			state = afterTarget
		default: // afterTarget, in "HTTP/"
			if c|0x20 != "http/"[version] && c != "HTTP/"[version] {
				return 0, false
			}
			if version++; version == len("HTTP/") {
				return n, true
			}
		}
	}
}

// isTokenByte reports whether c may be part of an HTTP token (RFC 9110
// 5.6.2), such as a method.
func isTokenByte(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// peekServerName returns the server name of the TLS ClientHello at the
// head of br, without consuming it; ok is false when the record cannot be
// read as one.
func peekServerName(br *bufio.Reader) (string, bool) {
	hdr, err := br.Peek(5)
	if err != nil {
		return "", false
	}
	n := int(binary.BigEndian.Uint16(hdr[3:5]))
	if n > br.Size()-5 {
		return "", false
	}
	rec, err := br.Peek(5 + n)
	if err != nil {
		return "", false
	}
	return clientHelloServerName(rec[5:])
}

// clientHelloServerName parses a handshake message holding a ClientHello
// (RFC 8446 4.1.2) and returns its server_name extension's host name.
func clientHelloServerName(b []byte) (string, bool) {
	r := reader{b: b}
	if typ, ok := r.u8(); !ok || typ != 1 {
		return "", false
	}
	if _, ok := r.bytes(3); !ok { // length
		return "", false
	}
	if _, ok := r.bytes(2 + 32); !ok { // version, random
		return "", false
	}
	if _, ok := r.vec(1); !ok { // session id
		return "", false
	}
	if _, ok := r.vec(2); !ok { // cipher suites
		return "", false
	}
	if _, ok := r.vec(1); !ok { // compression methods
		return "", false
	}
	exts, ok := r.vec(2)
	if !ok {
		return "", true // no extensions: no name
	}
	er := reader{b: exts}
	for len(er.b) > 0 {
		typ, ok1 := er.u16()
		data, ok2 := er.vec(2)
		if !ok1 || !ok2 {
			return "", false
		}
		if typ != 0 {
			continue
		}
		sr := reader{b: data}
		list, ok := sr.vec(2)
		if !ok {
			return "", false
		}
		lr := reader{b: list}
		for len(lr.b) > 0 {
			nt, ok1 := lr.u8()
			name, ok2 := lr.vec(2)
			if !ok1 || !ok2 {
				return "", false
			}
			if nt == 0 {
				return string(name), true
			}
		}
	}
	return "", true
}

type reader struct{ b []byte }

func (r *reader) bytes(n int) ([]byte, bool) {
	if n > len(r.b) {
		return nil, false
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out, true
}

func (r *reader) u8() (byte, bool) {
	b, ok := r.bytes(1)
	if !ok {
		return 0, false
	}
	return b[0], true
}

func (r *reader) u16() (int, bool) {
	b, ok := r.bytes(2)
	if !ok {
		return 0, false
	}
	return int(binary.BigEndian.Uint16(b)), true
}

func (r *reader) vec(lenBytes int) ([]byte, bool) {
	lb, ok := r.bytes(lenBytes)
	if !ok {
		return nil, false
	}
	n := 0
	for _, x := range lb {
		n = n<<8 | int(x)
	}
	return r.bytes(n)
}

// socks serves a SOCKS5 client (RFC 1928), CONNECT only: with no
// authentication, or with the listener's token as a username and password
// (RFC 1929) when it has one.
func (l *Listener) socks(c net.Conn, br *bufio.Reader) {
	hdr := make([]byte, 2)
	if _, err := io.ReadFull(br, hdr); err != nil {
		return
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return
	}
	method := byte(0) // no authentication
	if l.auth != nil {
		method = 2 // username and password
	}
	if !slices.Contains(methods, method) {
		_, _ = c.Write([]byte{5, 0xff})
		return
	}
	if _, err := c.Write([]byte{5, method}); err != nil {
		return
	}
	if l.auth != nil {
		if !l.socksAuthorized(c, br) {
			return
		}
		if !l.admit(c) {
			socksReply(c, 1) // general failure
			return
		}
		defer l.clients.done()
	}
	req := make([]byte, 4)
	if _, err := io.ReadFull(br, req); err != nil || req[0] != 5 {
		return
	}
	var host string
	switch req[3] {
	case 1, 4:
		b := make([]byte, map[byte]int{1: 4, 4: 16}[req[3]])
		if _, err := io.ReadFull(br, b); err != nil {
			return
		}
		a, _ := netip.AddrFromSlice(b)
		host = a.Unmap().String()
	case 3:
		n, err := br.ReadByte()
		if err != nil {
			return
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(br, b); err != nil {
			return
		}
		host = string(b)
	default:
		socksReply(c, 8) // address type not supported
		return
	}
	pb := make([]byte, 2)
	if _, err := io.ReadFull(br, pb); err != nil {
		return
	}
	port := binary.BigEndian.Uint16(pb)
	// As sent: the denial makes it reportable, and ParseTarget refuses
	// what is not a host name or an address.
	target := joinHostPort(host, port)
	if req[1] != 1 {
		l.deny("connect", target, RuleSOCKSCommand)
		socksReply(c, 7) // command not supported
		return
	}
	t, err := ParseTarget(target)
	if err != nil {
		socksReply(c, 4)
		return
	}
	up, r := l.connect(t)
	if r != nil {
		if r.rule != "" {
			l.deny(r.op, t.String(), r.rule)
			socksReply(c, 2) // not allowed by ruleset
		} else {
			socksReply(c, 4) // host unreachable
		}
		return
	}
	defer l.untrack(up)
	_ = c.SetReadDeadline(time.Time{})
	socksReply(c, 0)
	l.tunnel(c, br, up, t)
}

// socksAuthorized reads a SOCKS5 username and password (RFC 1929) and
// answers it: success only for the listener's credentials.
func (l *Listener) socksAuthorized(c net.Conn, br *bufio.Reader) bool {
	field := func() ([]byte, bool) {
		n, err := br.ReadByte()
		if err != nil {
			return nil, false
		}
		b := make([]byte, n)
		_, err = io.ReadFull(br, b)
		return b, err == nil
	}
	ver, err := br.ReadByte()
	if err != nil || ver != 1 {
		return false
	}
	user, ok := field()
	if !ok {
		return false
	}
	pass, ok := field()
	if !ok {
		return false
	}
	if !l.authorized(slices.Concat(user, []byte(":"), pass)) {
		_, _ = c.Write([]byte{1, 1})
		return false
	}
	_, err = c.Write([]byte{1, 0})
	return err == nil
}

func socksReply(c net.Conn, code byte) {
	_, _ = c.Write([]byte{5, code, 0, 1, 0, 0, 0, 0, 0, 0})
}
