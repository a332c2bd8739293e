package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"github.com/agentproc/agentproc"
)

// limitsFromRequest copies the resource limits of a start request (Limits,
// the idle timeout, the output cap) into the library's request, or returns
// the reply for a malformed one.
func limitsFromRequest(req StartRequest, areq *agentproc.Request) *Error {
	if req.Limits != nil {
		areq.Limits = *req.Limits
	}
	if req.IdleTimeout != "" {
		d, err := time.ParseDuration(req.IdleTimeout)
		if err != nil || d <= 0 {
			return &Error{
				StatusCode: http.StatusBadRequest,
				Message:    fmt.Sprintf(`Invalid idle_timeout %q: want a positive duration such as "10m".`, req.IdleTimeout),
			}
		}
		areq.IdleTimeout = d
	}
	areq.IdleInteractive = req.IdleInteractive
	areq.MaxOutput = req.MaxOutput
	return nil
}
