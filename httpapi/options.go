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

// WithSandbox makes sb the operator's policy: every start runs under it,
// and a start request's sandbox can only narrow it. Without it the
// Manager's default (agentproc.WithSandbox) is the operator's policy; nil
// here means no operator's policy even when the Manager has one: a
// client's sandbox then applies as given, and a request without one runs
// under the Manager's default (unconfined where it has none), its work dir
// held within that default's Write as with any operator's policy.
func WithSandbox(sb *agentproc.Sandbox) Option {
	sb = sb.Clone()
	return optionFunc(func(c *config) { c.sandbox, c.sandboxSet = sb, true })
}

// WithCoderCompat makes the handler behave as the process API of Coder's
// workspace agent does (agent/agentproc in github.com/coder/coder), for
// Coder's own client, when mounted under /api/v0/processes. It works with a
// Manager made with default options: what the profile needs is asked per
// request or rendered here. Only Coder's routes are served:
//
//	POST /start            {"command", "workdir", "env", "background",
//	                        "client_token"}
//	                       -> {"id", "started", "client_token", "attached"}
//	GET  /list             -> {"processes": [...]}, at most 10
//	GET  /{id}/output      -> {"output", "truncated", "running",
//	     ?wait=true            "exit_code", "command"}
//	POST /{id}/signal      {"signal": "kill" | "terminate"} -> {"message"}
//	GET  /tokens/{token}   -> {"found", "pending", "process_id",
//	                           "token_index_age_ms"}
//
// What differs from the default handler:
//
//   - The owner is the chat: the Coder-Chat-Id header, a UUID (an invalid
//     value counts as absent). Without it list, output and signal see every
//     process. With it, list shows that chat's processes only, while output,
//     signal and the token probe reach that chat's processes and those
//     started without a chat. A process a chat starts has CODER_CHAT_ID in
//     its environment. WithAuthorize, if set, still gates every request
//     (401), but the chat, not its owner, scopes it; the owner header is
//     not read.
//   - Commands run verbatim (agentproc.Request.Verbatim): no background
//     detection.
//   - A process ended by a signal reports exit code -1, as Coder does.
//   - client_token is agentproc.Request.Key, but one namespace across
//     chats: a repeat with the same token and request gets the same id,
//     started false and attached true; a different command, env, workdir,
//     background or chat is 409. The token fields and GET /tokens/{token}
//     follow Coder's newest API (2026) and may still change there.
//   - Output uses Coder's omission marker ("\n\n... [omitted N bytes]
//     ...\n\n") and line cut (" ... [truncated]" at 2048 bytes); truncated
//     is null when only lines were cut, and retained_bytes is the length
//     of the text sent.
//   - Status codes and messages are Coder's: any failure to start other
//     than a token conflict (409) or a running limit (429) is 500, a closed
//     Manager included; "interrupt" is 400; a wait value other than "true"
//     means no wait; the extension routes and query parameters are absent.
//   - POST bodies need no Content-Type, because Coder's client sends none.
//     The cross-origin and Host checks still apply: a browser page cannot
//     make a request look same-origin, and Coder's client sends no browser
//     headers. Coder's agent serves this API on its tailnet address, not
//     on loopback; use WithAllowedHosts if yours is reached by a name.
func WithCoderCompat() Option {
	return optionFunc(func(c *config) { c.coder = true })
}

// WithUI makes the handler serve a web page at "/" (relative to where it is
// mounted): a live table of the caller's processes with their state, ports
// and resources, the output of the selected one as a terminal shows it, and
// buttons to interrupt or stop one or all of them. Off by default. It is
// ignored with WithCoderCompat, whose routes the page does not speak. The
// ports shown are agentproc.Info.Ports, which the Manager keeps current for
// Background processes.
//
// The page's files are public to anyone who passes the Host check (they
// hold no data); every request the page makes for data or to act goes
// through the same authorization (WithAuthorize or the owner header),
// cross-origin and Host checks as any API request, so an owner sees only
// its own processes. A browser sends cookies and HTTP Basic credentials by
// itself; for a bearer token, open the page as /#token=TOKEN and it sends
// "Authorization: Bearer TOKEN" with every request (the fragment never
// reaches the server or its logs; the page keeps the token for the tab's
// session only). Replies under the page carry a strict
// Content-Security-Policy.
func WithUI() Option {
	return optionFunc(func(c *config) { c.ui = true })
}
