package agentproc

import (
	"crypto/rand"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/xerrors"

	"github.com/agentproc/agentproc/internal/egress"
)

// NetworkHosts: a tree reaches the hosts of Sandbox.AllowHosts through the
// Manager's proxy (internal/egress), and nothing else. The route of one
// Start: the policy parses the list (setHosts); prepareSandbox gives the
// run a hostsRun; on the starting thread, once it is in the tree's network
// namespace and before it is confined (a ready thread: ahead of the
// Start), the OS layer makes the tree's own listener there and lets the
// thread connect to its port only (makeHostsListener, hosts_linux.go);
// the Start takes it over and sets the proxy variables (adopt); once
// the Process exists, serveHosts hands the listener to the proxy with the
// process's list and a denial callback; finish closes it. The proxy is
// made by the first such Start and closed by Close: a Manager that never
// uses NetworkHosts never makes it.

// Denial is something a sandboxed tree tried and was refused.
type Denial struct {
	// Kind is "network" (the proxy refused a connection) or "file".
	Kind string
	// Op is, for "network", "connect" (AllowHosts does not allow the
	// target, the proxy does not relay that request, or it closed a tunnel
	// the tree left unread too long) or "resolve" (the
	// target's name resolves only to addresses the proxy never dials).
	Op string
	// Target is "host:port" for "network", the path for "file".
	Target string
	// Rule says what refused it: "not in AllowHosts", "resolves to a
	// loopback address", "port not allowed for this host".
	Rule string
	// Count is how many times the same Kind, Op, Target and Rule was
	// refused.
	Count int
	// Inferred is true for a denial read from the tree's own messages
	// rather than reported by the mechanism that refused it.
	Inferred bool
}

// maxDenials bounds Info.Denials: a tree probing ever new hosts adds the
// distinct denials past it to the last entry's Count.
const maxDenials = 64

// validateAllowHosts checks Sandbox.AllowHosts against the Network.
func validateAllowHosts(sb *Sandbox) error {
	if sb.network() != NetworkHosts {
		if len(sb.AllowHosts) > 0 {
			return xerrors.Errorf("Sandbox.AllowHosts is set but Sandbox.Network is %q, not %q: %w",
				sb.network(), NetworkHosts, ErrInvalidRequest)
		}
		return nil
	}
	if _, err := egress.ParseList(sb.AllowHosts); err != nil {
		return xerrors.Errorf("Sandbox.AllowHosts: %s: %w", strings.TrimSuffix(err.Error(), ": "+egress.ErrBadEntry.Error()), ErrInvalidRequest)
	}
	return nil
}

// setHosts parses a NetworkHosts policy's list.
func (pol *sandboxPolicy) setHosts(hosts []string) error {
	if pol.network != NetworkHosts {
		return nil
	}
	l, err := egress.ParseList(hosts)
	if err != nil {
		return xerrors.Errorf("Sandbox.AllowHosts: %v: %w", err, ErrInvalidRequest)
	}
	pol.hosts = l
	sorted := slices.Clone(hosts)
	slices.Sort(sorted)
	pol.hostsKey = strings.Join(slices.Compact(sorted), "\x00")
	return nil
}

// narrowHosts is Narrow's rule for AllowHosts: every entry req names must
// be allowed by base's list.
func narrowHosts(base, req []string) ([]string, error) {
	bl, err := egress.ParseList(base)
	if err != nil {
		return nil, xerrors.Errorf("base Sandbox.AllowHosts: %v: %w", err, ErrInvalidRequest)
	}
	for i, e := range req {
		ok, err := bl.Covers(e)
		if err != nil {
			return nil, xerrors.Errorf("Sandbox.AllowHosts[%d]: %v: %w", i, err, ErrInvalidRequest)
		}
		if !ok {
			return nil, xerrors.Errorf("Sandbox.AllowHosts[%d] %q is not allowed by the base policy's AllowHosts: %w", i, e, ErrSandboxLoosened)
		}
	}
	return slices.Clone(req), nil
}

// hostsProxy is a Manager's egress proxy, made by the first NetworkHosts
// Start.
type hostsProxy struct {
	mu     sync.Mutex
	p      *egress.Proxy
	closed bool
}

// get returns the Manager's proxy, making it at the first call.
func (h *hostsProxy) get(m *Manager) (*egress.Proxy, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	if h.p == nil {
		clock := m.cfg.clock
		h.p = egress.New(egress.Config{AddrFilter: &egress.AddrFilter{Now: func() time.Time { return clock.Now("agentproc", "egress") }}})
	}
	return h.p, nil
}

// close ends the proxy and every listener; after it no Start makes one.
func (h *hostsProxy) close() {
	h.mu.Lock()
	p := h.p
	h.closed, h.p = true, nil
	h.mu.Unlock()
	if p != nil {
		_ = p.Close()
	}
}

// hostsRun is one NetworkHosts Start's part: its list, its token, the
// listener the starting thread made, and once served, the proxy's
// listener.
type hostsRun struct {
	list  *egress.List
	proxy *egress.Proxy
	// token is the secret the tree's proxy variables carry, which its
	// listener requires of every connection (egress.Policy.Token): without
	// root a listener is on the host's loopback, where any process of the
	// machine reaches it (thirteenth attack review,
	// TestAttackDenialFromOutsideTheTree). 128 random bits, one a tree: a
	// token of the Manager's opened every listener to any tree that had
	// it, and a NetworkHost tree, which reaches the host's loopback whole,
	// read it from a file another tree wrote and used another owner's
	// tree's listener (seventeenth attack review,
	// TestAttackNetworkHostTreeUsesAnotherTreesListener).
	token string
	// tokenSet redacts the token in the tree's output, even with the
	// Manager's redaction off (redactWithToken).
	tokenSet *redactSet
	// release lets the token go from its owner's started secrets
	// (ownerSecrets.hold), where every stream of the owner redacts it
	// while the tree runs: a tree can hand it to another tree's output
	// through a file of the work dir they share (fifteenth attack review,
	// TestAttackProxyTokenThroughAnotherTree). Afterwards it opens nothing.
	release func()
	ln      net.Listener // the listener made for the tree, nil until made and after it is served
	port    int
	lis     *egress.Listener
}

// proxyTokenName is the name a redacted proxy token reads as.
const proxyTokenName = "AGENTPROC_PROXY_TOKEN"

// newHostsRun returns the part of owner's Start with list on m's proxy,
// with a token of its own.
func (m *Manager) newHostsRun(list *egress.List, owner string) (*hostsRun, error) {
	proxy, err := m.hosts.get(m)
	if err != nil {
		return nil, err
	}
	token := rand.Text()
	entry := secretEntry{name: proxyTokenName, value: token}
	release := func() {}
	if !m.cfg.noRedaction {
		if release, err = m.owned.hold(owner, []secretEntry{entry}, subjectProxyToken); err != nil {
			return nil, err
		}
	}
	return &hostsRun{list: list, proxy: proxy, token: token, tokenSet: newRedactSet([]secretEntry{entry}), release: release}, nil
}

// hostsListener is a tree's proxy listener, made on its starting thread
// (makeHostsListener): the listener (nil for none, the zero value) and its
// port.
type hostsListener struct {
	ln   net.Listener
	port int
}

// close closes a listener that was made but never handed over.
func (l *hostsListener) close() {
	if l.ln != nil {
		_ = l.ln.Close()
		l.ln = nil
	}
}

// adopt takes over l, made on the thread that starts cmd, and points
// cmd's proxy variables at it.
func (h *hostsRun) adopt(cmd *exec.Cmd, l hostsListener) {
	h.ln, h.port = l.ln, l.port
	cmd.Env = mergeEnv(cmd.Env, proxyEnv(l.port, h.token))
}

// proxyEnv are the variables that point a tree at its listener, with its
// token as the password: HTTP clients send it as Proxy-Authorization
// (curl, git, Go, npm and pip do, TestSandboxHostsRealClients), SOCKS5
// clients, which ALL_PROXY serves, by username and password.
func proxyEnv(port int, token string) map[string]string {
	hostPort := egress.ProxyUser + ":" + token + "@127.0.0.1:" + strconv.Itoa(port)
	env := map[string]string{"NO_PROXY": "", "no_proxy": ""}
	for k, u := range map[string]string{"HTTPS_PROXY": "http://" + hostPort, "HTTP_PROXY": "http://" + hostPort,
		"ALL_PROXY": "socks5h://" + hostPort} {
		env[k], env[strings.ToLower(k)] = u, u
	}
	return env
}

// redactWithToken is rd with the token's set added, for the tree's
// output and what its proxy reports; counted in p's Info.Redactions. The
// token is redacted even when the Manager's redaction is off: it is the
// library's secret, not the caller's.
func (h *hostsRun) redactWithToken(rd redaction, p *Process) redaction {
	rd.sets[1] = h.tokenSet
	if rd.count == nil {
		rd.count = &p.state.redactions
	}
	return rd
}

// serve hands the listener to the proxy, reporting p's denials.
func (h *hostsRun) serve(p *Process) error {
	ln := h.ln
	h.ln = nil // Serve takes it over, even when it fails
	// Redacted in the proxy too, before it escapes what the tree sent:
	// a secret's escaped form is one no redaction matches.
	lis, err := h.proxy.Serve(ln, egress.Policy{List: h.list, Token: h.token, Redact: p.redact.redactHost, Deny: func(d egress.Denial) {
		p.addDenial(Denial{Kind: "network", Op: d.Op, Target: d.Target, Rule: d.Rule})
	}})
	if err != nil {
		return xerrors.Errorf("proxy: %w", err)
	}
	h.lis = lis
	return nil
}

// close closes the listener, served or not, and lets its token go from
// the owner's started secrets.
func (h *hostsRun) close() {
	if h == nil {
		return
	}
	if h.release != nil {
		h.release()
	}
	if h.lis != nil {
		_ = h.lis.Close()
		h.lis = nil
	}
	if h.ln != nil {
		_ = h.ln.Close()
		h.ln = nil
	}
}

// addDenial records d in p's Info (a repeat adds to its Count) and
// publishes EventDenied for a new one.
func (p *Process) addDenial(d Denial) {
	d.Count = 1
	// The target is what the tree asked for (a host name, a path): a
	// command can put a secret there (curl https://$TOKEN.example/, a
	// path under a hidden dir), and Info, events and httpapi show it. A
	// host name reaches the proxy in lower case. The rule too: the proxy
	// names a TLS server name the tree sent in it (seventh attack review),
	// and llmtool prints it to the model.
	if d.Kind == "network" {
		d.Target = p.redact.redactHost(d.Target)
		d.Rule = p.redact.redactHost(d.Rule)
	} else {
		d.Target = p.redact.redactString(d.Target)
		d.Rule = p.redact.redactString(d.Rule)
	}
	p.state.mu.Lock()
	ds := p.state.info.Denials
	i := slices.IndexFunc(ds, func(x Denial) bool {
		return x.Kind == d.Kind && x.Op == d.Op && x.Target == d.Target && x.Rule == d.Rule && x.Inferred == d.Inferred
	})
	isNew := i < 0
	switch {
	case i >= 0:
		ds[i].Count++
	case len(ds) < maxDenials:
		p.state.info.Denials = append(ds, d)
	default:
		ds[len(ds)-1].Count++
		isNew = false
	}
	p.state.mu.Unlock()
	if isNew {
		p.emit(Event{Type: EventDenied, Denial: &d})
	}
}

// DenialHint is the smallest change to a policy that would allow what d
// refused, for a model or a person to read; never to turn the sandbox off.
func DenialHint(d Denial) string {
	switch d.Rule {
	case "Hide":
		return "none: the path is hidden by the policy (a credential); work without it"
	case "ReadOnly":
		return "none: the path is read-only by the policy"
	case "outside Write":
		return "write inside the work dir or $TMPDIR, or add the directory to the sandbox's write paths"
	case "outside Read":
		return "add the path to the sandbox's read paths"
	}
	switch {
	case strings.HasPrefix(d.Rule, "resolves to a private"):
		// An IPv6 address refused for the private IPv4 address it carries
		// (NAT64, 6to4, Teredo, IPv4-compatible) is allowed by listing that
		// IPv4 address, which the host's name does not tell.
		if v4, v6, ok := egress.CarriedIn(d.Rule); ok {
			return "add " + v4.String() + " (carried in " + v6.String() + ") or its CIDR to allow_hosts"
		}
		host, _, _ := strings.Cut(d.Target, ":")
		if a, ok := egress.PrivateIn(d.Rule); ok {
			return "add " + a.String() + " or its CIDR to allow_hosts (the name " + host + " resolves to that private address)"
		}
		return "add the host's IP address or CIDR to allow_hosts (the name " + host + " resolves to a private address)"
	case strings.HasPrefix(d.Rule, "resolves to"):
		return "none: the proxy never connects to such an address"
	case d.Rule == egress.RuleTooManyConns:
		return "open fewer connections to the proxy at once"
	case strings.HasPrefix(d.Rule, egress.RuleUnreadPrefix):
		return "read each connection's data as it comes, send a host no more than it reads, or open fewer at once"
	case d.Rule == egress.RuleNotListed, d.Rule == egress.RulePortNotAllowed:
		return "add `" + d.Target + "` to allow_hosts"
	}
	return "none: the proxy does not relay this request"
}

// redactHostsToken is rd with r's proxy token added, if r has one.
func (r *sandboxRun) redactHostsToken(rd redaction, p *Process) redaction {
	if r == nil || r.hosts == nil {
		return rd
	}
	return r.hosts.redactWithToken(rd, p)
}

// serveHosts serves r's proxy listener for p, if r has one.
func (r *sandboxRun) serveHosts(p *Process) error {
	if r == nil || r.hosts == nil || r.hosts.ln == nil {
		return nil
	}
	return r.hosts.serve(p)
}
