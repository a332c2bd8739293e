package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/agentproc/agentproc"
)

// sseKeepAlive is how often GET /events writes a comment line while no
// event comes, so that proxies and clients do not take the stream for dead.
const sseKeepAlive = 15 * time.Second

// events serves GET /events: the caller's events (agentproc.Scope
// Subscribe) as Server-Sent Events, one "id: SEQ", "event: TYPE" and
// "data: JSON" block per event. A client that reconnects with the
// Last-Event-ID header (or ?after=SEQ) resumes after that event, from the
// Manager's bounded history; events no longer retained are reported as one
// "lost" event. The stream ends when the client leaves or the Manager is
// closed.
func (h *handler) events(w http.ResponseWriter, r *http.Request) {
	s, ok := h.scope(w, r)
	if !ok {
		return
	}
	after, resume := r.Header.Get("Last-Event-ID"), true
	if after == "" {
		after = r.URL.Query().Get("after")
	}
	var seq uint64
	if after == "" {
		resume = false
	} else {
		var err error
		if seq, err = strconv.ParseUint(after, 10, 64); err != nil {
			writeError(w, &Error{
				StatusCode: http.StatusBadRequest,
				Message:    fmt.Sprintf("Invalid event ID %q: want the sequence number of an event.", after),
			})
			return
		}
	}
	rc := http.NewResponseController(w)
	// The stream is meant to stay open: no write deadline. A writer that
	// cannot take one (http.ErrNotSupported) has none to lift.
	_ = rc.SetWriteDeadline(time.Time{})

	ctx := r.Context()
	var ch <-chan agentproc.Event
	if resume {
		ch = s.SubscribeAfter(ctx, seq)
	} else {
		ch = s.Subscribe(ctx)
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()

	keepAlive := h.cfg.clock.NewTicker(sseKeepAlive, "httpapi", "events")
	defer keepAlive.Stop()
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				return
			}
			data, err := json.Marshal(e)
			if err != nil {
				return
			}
			if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Type, data); err != nil {
				return
			}
		case <-keepAlive.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}
