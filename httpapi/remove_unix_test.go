//go:build unix

package httpapi_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/agentproc/agentproc/httpapi"
)

func TestRemoveAndPrune(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)
	ctx := testContext(t)
	alice := s.client(httpapi.DefaultOwnerHeader, "alice")
	bob := s.client(httpapi.DefaultOwnerHeader, "bob")
	running := start(t, alice, httpapi.StartRequest{Command: forever})
	var exited []string
	for range 3 {
		id := start(t, alice, httpapi.StartRequest{Command: "true"})
		if _, err := alice.Output(ctx, id, httpapi.OutputOptions{Wait: true}); err != nil {
			t.Fatal(err)
		}
		exited = append(exited, id)
	}
	bobs := start(t, bob, httpapi.StartRequest{Command: "true"})
	if _, err := bob.Output(ctx, bobs, httpapi.OutputOptions{Wait: true}); err != nil {
		t.Fatal(err)
	}

	var he *httpapi.Error
	if err := alice.Remove(ctx, running); !errors.As(err, &he) || he.StatusCode != http.StatusConflict {
		t.Errorf("Remove(running): got %v, want 409", err)
	}
	if err := bob.Remove(ctx, exited[0]); !errors.As(err, &he) || he.StatusCode != http.StatusNotFound {
		t.Errorf("bob's Remove of alice's: got %v, want 404", err)
	}
	if err := alice.Remove(ctx, exited[0]); err != nil {
		t.Fatalf("Remove(exited): got %v, want nil", err)
	}
	if _, err := alice.Get(ctx, exited[0]); !errors.As(err, &he) || he.StatusCode != http.StatusNotFound {
		t.Errorf("Get after Remove: got %v, want 404", err)
	}

	pruned, err := alice.Prune(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Newest first, as List: the two exited processes left.
	if len(pruned) != 2 || pruned[0].ID != exited[2] || pruned[1].ID != exited[1] {
		t.Errorf("Prune: got %+v, want %v newest first", pruned, exited[1:])
	}
	if got, err := alice.List(ctx); err != nil || len(got) != 1 || got[0].ID != running {
		t.Errorf("List after Prune: got %+v, %v, want only the running process", got, err)
	}
	if got, err := bob.List(ctx); err != nil || len(got) != 1 {
		t.Errorf("bob's List after alice's Prune: got %+v, %v, want his process kept", got, err)
	}
	// Nothing left to prune is an empty array, not null.
	r := s.raw(t, http.MethodPost, "/prune", "{}", httpapi.DefaultOwnerHeader, "alice", "Content-Type", "application/json")
	if r.status != http.StatusOK || r.body != "{\"processes\":[]}\n" {
		t.Errorf("second prune: got %d %q, want 200 with an empty array", r.status, r.body)
	}
	// Like every state-changing route it takes JSON only.
	wantError(t, s.raw(t, http.MethodPost, "/prune", "{}", httpapi.DefaultOwnerHeader, "bob", "Content-Type", "text/plain"),
		http.StatusUnsupportedMediaType)
}
