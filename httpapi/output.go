package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"time"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/internal/pattern"
)

// writeHeadroom is how long past the end of a blocking wait the connection's
// write deadline lies, so that the reply can still be written.
const writeHeadroom = 30 * time.Second

// outputQuery is the parsed query of GET /{id}/output.
type outputQuery struct {
	wait     bool           // until exit
	waitFor  *regexp.Regexp // until a line matches; nil for none
	waitPort int            // until the tree listens on it; -1 for no wait
	follow   bool           // until there is output after offset
	plain    bool           // render output as terminal-clean text
	// limit bounds a blocking wait: the client's timeout, at most the
	// server's cap.
	limit time.Duration
	// offset is where a read starts; -1 asks for a snapshot instead.
	offset int64
	// since, when not zero, moves the read's start to the output written
	// at or after it (agentproc.Process.OffsetAt), offset or not.
	since time.Time
}

// parseOutputQuery validates the query; an invalid value is the client's
// mistake and gets a 400 rather than being ignored.
func parseOutputQuery(q url.Values, maxWait time.Duration) (outputQuery, *Error) {
	oq := outputQuery{limit: maxWait, offset: -1, waitPort: -1}
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
	if v := q.Get("wait_for"); v != "" {
		re, err := regexp.Compile(v)
		if err != nil {
			return bad("wait_for", v, "not a regular expression: "+err.Error())
		}
		// The host matches it against output at the program's size
		// times the text's length (fourteenth attack review).
		if err := pattern.Check(re); err != nil {
			return bad("wait_for", v, err.Error())
		}
		if oq.wait {
			// Sequencing the two waits in one request would hide which
			// one the timeout ended.
			return bad("wait_for", v, "use either wait or wait_for, not both")
		}
		oq.waitFor = re
	}
	if v := q.Get("wait_port"); v != "" {
		port, err := strconv.Atoi(v)
		if err != nil || port < 0 || port > 65535 {
			return bad("wait_port", v, "want a port from 0 (any) to 65535")
		}
		if oq.wait || oq.waitFor != nil {
			return bad("wait_port", v, "use one of wait, wait_for and wait_port")
		}
		oq.waitPort = port
	}
	if v := q.Get("plain"); v != "" {
		plain, err := strconv.ParseBool(v)
		if err != nil {
			return bad("plain", v, "want true or false")
		}
		oq.plain = plain
	}
	if v := q.Get("offset"); v != "" {
		off, err := strconv.ParseInt(v, 10, 64)
		if err != nil || off < 0 {
			return bad("offset", v, "want a byte offset of 0 or more")
		}
		oq.offset = off
	}
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return bad("since", v, `want an RFC 3339 time such as "2026-11-27T09:00:00Z"`)
		}
		oq.since = t
	}
	if v := q.Get("follow"); v != "" {
		follow, err := strconv.ParseBool(v)
		if err != nil {
			return bad("follow", v, "want true or false")
		}
		if follow && ((oq.offset < 0 && oq.since.IsZero()) || oq.wait || oq.waitFor != nil || oq.waitPort >= 0) {
			return bad("follow", v, "follow needs offset or since, and no other wait")
		}
		oq.follow = follow
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
	if !q.since.IsZero() {
		q.offset = max(q.offset, p.OffsetAt(q.since))
	}
	var opts []agentproc.OutputOption
	if q.plain {
		opts = append(opts, agentproc.Plain)
	}
	var match string
	var port *agentproc.Port
	matched := false
	var waitErr error
	switch {
	case q.wait:
		h.hold(w, r, q.limit, func(ctx context.Context) { _, _ = p.Wait(ctx) })
	case q.waitFor != nil:
		// ErrExited needs no reply of its own: running false and no match
		// say it.
		h.hold(w, r, q.limit, func(ctx context.Context) {
			var err error
			match, err = p.WaitMatch(ctx, q.waitFor, opts...)
			matched = err == nil
		})
	case q.follow:
		h.hold(w, r, q.limit, func(ctx context.Context) { _, _ = p.WaitOutput(ctx, q.offset) })
	case q.waitPort >= 0:
		h.hold(w, r, q.limit, func(ctx context.Context) {
			pt, err := p.WaitPort(ctx, q.waitPort)
			if err == nil {
				port, matched = &pt, true
			} else if errors.Is(err, agentproc.ErrUnsupported) {
				waitErr = err
			}
		})
	}
	if waitErr != nil {
		writeError(w, errorFor(waitErr, p.ID()))
		return
	}
	if r.Context().Err() != nil {
		// The client has gone: nobody reads the reply.
		return
	}

	var resp Output
	var info agentproc.Info
	if q.offset < 0 {
		out := p.Output(opts...)
		info = out.Info
		resp.Output, resp.Truncated = out.Text, out.Truncated
	} else {
		// Info first: the exit is published only once the output is
		// final, so a reply that says exited never holds a read taken
		// while the process could still write. (The other order could
		// pair a read from before the last write with the exit.)
		info = p.Info()
		c, err := p.Read(q.offset)
		if err != nil {
			writeError(w, errorFor(err, p.ID()))
			return
		}
		resp.Output = c.Data
		if q.plain {
			resp.Output = agentproc.PlainText(c.Data)
		}
		resp.Position = &Position{Offset: c.Offset, Next: c.Next, Omitted: c.Omitted, EOF: c.EOF}
	}
	resp.Running, resp.ExitCode = info.Running, info.ExitCode
	resp.Reason, resp.Signal = info.Reason, info.ExitSignal
	resp.Match = match
	resp.Port = port
	resp.AwaitingInput = info.AwaitingInput
	// A wait that ended while the process runs, without a match and with
	// the client still there, was ended by the limit.
	resp.TimedOut = (q.wait || q.waitFor != nil || q.waitPort >= 0) && !matched && info.Running
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
