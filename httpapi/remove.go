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
	h.ownerWide(w, r, func(s *agentproc.Scope) ([]agentproc.Info, *Error) {
		var removed []agentproc.Info
		for _, info := range s.List() {
			if info.Running {
				continue
			}
			// ErrNotFound: another request (or retention) removed it
			// first; ErrRunning: its exit is not registered yet, as Info
			// says only after. Neither is this prune's to report.
			if err := s.Remove(info.ID); err != nil {
				if errors.Is(err, agentproc.ErrNotFound) || errors.Is(err, agentproc.ErrRunning) {
					continue
				}
				return nil, errorFor(err, info.ID)
			}
			removed = append(removed, info)
		}
		return removed, nil
	})
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
	return c.ownerWide(ctx, "/prune")
}
