package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/agentproc/agentproc"
)

// StdinRequest is the body of POST /{id}/stdin, an extension. The process
// must have been started with "stdin" or "tty".
type StdinRequest struct {
	// Data is written to the process's stdin as UTF-8. It may hold control
	// characters, such as "\u0003" for Ctrl-C on a terminal.
	Data string `json:"data"`
	// Close ends the input after Data is written (agentproc
	// Process.CloseStdin): the child reads EOF, or ^D on a terminal.
	Close bool `json:"close,omitempty"`
}

// StdinResponse is the reply to POST /{id}/stdin.
type StdinResponse struct {
	// Written is how many bytes of Data were written.
	Written int `json:"written"`
}

func (h *handler) stdin(w http.ResponseWriter, r *http.Request) {
	s, ok := h.scope(w, r)
	if !ok {
		return
	}
	var req StdinRequest
	if !h.decode(w, r, &req) {
		return
	}
	p, ok := h.process(w, r, s)
	if !ok {
		return
	}
	var n int
	if req.Data != "" {
		// The request's context ends the write if the client goes; a
		// child that stops reading ends it after the library's stall
		// bound.
		var err error
		n, err = p.WriteStdinContext(r.Context(), []byte(req.Data))
		if err != nil {
			writeError(w, stdinError(err, p.ID(), n))
			return
		}
	}
	if req.Close {
		if err := p.CloseStdin(); err != nil {
			writeError(w, stdinError(err, p.ID(), n))
			return
		}
	}
	writeJSON(w, http.StatusOK, StdinResponse{Written: n})
}

// stdinError maps an error of WriteStdin or CloseStdin to a reply; written
// is how many bytes went in before it.
func stdinError(err error, id string, written int) *Error {
	e := &Error{StatusCode: http.StatusConflict, Detail: err.Error()}
	switch {
	case errors.Is(err, agentproc.ErrNoStdin):
		e.Message = fmt.Sprintf("Process %q was started without stdin or tty.", id)
	case errors.Is(err, agentproc.ErrStdinClosed):
		e.Message = fmt.Sprintf("The stdin of process %q is closed; %d bytes were written.", id, written)
	case errors.Is(err, os.ErrDeadlineExceeded):
		e.StatusCode = http.StatusServiceUnavailable
		e.Message = fmt.Sprintf("Process %q is not reading its stdin; %d bytes were written.", id, written)
	default:
		return errorFor(err, id)
	}
	return e
}
