package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
)

// TestStartLimitCeiling: the operator's WithLimits are ceilings an HTTP
// client cannot lift; the reply is 400 naming the field and the ceiling,
// and nothing starts.
func TestStartLimitCeiling(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, []agentproc.Option{
		agentproc.WithLimits(agentproc.Limits{Memory: 256 << 20, Procs: 64, CPU: 1}),
	}, nil)
	for _, tt := range []struct{ body, field string }{
		{`{"command":"true","limits":{"procs":65}}`, "Limits.Procs"},
		{`{"command":"true","limits":{"memory_bytes":1073741824}}`, "Limits.Memory"},
		{`{"command":"true","limits":{"cpu":2}}`, "Limits.CPU"},
		{`{"command":"true","limits":{"procs":10,"cpu":1.5}}`, "Limits.CPU"},
	} {
		obj := wantError(t, s.raw(t, http.MethodPost, "/start", tt.body), http.StatusBadRequest)
		if d, _ := obj["detail"].(string); !strings.Contains(d, tt.field) || !strings.Contains(d, "ceiling") {
			t.Errorf("%s: detail got %q, want it to name %s and the ceiling", tt.body, d, tt.field)
		}
	}
	if got := s.m.List(); len(got) != 0 {
		t.Errorf("List: got %d processes, want none started", len(got))
	}
}
