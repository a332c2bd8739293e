package httpapi_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/agentproc/agentproc/httpapi"
)

// get sends a GET without the Client and returns the reply's status,
// headers and body.
func (s *testServer) getRaw(t *testing.T, path string, header ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(testContext(t), http.MethodGet, s.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	res, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header, string(b)
}

// readSSE reads the Server-Sent Events of GET path, calling fn with each
// event's type and data until fn returns true.
func (s *testServer) readSSE(t *testing.T, path string, header http.Header, fn func(typ, data string) bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if header != nil {
		req.Header = header
	}
	res, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("GET %s: status %d (%s), want 200", path, res.StatusCode, b)
	}
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("GET %s: content type %q, want text/event-stream", path, ct)
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	typ := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			typ = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if fn(typ, strings.TrimPrefix(line, "data: ")) {
				return
			}
		}
	}
	if ctx.Err() == nil {
		t.Fatalf("GET %s: stream ended: %v", path, sc.Err())
	}
	t.Fatalf("GET %s: %v", path, ctx.Err())
}

func TestUIOffByDefault(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)
	for _, path := range []string{"/", "/ui/app.js", "/ui/events", "/ui/output?id=x"} {
		if status, _, _ := s.getRaw(t, path); status != http.StatusNotFound {
			t.Errorf("GET %s without WithUI: status %d, want 404", path, status)
		}
	}
}

// TestUIPage: the page and its files are served with a strict
// Content-Security-Policy, and hold nothing the policy would have to allow.
func TestUIPage(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil, httpapi.WithUI())
	files := map[string]string{
		"/":            "text/html; charset=utf-8",
		"/ui/app.js":   "text/javascript; charset=utf-8",
		"/ui/app.css":  "text/css; charset=utf-8",
		"/ui/icon.svg": "image/svg+xml",
	}
	bodies := map[string]string{}
	for path, ct := range files {
		status, h, body := s.getRaw(t, path)
		if status != http.StatusOK {
			t.Fatalf("GET %s: status %d, want 200", path, status)
		}
		if got := h.Get("Content-Type"); got != ct {
			t.Errorf("GET %s: Content-Type %q, want %q", path, got, ct)
		}
		csp := h.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: Content-Security-Policy %q lacks %q", path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-") {
			t.Errorf("GET %s: Content-Security-Policy %q allows something unsafe", path, csp)
		}
		if got := h.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("GET %s: X-Content-Type-Options %q, want nosniff", path, got)
		}
		bodies[path] = body
	}
	html := bodies["/"]
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>\s*[^<\s]`),      // an inline script
		regexp.MustCompile(`(?i)\son[a-z]+\s*=`),                     // an inline handler
		regexp.MustCompile(`(?i)\sstyle\s*=`),                        // an inline style
		regexp.MustCompile(`(?i)(?:src|href)\s*=\s*"(?:https?:)?//`), // another origin
	} {
		if m := bad.FindString(html); m != "" {
			t.Errorf("the page holds %q, which the policy forbids or which needs the network", m)
		}
	}
	js := bodies["/ui/app.js"]
	for _, bad := range []string{"innerHTML", "outerHTML =", "eval(", "new Function", "document.write", "http://cdn", "https://"} {
		if strings.Contains(js, bad) {
			t.Errorf("app.js uses %q", bad)
		}
	}
}

// TestUIChecks: the page's routes pass through the same Host, cross-origin,
// content-type and authorization checks as the API's.
func TestUIChecks(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil, httpapi.WithUI(), httpapi.WithAuthorize(func(r *http.Request) (string, error) {
		if r.Header.Get("Authorization") == "Bearer ok" {
			return "alice", nil
		}
		return "", errors.New("no token")
	}))
	// DNS rebinding: a loopback listener answers only loopback names.
	if status, _, _ := s.getRaw(t, "/", "Host", "evil.example"); status != http.StatusForbidden {
		t.Errorf("GET / with Host evil.example: status %d, want 403", status)
	}
	// The static page holds no data; every data route needs the hook.
	if status, _, _ := s.getRaw(t, "/"); status != http.StatusOK {
		t.Errorf("GET / without a token: status %d, want 200", status)
	}
	for _, path := range []string{"/ui/events", "/ui/output?id=x"} {
		if status, _, _ := s.getRaw(t, path); status != http.StatusUnauthorized {
			t.Errorf("GET %s without a token: status %d, want 401", path, status)
		}
	}
	wantError(t, s.raw(t, http.MethodPost, "/ui/stop", `{"id":"x"}`), http.StatusUnauthorized)
	wantError(t, s.raw(t, http.MethodPost, "/ui/stop", `{"id":"x"}`, "Authorization", "Bearer ok"), http.StatusNotFound)
	wantError(t, s.raw(t, http.MethodPost, "/ui/stop", `{"id":"x"}`, "Authorization", "Bearer ok", "Content-Type", "text/plain"),
		http.StatusUnsupportedMediaType)
	wantError(t, s.raw(t, http.MethodPost, "/ui/stop", `{"id":"x"}`, "Authorization", "Bearer ok", "Sec-Fetch-Site", "cross-site"),
		http.StatusForbidden)
	if status, _, body := s.getRaw(t, "/ui/output?id=x&offset=-1", "Authorization", "Bearer ok"); status != http.StatusBadRequest {
		t.Errorf("GET /ui/output with offset -1: status %d (%s), want 400", status, body)
	}
}
