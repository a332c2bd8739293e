package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/agentproc/agentproc"
)

// remove forgets one exited process of the caller's owner (DELETE /{id};
// agentproc.Scope.Remove): 409 while it runs, as docker rm refuses a
// running container; the client stops it first when asked to force.
func (h *handler) remove(w http.ResponseWriter, r *http.Request) {
	s, ok := h.scope(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	if err := s.Remove(id); err != nil {
		writeError(w, errorFor(err, id))
		return
	}
	writeJSON(w, http.StatusOK, Response{Message: fmt.Sprintf("Process %q removed.", id)})
}

// prune forgets every exited process of the caller's owner (POST /prune
// with the body {}, like /stop-all) and returns what it removed, newest
// first.
func (h *handler) prune(w http.ResponseWriter, r *http.Request) {
	s, ok := h.scope(w, r)
	if !ok {
		return
	}
	var req struct{}
	if !h.decode(w, r, &req) {
		return
	}
	removed := []Process{}
	for _, info := range s.List() {
		if info.Running {
			continue
		}
		// ErrNotFound: another request (or retention) removed it first;
		// ErrRunning: its exit is not registered yet, as Info says only
		// after. Neither is this prune's to report.
		if err := s.Remove(info.ID); err != nil {
			if errors.Is(err, agentproc.ErrNotFound) || errors.Is(err, agentproc.ErrRunning) {
				continue
			}
			writeError(w, errorFor(err, info.ID))
			return
		}
		removed = append(removed, processFromInfo(info))
	}
	writeJSON(w, http.StatusOK, ListResponse{Processes: removed})
}

// Remove forgets an exited process: it is no longer listed, and its output
// is gone (DELETE /{id}). A running process is refused with a 409 *Error.
func (c *Client) Remove(ctx context.Context, id string) error {
	var resp Response
	return c.do(ctx, http.MethodDelete, "/"+url.PathEscape(id), nil, nil, &resp)
}

// Prune forgets every exited process of the caller's owner
// (POST /prune with the body {}) and returns those it removed.
func (c *Client) Prune(ctx context.Context) ([]Process, error) {
	var resp ListResponse
	err := c.do(ctx, http.MethodPost, "/prune", nil, struct{}{}, &resp)
	return resp.Processes, err
}
