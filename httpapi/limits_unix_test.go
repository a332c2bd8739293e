//go:build unix

package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/httpapi"
)

func TestStartOutputLimit(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)
	ctx := testContext(t)
	c := s.client()
	id := start(t, c, httpapi.StartRequest{Command: "yes", MaxOutput: 1 << 16})
	out, err := c.Output(ctx, id, httpapi.OutputOptions{Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if out.Running || out.Reason != agentproc.ReasonOutputLimit || !strings.HasPrefix(out.Output, "y\n") {
		t.Errorf("got running %v reason %q output %.8q, want stopped for its output", out.Running, out.Reason, out.Output)
	}
	r := s.raw(t, http.MethodGet, "/"+id, "")
	if obj := r.object(t); obj["reason"] != "output_limit" {
		t.Errorf("GET /{id}: reason %v, want output_limit (body %s)", obj["reason"], r.body)
	}
}

func TestStartLimitErrors(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)
	wantError(t, s.raw(t, http.MethodPost, "/start", `{"command":"true","idle_timeout":"soon"}`), http.StatusBadRequest)
	wantError(t, s.raw(t, http.MethodPost, "/start", `{"command":"true","max_output_bytes":-1}`), http.StatusBadRequest)
	wantError(t, s.raw(t, http.MethodPost, "/start", `{"command":"cat","stdin":true,"idle_timeout":"1m"}`), http.StatusBadRequest)
	// A limit the host cannot hold (no cgroup for it: macOS, FreeBSD, or
	// Linux without root or delegation) is 501 naming the field; where it
	// can be held, the process runs under it.
	r := s.raw(t, http.MethodPost, "/start", `{"command":"true","limits":{"memory_bytes":67108864}}`)
	if r.status == http.StatusNotImplemented {
		obj := wantError(t, r, http.StatusNotImplemented)
		if d, _ := obj["detail"].(string); !strings.Contains(d, "Limits.Memory") {
			t.Errorf("detail: got %q, want it to name Limits.Memory", d)
		}
		if got := s.m.List(); len(got) != 0 {
			t.Errorf("List: got %d processes, want none started", len(got))
		}
	} else if r.status != http.StatusOK {
		t.Errorf("POST /start with limits: status %d (%s), want 200 or 501", r.status, r.body)
	}
}
