package httpapi_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"cdr.dev/slog/v3"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/httpapi"
)

// crossSite is what a malicious page's fetch(url, {method: "POST",
// mode: "no-cors", body}) sends: a "simple" request, which no CORS preflight
// guards.
var crossSite = []string{
	"Content-Type", "text/plain;charset=UTF-8",
	"Origin", "https://evil.example",
	"Sec-Fetch-Site", "cross-site",
}

const echoBody = `{"command":"echo hi"}`

// wantNothingStarted fails unless the Manager holds no process.
func wantNothingStarted(t *testing.T, s *testServer) {
	t.Helper()
	if got := s.m.List(); len(got) != 0 {
		t.Fatalf("%d processes started, want none: %+v", len(got), got)
	}
}

func TestCrossSiteRequestIsRefused(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)

	wantError(t, s.raw(t, "POST", "/start", echoBody, crossSite...), http.StatusForbidden)
	// A JSON body does not make it acceptable: the origin does not change.
	wantError(t, s.raw(t, "POST", "/start", echoBody, append(crossSite, "Content-Type", "application/json")...), http.StatusForbidden)
	// Without Sec-Fetch-Site (an older browser), Origin against Host decides.
	wantError(t, s.raw(t, "POST", "/start", echoBody, "Origin", "https://evil.example"), http.StatusForbidden)
	wantNothingStarted(t, s)

	// Reading is a safe method and stays allowed; it changes nothing.
	if r := s.raw(t, "GET", "/list", "", crossSite...); r.status != http.StatusOK {
		t.Fatalf("cross-site GET /list: %d %s, want 200", r.status, r.body)
	}
}

func TestSameOriginAndNonBrowserRequestsPass(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil, httpapi.WithTrustedOrigins("https://ui.example"))

	for name, header := range map[string][]string{
		"same-origin":    {"Sec-Fetch-Site", "same-origin", "Origin", s.srv.URL},
		"no browser":     nil,
		"trusted origin": {"Sec-Fetch-Site", "cross-site", "Origin", "https://ui.example"},
	} {
		if r := s.raw(t, "POST", "/start", echoBody, header...); r.status != http.StatusOK {
			t.Errorf("%s: %d %s, want 200", name, r.status, r.body)
		}
	}
	if got := len(s.m.List()); got != 3 {
		t.Fatalf("%d processes started, want 3", got)
	}
}

func TestForeignHostIsRefusedOnLoopback(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)
	// httptest listens on 127.0.0.1: the request arrives on loopback.
	wantError(t, s.raw(t, "POST", "/start", echoBody, "Host", "evil.example"), http.StatusForbidden)
	wantError(t, s.raw(t, "GET", "/list", "", "Host", "evil.example:80"), http.StatusForbidden)
	wantNothingStarted(t, s)

	for _, host := range []string{"localhost", "LOCALHOST:1234", "app.localhost", "127.0.0.1", "127.0.0.2:8080", "[::1]:80", "[::ffff:127.0.0.1]"} {
		if r := s.raw(t, "GET", "/list", "", "Host", host); r.status != http.StatusOK {
			t.Errorf("Host %q: %d %s, want 200", host, r.status, r.body)
		}
	}
}

func TestAllowedHosts(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil, httpapi.WithAllowedHosts("evil.example", "agent.internal:9000"))

	if r := s.raw(t, "POST", "/start", echoBody, "Host", "evil.example"); r.status != http.StatusOK {
		t.Fatalf("allowed Host: %d %s, want 200", r.status, r.body)
	}
	if r := s.raw(t, "GET", "/list", "", "Host", "Agent.Internal:9000"); r.status != http.StatusOK {
		t.Fatalf("allowed host:port: %d %s, want 200", r.status, r.body)
	}
	// The list replaces the loopback rule: only what it names passes.
	wantError(t, s.raw(t, "GET", "/list", "", "Host", "agent.internal:9001"), http.StatusForbidden)
	wantError(t, s.raw(t, "GET", "/list", "", "Host", "localhost"), http.StatusForbidden)
}

// TestAnyHostOffLoopback checks the other half of the default rule: a
// request that arrived on a non-loopback address may name any host, since
// the handler cannot know the names it is reached by.
func TestAnyHostOffLoopback(t *testing.T) {
	t.Parallel()
	m := agentproc.New()
	t.Cleanup(func() { _ = m.Close() })
	h := httpapi.NewHandler(m, quiet())
	for _, tc := range []struct {
		local net.Addr
		want  int
	}{
		{&net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 80}, http.StatusOK},
		{&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 80}, http.StatusForbidden},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 80}, http.StatusForbidden},
		{&net.UnixAddr{Name: "/run/agent.sock", Net: "unix"}, http.StatusOK},
	} {
		req := httptest.NewRequest("GET", "/list", nil)
		req.Host = "agent.example.com"
		req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, tc.local))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("Host agent.example.com arriving on %v: %d, want %d", tc.local, rec.Code, tc.want)
		}
	}
}

func TestStateChangingRoutesNeedJSON(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)
	for _, path := range []string{"/start", "/" + unknownID + "/signal", "/" + unknownID + "/stdin"} {
		for _, ct := range []string{"text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""} {
			obj := wantError(t, s.raw(t, "POST", path, echoBody, "Content-Type", ct), http.StatusUnsupportedMediaType)
			if msg, _ := obj["message"].(string); !strings.Contains(msg, "application/json") {
				t.Errorf("415 message %q does not say what to send", msg)
			}
		}
	}
	wantNothingStarted(t, s)
	if r := s.raw(t, "POST", "/start", echoBody, "Content-Type", "application/json; charset=utf-8"); r.status != http.StatusOK {
		t.Fatalf("JSON with a charset: %d %s, want 200", r.status, r.body)
	}
}

// warnSink records the messages of warnings.
type warnSink struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnSink) LogEntry(_ context.Context, e slog.SinkEntry) {
	if e.Level == slog.LevelWarn {
		w.mu.Lock()
		w.msgs = append(w.msgs, e.Message)
		w.mu.Unlock()
	}
}
func (w *warnSink) Sync() {}

// quiet is a WithLogger that discards the no-authorize warning.
func quiet() httpapi.Option { return httpapi.WithLogger(slog.Logger{}) }

func TestNoAuthorizeWarnsOnce(t *testing.T) {
	t.Parallel()
	m := agentproc.New()
	t.Cleanup(func() { _ = m.Close() })

	var w warnSink
	h := httpapi.NewHandler(m, httpapi.WithLogger(slog.Make(&w)))
	for range 3 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/list", nil))
	}
	if len(w.msgs) != 1 || !strings.Contains(w.msgs[0], "WithAuthorize") || !strings.Contains(w.msgs[0], "run commands") {
		t.Fatalf("warnings %q, want one naming WithAuthorize and the risk", w.msgs)
	}

	var none warnSink
	httpapi.NewHandler(m, httpapi.WithLogger(slog.Make(&none)),
		httpapi.WithAuthorize(func(*http.Request) (string, error) { return "", nil }))
	if len(none.msgs) != 0 {
		t.Fatalf("warnings %q with WithAuthorize, want none", none.msgs)
	}
}
