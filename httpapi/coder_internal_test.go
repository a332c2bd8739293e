package httpapi

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/agentproc/agentproc"
)

// TestCoderTokenPending checks the probe's answer while the first start with
// a token is still spawning, which a black-box test cannot hold still.
func TestCoderTokenPending(t *testing.T) {
	t.Parallel()
	m := agentproc.New()
	t.Cleanup(func() { _ = m.Close() })
	cfg := defaultConfig()
	cfg.coder = true
	h := &handler{m: m, cfg: cfg, pending: map[string]int{}, tokens: map[string]*tokenEntry{}, created: cfg.clock.Now()}

	probe := func() coderTokenResponse {
		t.Helper()
		rec := httptest.NewRecorder()
		h.coderToken(rec, httptest.NewRequest("GET", "/tokens/tok", nil), "tok")
		var resp coderTokenResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
			t.Fatal(err)
		}
		return resp
	}

	claimed, e := h.claimToken("tok", "")
	if !claimed || e != nil {
		t.Fatalf("claim: %v, %v; want claimed", claimed, e)
	}
	if got := probe(); !got.Pending || got.Found || got.ProcessID != "" {
		t.Fatalf("while spawning: %+v, want pending and not found", got)
	}
	// The start failed: the token is free again.
	h.settleToken("tok", claimed, nil)
	if got := probe(); got.Pending || got.Found {
		t.Fatalf("after a failed start: %+v, want neither pending nor found", got)
	}
}
