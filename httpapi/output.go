package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// writeHeadroom is how long past the end of a blocking wait the connection's
// write deadline lies, so that the reply can still be written.
const writeHeadroom = 30 * time.Second

// outputQuery is the parsed query of GET /{id}/output.
type outputQuery struct {
	wait bool
	// limit bounds a blocking wait: the client's timeout, at most the
	// server's cap.
	limit time.Duration
}

// parseOutputQuery validates the query; an invalid value is the client's
// mistake and gets a 400 rather than being ignored.
func parseOutputQuery(q url.Values, maxWait time.Duration) (outputQuery, *Error) {
	oq := outputQuery{limit: maxWait}
	bad := func(name, value, why string) (outputQuery, *Error) {
		return outputQuery{}, &Error{
			StatusCode: http.StatusBadRequest,
			Message:    fmt.Sprintf("Invalid query parameter %s=%q: %s.", name, value, why),
		}
	}
	if v := q.Get("wait"); v != "" {
		wait, err := strconv.ParseBool(v)
		if err != nil {
			return bad("wait", v, "want true or false")
		}
		oq.wait = wait
	}
	if v := q.Get("timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return bad("timeout", v, `want a positive duration such as "10s"`)
		}
		oq.limit = min(d, maxWait)
	}
	return oq, nil
}

func (h *handler) output(w http.ResponseWriter, r *http.Request) {
	s, ok := h.scope(w, r)
	if !ok {
		return
	}
	q, e := parseOutputQuery(r.URL.Query(), h.cfg.maxWait)
	if e != nil {
		writeError(w, e)
		return
	}
	p, ok := h.process(w, r, s)
	if !ok {
		return
	}
	if q.wait {
		h.hold(w, r, q.limit, func(ctx context.Context) { _, _ = p.Wait(ctx) })
		if r.Context().Err() != nil {
			// The client has gone: nobody reads the reply.
			return
		}
	}
	out := p.Output()
	resp := Output{
		Output:    out.Text,
		Truncated: out.Truncated,
		Running:   out.Running,
		ExitCode:  out.ExitCode,
		Reason:    out.Reason,
		Signal:    out.Signal,
	}
	// The wait ended while the process runs and the client is still
	// there, so the limit is what ended it.
	resp.TimedOut = q.wait && out.Running
	writeJSON(w, http.StatusOK, resp)
}

// hold runs wait with a context that ends when the client disconnects or
// limit passes on the handler's clock, whichever comes first, and keeps the
// connection's write deadline beyond that so a server WriteTimeout shorter
// than the wait does not cut the reply.
func (h *handler) hold(w http.ResponseWriter, r *http.Request, limit time.Duration, wait func(context.Context)) {
	// Real time on purpose: the network stack enforces the deadline. A
	// writer that cannot take one (http.ErrNotSupported) has no deadline
	// to extend.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(limit + writeHeadroom))

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	t := h.cfg.clock.AfterFunc(limit, cancel, "httpapi", "wait")
	defer t.Stop()
	wait(ctx)
}
