package httpapi

import (
	"net/http"
	"time"

	"cdr.dev/slog/v3"
	"github.com/coder/quartz"

	"github.com/agentproc/agentproc"
)

// An Option configures the handler NewHandler returns. Options are applied in
// order; a later option overrides an earlier one of the same kind.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// config holds every handler setting; defaultConfig is the one place where
// defaults live.
type config struct {
	ownerHeader string
	authorize   func(*http.Request) (string, error)
	maxWait     time.Duration
	clock       quartz.Clock

	trustedOrigins []string
	allowedHosts   []string
	maxPerOwner    int
	logger         *slog.Logger       // nil: the standard library's log package
	coder          bool               // WithCoderCompat
	ui             bool               // WithUI
	sandbox        *agentproc.Sandbox // WithSandbox; see sandbox.go
	sandboxSet     bool
}

// Defaults, named so the README and tests can refer to them.
const (
	// DefaultOwnerHeader is the request header that names the owner when
	// no WithAuthorize hook is set.
	DefaultOwnerHeader = "X-Agentproc-Owner"
	// DefaultMaxWait caps every blocking wait, whatever timeout the client
	// asks for.
	DefaultMaxWait = 5 * time.Minute
	// MaxBodyBytes is the largest request body the handler reads; a larger
	// one is refused with 413.
	MaxBodyBytes = 1 << 20
)

func defaultConfig() config {
	return config{
		ownerHeader: DefaultOwnerHeader,
		maxWait:     DefaultMaxWait,
		clock:       quartz.NewReal(),
	}
}

// WithOwnerHeader sets the request header whose value is the owner of the
// request (see NewHandler). An empty name keeps DefaultOwnerHeader. The
// header is a convenience for a handler behind something that sets it, not
// authentication: any client that reaches the handler can send any value.
// It is ignored when WithAuthorize is set.
func WithOwnerHeader(name string) Option {
	return optionFunc(func(c *config) {
		if name != "" {
			c.ownerHeader = http.CanonicalHeaderKey(name)
		}
	})
}

// WithAuthorize makes authorize decide the owner of every request instead of
// the owner header. It runs before anything else; when it returns an error
// the request is refused with 401 and the error's text as the detail, so a
// request without an identity never sees any process. Returning "" and no
// error is a deliberate choice of the unowned view (Manager.Scope("")).
// A nil authorize keeps the header.
func WithAuthorize(authorize func(*http.Request) (owner string, err error)) Option {
	return optionFunc(func(c *config) { c.authorize = authorize })
}

// WithMaxWait caps how long a blocking wait (?wait=true) holds a request,
// whatever timeout the client asks for. When the cap expires the reply is
// the process's current state, marked timed_out. d <= 0 keeps
// DefaultMaxWait.
func WithMaxWait(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.maxWait = d
		}
	})
}

// WithClock sets the clock that times blocking waits. Tests pass a quartz
// mock. A nil clock keeps the real one. The write deadline of a held
// connection is always in real time: the network stack enforces it.
func WithClock(clk quartz.Clock) Option {
	return optionFunc(func(c *config) {
		if clk != nil {
			c.clock = clk
		}
	})
}

// WithTrustedOrigins lets browser pages served from these origins make
// state-changing requests ("https://ui.example.com", scheme://host[:port]).
// Without it every non-safe request a browser marks as cross-origin
// (Sec-Fetch-Site, or an Origin that is not the Host) is refused with 403
// (net/http.CrossOriginProtection); requests without browser headers, such
// as Go clients and curl, are unaffected. NewHandler panics on a malformed
// origin, as http.ServeMux does on a malformed pattern.
func WithTrustedOrigins(origins ...string) Option {
	return optionFunc(func(c *config) { c.trustedOrigins = append(c.trustedOrigins, origins...) })
}

// WithAllowedHosts sets the Host header values the handler answers, as host
// names or addresses ("agent.internal", "10.0.0.5", matching with any port)
// or exact host:port pairs; any other Host is refused with 403. Without it,
// a request that arrived on a loopback address must name a loopback host
// (localhost, a name under .localhost, 127.0.0.0/8 or ::1), which defeats
// DNS rebinding against a loopback listener, and a request that arrived on
// any other address or on a Unix socket may name any host.
func WithAllowedHosts(hosts ...string) Option {
	return optionFunc(func(c *config) { c.allowedHosts = append(c.allowedHosts, hosts...) })
}

// WithMaxRunningPerOwner caps how many processes one owner may have running
// at a time; a Start beyond it is refused with 429, like the Manager-wide
// agentproc.WithMaxRunning, so one owner cannot take every slot. Starts in
// flight count against the cap, so concurrent Starts never overshoot it. A
// repeated keyed start that would attach to a running process counts as a
// start too. n <= 0, the default, means no per-owner cap.
func WithMaxRunningPerOwner(n int) Option {
	return optionFunc(func(c *config) { c.maxPerOwner = max(n, 0) })
}

// WithLogger sets where the handler logs, which today is only the warning
// NewHandler writes when no WithAuthorize hook is set. Without it that
// warning goes to the standard library's log package, as net/http.Server's
// errors do, so it is not lost by default.
func WithLogger(l slog.Logger) Option {
	return optionFunc(func(c *config) { c.logger = &l })
}
