package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/httpapi"
	"github.com/agentproc/agentproc/internal/testleak"
)

func TestMain(m *testing.M) {
	run := testleak.Mark()
	// VerifyTestMain exits, so the leak check runs as its cleanup: a child
	// a test left running fails the run.
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if leaks := testleak.Check(run, 5*time.Second); len(leaks) > 0 {
			fmt.Fprintln(os.Stderr, testleak.Report(leaks))
			testleak.Kill(run, leaks)
			code = 1
		}
		os.Exit(code)
	}))
}

// testTimeout bounds every wait in these tests.
const testTimeout = 10 * time.Second

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// testServer is a Manager served by a real HTTP server for one test.
type testServer struct {
	m   *agentproc.Manager
	srv *httptest.Server
}

// newTestServer serves a new Manager with NewHandler(opts...). wrap, when
// not nil, wraps the handler (to observe requests). Everything is closed
// at the end of the test: the Manager first, so that any wait still held
// by the server ends, then the server.
func newTestServer(t *testing.T, mopts []agentproc.Option, wrap func(http.Handler) http.Handler, opts ...httpapi.Option) *testServer {
	t.Helper()
	m := agentproc.New(mopts...)
	// quiet first: a test that looks at the warning passes its own logger.
	var h http.Handler = httpapi.NewHandler(m, append([]httpapi.Option{quiet()}, opts...)...)
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("close manager: %v", err)
		}
	})
	return &testServer{m: m, srv: srv}
}

// client returns a Client that sends header (name, value pairs).
func (s *testServer) client(header ...string) *httpapi.Client {
	c := &httpapi.Client{URL: s.srv.URL, HTTPClient: s.srv.Client(), Header: http.Header{}}
	for i := 0; i+1 < len(header); i += 2 {
		c.Header.Set(header[i], header[i+1])
	}
	return c
}

// rawReply is a reply read without the Client.
type rawReply struct {
	status int
	body   string
}

// object decodes the body as a JSON object.
func (r rawReply) object(t *testing.T) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(r.body), &v); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", r.body, err)
	}
	return v
}

// raw sends one request without the Client. header holds name, value pairs.
func (s *testServer) raw(t *testing.T, method, path, body string, header ...string) rawReply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(testContext(t), method, s.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if method == http.MethodPost {
		// What a well-behaved client sends; a test of the check passes
		// its own Content-Type in header.
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1] // the client ignores a Host header
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	res, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	if got := res.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("%s %s: Content-Type %q, want application/json", method, path, got)
	}
	return rawReply{status: res.StatusCode, body: string(b)}
}

// wantError checks that r is an error reply with the given status and the
// {"message", "detail"} shape.
func wantError(t *testing.T, r rawReply, status int) map[string]any {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d (body %s)", r.status, status, r.body)
	}
	obj := r.object(t)
	if msg, _ := obj["message"].(string); msg == "" {
		t.Errorf("error body %s has no message", r.body)
	}
	for k := range obj {
		if k != "message" && k != "detail" {
			t.Errorf("error body %s has key %q; want only message and detail", r.body, k)
		}
	}
	return obj
}

// wantStatus checks that err is an *httpapi.Error with the given status.
func wantStatus(t *testing.T, err error, status int) *httpapi.Error {
	t.Helper()
	e, ok := errors.AsType[*httpapi.Error](err)
	if !ok {
		t.Fatalf("error %v (%T), want *httpapi.Error with status %d", err, err, status)
	}
	if e.StatusCode != status {
		t.Fatalf("status %d (%v), want %d", e.StatusCode, e, status)
	}
	if e.Message == "" {
		t.Errorf("error %v has no message", e)
	}
	return e
}
