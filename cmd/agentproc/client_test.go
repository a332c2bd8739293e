package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestClientsRefuseRepliesWithoutOffsets: logs (with -f or not) and run
// against a server whose output replies carry no offsets (another version,
// a foreign socket) exit 1 with an error, instead of panicking; wait, whose
// wait such a server ends at once, exits 1 instead of asking again in a
// busy loop.
func TestClientsRefuseRepliesWithoutOffsets(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const id = "0badc0de-0000-4000-8000-000000000000"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/list":
			io.WriteString(w, `{"processes":[{"id":"`+id+`","command":"x","running":true}]}`)
		case r.URL.Path == "/start":
			io.WriteString(w, `{"id":"`+id+`"}`)
		default:
			io.WriteString(w, `{"output":"hi\n","running":true}`)
		}
	}))
	defer srv.Close()
	env := []string{"AGENTPROC_URL=" + srv.URL, tokenEnv + "="}
	for _, args := range [][]string{{"logs", "-f", id[:8]}, {"logs", id[:8]}, {"logs", "--tail", "1", id[:8]}, {"run", "--", "echo", "hi"}} {
		_, errOut, code := cli(t, ctx, env, args...)
		if code != exitError || strings.Contains(errOut, "panic") || !strings.Contains(errOut, "has no offsets") {
			t.Errorf("%q: got exit %d, stderr %q; want exit 1 and the reason", args, code, errOut)
		}
	}
	// The same server answers a wait at once with the process running and
	// no timed_out, which a serve never does: wait must not ask again and
	// again for ever.
	_, errOut, code := cli(t, ctx, env, "wait", id[:8])
	if code != exitError || !strings.Contains(errOut, "ended a wait while the process runs") {
		t.Errorf("wait: got exit %d, stderr %q; want exit 1 and the reason", code, errOut)
	}
}

// TestClientErrorsReadPlain: a client's error says what went wrong, not how
// the HTTP client wrapped it (method, the socket's made-up URL, the
// package's prefix).
func TestClientErrorsReadPlain(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"message":"the manager is shutting down"}`)
	}))
	defer srv.Close()
	for _, tt := range []struct {
		env  []string
		want string
	}{
		{[]string{socketEnv + "=" + filepath.Join(testDir(t), "none.sock")}, "agentproc ps: no agentproc serve on "},
		{[]string{"AGENTPROC_URL=" + srv.URL, tokenEnv + "="}, "agentproc ps: the manager is shutting down\n"},
	} {
		_, errOut, code := cli(t, ctx, tt.env, "ps")
		if code != exitError || !strings.HasPrefix(errOut, tt.want) || strings.Contains(errOut, "httpapi:") || strings.Contains(errOut, "http://agentproc") {
			t.Errorf("ps: got exit %d, stderr %q; want exit 1 and %q, without the HTTP client's wrapping", code, errOut, tt.want)
		}
	}
}
