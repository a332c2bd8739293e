package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/agentproc/agentproc"
)

// stopAll stops every running process of the caller's owner at once
// (agentproc.Scope.StopAll) and replies with their final state. The stop
// ladder runs to its end even if the client goes away, so that nothing is
// left half-stopped; the reply can take up to the Manager's grace period.
func (h *handler) stopAll(w http.ResponseWriter, r *http.Request) {
	h.ownerWide(w, r, func(s *agentproc.Scope) ([]agentproc.Info, *Error) {
		// Real time on purpose, like a blocking wait: the network stack
		// enforces the deadline. The ladder's length is the Manager's grace
		// period, which this handler does not know, so the deadline is the
		// server's wait cap.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(h.cfg.maxWait + writeHeadroom))
		infos, err := s.StopAll(context.WithoutCancel(r.Context()))
		if err != nil {
			return nil, errorFor(err, "")
		}
		return infos, nil
	})
}

// StopAll stops every running process of the caller's owner
// (POST /stop-all with the body {}) and returns their final state, newest
// first.
func (c *Client) StopAll(ctx context.Context) ([]Process, error) {
	return c.ownerWide(ctx, "/stop-all")
}

// ownerWide serves a route that acts on every process of the caller's
// owner at once (/stop-all, /prune): act's processes are the reply, a
// ListResponse, or act's *Error is. The body is an empty object, sent as
// application/json like every state-changing route's, so that a page
// cannot send it without a preflight.
func (h *handler) ownerWide(w http.ResponseWriter, r *http.Request, act func(*agentproc.Scope) ([]agentproc.Info, *Error)) {
	s, ok := h.scope(w, r)
	if !ok {
		return
	}
	var req struct{}
	if !h.decode(w, r, &req) {
		return
	}
	infos, e := act(s)
	if e != nil {
		writeError(w, e)
		return
	}
	resp := ListResponse{Processes: make([]Process, len(infos))}
	for i, info := range infos {
		resp.Processes[i] = processFromInfo(info)
	}
	writeJSON(w, http.StatusOK, resp)
}

// ownerWide posts {} to one of the routes acting on every process of the
// caller's owner and returns the processes of the reply.
func (c *Client) ownerWide(ctx context.Context, path string) ([]Process, error) {
	var resp ListResponse
	err := c.do(ctx, http.MethodPost, path, nil, struct{}{}, &resp)
	return resp.Processes, err
}
