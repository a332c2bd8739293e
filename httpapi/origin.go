package httpapi

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// The handler is a remote-execution API: whoever can POST /start runs a
// command as the agent's user. The checks in this file run before any route
// and keep a web page the agent's user happens to visit from driving it:
//
//   - checkHost refuses a Host the handler does not serve, which is what a
//     DNS-rebinding page sends (it also lets the page read replies);
//   - CrossOriginProtection refuses a state-changing request a browser marks
//     as coming from another origin;
//   - requireJSON refuses the bodies a page can send without a CORS
//     preflight (text/plain, form encodings, none at all).
//
// None of them authenticates anyone: a process on the machine, or anything
// that can reach a non-loopback listener, still needs WithAuthorize to be
// kept out.

// checkOrigin wraps next with the checks above.
func (h *handler) checkOrigin(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	for _, o := range h.cfg.trustedOrigins {
		if err := cop.AddTrustedOrigin(o); err != nil {
			// A constant in the caller's code, like a bad ServeMux
			// pattern: fail at construction, not on the first request.
			panic(fmt.Sprintf("httpapi: WithTrustedOrigins: %v", err))
		}
	}
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &Error{
			StatusCode: http.StatusForbidden,
			Message:    "Cross-origin browser requests are refused.",
			Detail:     "Origin " + r.Header.Get("Origin") + " is not trusted (see WithTrustedOrigins).",
		})
	}))
	checked := cop.Handler(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e := h.checkHost(r); e != nil {
			writeError(w, e)
			return
		}
		checked.ServeHTTP(w, r)
	})
}

// checkHost applies the Host rule: with WithAllowedHosts, the Host must be
// one of them; without, a request that arrived on a loopback address must
// name a loopback host (localhost, *.localhost, 127.0.0.0/8, ::1), and any
// other request passes (a LAN or public listener is reached by names the
// handler cannot know; WithAllowedHosts covers it).
func (h *handler) checkHost(r *http.Request) *Error {
	host := hostName(r.Host)
	refuse := &Error{
		StatusCode: http.StatusForbidden,
		Message:    fmt.Sprintf("Host %q is not served here.", r.Host),
		Detail:     "A browser page on another site may be using DNS rebinding; allow the name with WithAllowedHosts if it is yours.",
	}
	if len(h.cfg.allowedHosts) > 0 {
		for _, a := range h.cfg.allowedHosts {
			if strings.EqualFold(a, host) || strings.EqualFold(a, r.Host) {
				return nil
			}
		}
		return refuse
	}
	if !arrivedOnLoopback(r) || loopbackHost(host) {
		return nil
	}
	return refuse
}

// hostName returns the Host header without its port and brackets.
func hostName(hostport string) string {
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		return host
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
}

// arrivedOnLoopback reports whether the connection's local address is a
// loopback IP. A Unix socket is not: no browser reaches one.
func arrivedOnLoopback(r *http.Request) bool {
	addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return false
	}
	return tcp.IP.IsLoopback()
}

// loopbackHost reports whether host names the loopback interface. Names
// under .localhost resolve there by RFC 6761, and browsers enforce it.
func loopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// requireJSON writes 415 and returns false unless the request declares a JSON
// body. A page can POST text/plain, a form or an untyped Blob cross-origin
// without a preflight, but not application/json.
func requireJSON(w http.ResponseWriter, r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && mt == "application/json" {
		return true
	}
	writeError(w, &Error{
		StatusCode: http.StatusUnsupportedMediaType,
		Message:    fmt.Sprintf("The request body must be sent as application/json, not %q.", ct),
	})
	return false
}
