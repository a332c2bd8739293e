package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/agentproc/agentproc"
)

// TestErrorStatus maps every sentinel of the core, wrapped as the core
// wraps them, to its status. A sentinel added to the core without a case
// here falls through to 500, so add it.
func TestErrorStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want int
	}{
		{agentproc.ErrNotFound, http.StatusNotFound},
		{agentproc.ErrNotRunning, http.StatusConflict},
		{agentproc.ErrClosed, http.StatusServiceUnavailable},
		{agentproc.ErrTooManyProcesses, http.StatusTooManyRequests},
		{agentproc.ErrUnsupportedSignal, http.StatusBadRequest},
		{agentproc.ErrInvalidRequest, http.StatusBadRequest},
		{agentproc.ErrNoStdin, http.StatusConflict},
		{agentproc.ErrStdinClosed, http.StatusConflict},
		{agentproc.ErrNoTTY, http.StatusConflict},
		{agentproc.ErrUnsupported, http.StatusNotImplemented},
		{agentproc.ErrExited, http.StatusConflict},
		{agentproc.ErrKeyConflict, http.StatusConflict},
		// A cgroup Manager on a system without cgroup v2 (macOS, say).
		{errors.ErrUnsupported, http.StatusNotImplemented},
		{errors.New("fork: resource temporarily unavailable"), http.StatusInternalServerError},
	} {
		err := fmt.Errorf("agentproc: some step: %w", tc.err)
		if got := errorFor(err, "id").StatusCode; got != tc.want {
			t.Errorf("errorFor(%v) = %d, want %d", err, got, tc.want)
		}
	}
}
