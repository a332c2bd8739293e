//go:build unix

package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/httpapi"
)

func TestStopAllOnlyCallersOwner(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)
	ctx := testContext(t)
	alice := s.client(httpapi.DefaultOwnerHeader, "alice")
	bob := s.client(httpapi.DefaultOwnerHeader, "bob")
	var aliceIDs, bobIDs []string
	for range 3 {
		aliceIDs = append(aliceIDs, start(t, alice, httpapi.StartRequest{Command: forever}))
	}
	for range 2 {
		bobIDs = append(bobIDs, start(t, bob, httpapi.StartRequest{Command: forever}))
	}
	stopped, err := alice.StopAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(stopped) != len(aliceIDs) {
		t.Fatalf("StopAll: got %d processes, want %d", len(stopped), len(aliceIDs))
	}
	for _, p := range stopped {
		if p.Running || p.Reason != agentproc.ReasonKilled || p.ExitCode == nil {
			t.Errorf("stopped: got %+v, want exited with reason killed", p)
		}
	}
	for _, id := range bobIDs {
		if p, err := bob.Get(ctx, id); err != nil || !p.Running {
			t.Errorf("bob's %s: got %+v, %v; want running", id, p, err)
		}
	}
	// Like every state-changing route it takes JSON only.
	wantError(t, s.raw(t, http.MethodPost, "/stop-all", "{}", httpapi.DefaultOwnerHeader, "bob", "Content-Type", "text/plain"),
		http.StatusUnsupportedMediaType)
	if got := s.m.Scope("bob").List(); !got[0].Running || !got[1].Running {
		t.Fatalf("after a refused stop-all: got %+v, want bob's processes running", got)
	}
	// The reply shape is GET /list's.
	r := s.raw(t, http.MethodPost, "/stop-all", "{}", httpapi.DefaultOwnerHeader, "bob", "Content-Type", "application/json")
	if r.status != http.StatusOK || !strings.HasPrefix(r.body, `{"processes":[{`) {
		t.Errorf("POST /stop-all: got %d %s, want 200 with the processes", r.status, r.body)
	}
	if got := s.m.Scope("bob").List(); got[0].Running || got[1].Running {
		t.Errorf("after bob's stop-all: got %+v, want all exited", got)
	}
}
