package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/agentproc/agentproc"
)

// TestCoderTokenPending checks the probe's answer while the first start with
// a token is still spawning, which a black-box test cannot hold still.
func TestCoderTokenPending(t *testing.T) {
	t.Parallel()
	h := newCoderTestHandler(t)

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

func newCoderTestHandler(t *testing.T) *handler {
	t.Helper()
	m := agentproc.New()
	t.Cleanup(func() { _ = m.Close() })
	cfg := defaultConfig()
	cfg.coder = true
	return &handler{
		m: m, cfg: cfg, pending: map[string]int{},
		tokens: map[string]*tokenEntry{}, tokenSweepAt: minTokenSweep, created: cfg.clock.Now(),
	}
}

// TestCoderTokensSwept checks that tokens whose processes are gone do not
// pile up when they are never used again.
func TestCoderTokensSwept(t *testing.T) {
	t.Parallel()
	h := newCoderTestHandler(t)
	const n = 1000
	for i := range n {
		tok := fmt.Sprintf("tok-%d", i)
		if _, e := h.claimToken(tok, ""); e != nil {
			t.Fatal(e)
		}
		// As if its process had been started and then dropped by
		// retention: an ID the Manager does not know.
		h.tokens[tok].id = fmt.Sprintf("gone-%d", i)
	}
	if got := len(h.tokens); got > 2*minTokenSweep {
		t.Fatalf("%d tokens kept after %d starts whose processes are gone, want at most %d", got, n, 2*minTokenSweep)
	}
	// A pending token is never swept.
	if _, e := h.claimToken("pending", ""); e != nil {
		t.Fatal(e)
	}
	h.sweepTokensLocked()
	if _, ok := h.tokens["pending"]; !ok {
		t.Fatal("sweep removed a pending token")
	}
}
