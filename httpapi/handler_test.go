package httpapi_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/httpapi"
)

// unknownID is a well-formed ID no process has.
const unknownID = "00000000-0000-0000-0000-000000000000"

func TestUnknownIDIs404(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)
	ctx := testContext(t)
	c := s.client()

	_, err := c.Get(ctx, unknownID)
	wantStatus(t, err, http.StatusNotFound)
	_, err = c.Output(ctx, unknownID, httpapi.OutputOptions{})
	wantStatus(t, err, http.StatusNotFound)
	_, err = c.Output(ctx, unknownID, httpapi.OutputOptions{Wait: true})
	wantStatus(t, err, http.StatusNotFound)
	wantStatus(t, c.Signal(ctx, unknownID, "kill"), http.StatusNotFound)

	for _, r := range []struct{ method, path, body string }{
		{"GET", "/" + unknownID, ""},
		{"GET", "/" + unknownID + "/output", ""},
		{"GET", "/" + unknownID + "/output?wait=true", ""},
		{"POST", "/" + unknownID + "/signal", `{"signal":"kill"}`},
	} {
		obj := wantError(t, s.raw(t, r.method, r.path, r.body), http.StatusNotFound)
		if _, ok := obj["detail"]; ok {
			t.Errorf("%s %s: 404 carries a detail %v; it must not differ from another owner's ID", r.method, r.path, obj["detail"])
		}
	}
}

func TestListEmpty(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)

	r := s.raw(t, "GET", "/list", "")
	if r.status != http.StatusOK || strings.TrimSpace(r.body) != `{"processes":[]}` {
		t.Fatalf("got %d %s, want 200 {\"processes\":[]}", r.status, r.body)
	}
	procs, err := s.client().List(testContext(t))
	if err != nil || len(procs) != 0 {
		t.Fatalf("got %v, %v; want no processes", procs, err)
	}
}

func TestStartRejectsBadBodies(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)
	for _, body := range []string{
		"",
		"{",
		"[]",
		`{"command": 7}`,
		`{"command":"echo"} {"command":"echo"}`,
		`{"command":"echo"} x`,
	} {
		wantError(t, s.raw(t, "POST", "/start", body), http.StatusBadRequest)
	}
	if got := s.m.List(); len(got) != 0 {
		t.Fatalf("bad bodies started %d processes", len(got))
	}
}

func TestStartRejectsEmptyCommand(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)
	ctx := testContext(t)

	wantError(t, s.raw(t, "POST", "/start", `{}`), http.StatusBadRequest)
	wantError(t, s.raw(t, "POST", "/start", `{"command":""}`), http.StatusBadRequest)
	// Blank and NUL are the Manager's to reject (agentproc.ErrInvalidRequest),
	// with the reason as the detail.
	obj := wantError(t, s.raw(t, "POST", "/start", `{"command":"  \n "}`), http.StatusBadRequest)
	if d, _ := obj["detail"].(string); !strings.Contains(d, "empty command") {
		t.Errorf("detail %q, want it to say the command is empty", d)
	}
	_, err := s.client().Start(ctx, httpapi.StartRequest{Command: "a\x00b"})
	wantStatus(t, err, http.StatusBadRequest)
	_, err = s.client().Start(ctx, httpapi.StartRequest{Command: "true", WorkDir: "/does/not/exist"})
	wantStatus(t, err, http.StatusBadRequest)
	if got := s.m.List(); len(got) != 0 {
		t.Fatalf("rejected requests started %d processes", len(got))
	}
}

func TestStartRejectsBadTimeouts(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)
	for _, timeout := range []string{"soon", "10", "0s", "-1s"} {
		wantError(t, s.raw(t, "POST", "/start", `{"command":"true","timeout":"`+timeout+`"}`), http.StatusBadRequest)
	}
	wantError(t, s.raw(t, "POST", "/start", `{"command":"true","timeout":10}`), http.StatusBadRequest)
	_, err := s.client().Start(testContext(t), httpapi.StartRequest{Command: "true", Timeout: "a while"})
	wantStatus(t, err, http.StatusBadRequest)
	if got := s.m.List(); len(got) != 0 {
		t.Fatalf("bad timeouts started %d processes", len(got))
	}
}

func TestBodyTooLarge(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)
	big := `{"command":"` + strings.Repeat("x", httpapi.MaxBodyBytes) + `"}`
	wantError(t, s.raw(t, "POST", "/start", big), http.StatusRequestEntityTooLarge)
	wantError(t, s.raw(t, "POST", "/"+unknownID+"/signal", `{"signal":"`+strings.Repeat("k", httpapi.MaxBodyBytes)+`"}`),
		http.StatusRequestEntityTooLarge)
	// Trailing data past the limit counts too.
	wantError(t, s.raw(t, "POST", "/start", `{"command":"true"}`+strings.Repeat(" ", httpapi.MaxBodyBytes)), http.StatusRequestEntityTooLarge)
	if got := s.m.List(); len(got) != 0 {
		t.Fatalf("oversized bodies started %d processes", len(got))
	}
}

func TestSignalRejectsBadRequests(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)
	// The body is checked before the ID, as Coder's API does.
	for _, body := range []string{"", "{", `{}`, `{"signal":""}`, `{"signal":"hup"}`, `{"signal":"KILL"}`, `{"signal":9}`} {
		wantError(t, s.raw(t, "POST", "/"+unknownID+"/signal", body), http.StatusBadRequest)
	}
	wantStatus(t, s.client().Signal(testContext(t), unknownID, "hup"), http.StatusBadRequest)
}

func TestOutputRejectsBadQueries(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)
	// The query is checked before the ID.
	for _, q := range []string{
		"wait=maybe", "wait=", "wait=true&timeout=soon", "wait=true&timeout=0s", "wait=true&timeout=-1s", "timeout=10",
		"wait_for=(", "wait=true&wait_for=ready", "offset=-1", "offset=x", "offset=1.5",
	} {
		r := s.raw(t, "GET", "/"+unknownID+"/output?"+q, "")
		if q == "wait=" {
			// An empty value is no value.
			wantError(t, r, http.StatusNotFound)
			continue
		}
		wantError(t, r, http.StatusBadRequest)
	}
}

func TestAuthorizeFailureIs401(t *testing.T) {
	t.Parallel()
	errNoToken := errors.New("no bearer token")
	s := newTestServer(t, nil, nil, httpapi.WithAuthorize(func(r *http.Request) (string, error) {
		owner, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || owner == "" {
			return "", errNoToken
		}
		return owner, nil
	}))
	ctx := testContext(t)
	// The owner header is no identity once the host decides.
	c := s.client(httpapi.DefaultOwnerHeader, "alice")

	_, err := c.Start(ctx, httpapi.StartRequest{Command: "true"})
	if e := wantStatus(t, err, http.StatusUnauthorized); e.Detail != errNoToken.Error() {
		t.Errorf("detail %q, want %q", e.Detail, errNoToken)
	}
	_, err = c.List(ctx)
	wantStatus(t, err, http.StatusUnauthorized)
	_, err = c.Get(ctx, unknownID)
	wantStatus(t, err, http.StatusUnauthorized)
	_, err = c.Output(ctx, unknownID, httpapi.OutputOptions{Wait: true})
	wantStatus(t, err, http.StatusUnauthorized)
	wantStatus(t, c.Signal(ctx, unknownID, "kill"), http.StatusUnauthorized)

	for _, r := range []struct{ method, path, body string }{
		{"POST", "/start", `{"command":"true"}`},
		{"GET", "/list", ""},
		{"GET", "/" + unknownID, ""},
		{"GET", "/" + unknownID + "/output", ""},
		{"POST", "/" + unknownID + "/signal", `{"signal":"kill"}`},
	} {
		wantError(t, s.raw(t, r.method, r.path, r.body), http.StatusUnauthorized)
	}
	if got := s.m.List(); len(got) != 0 {
		t.Fatalf("unauthorized requests started %d processes", len(got))
	}
}

func TestStartAfterCloseIs503(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)
	if err := s.m.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := s.client().Start(testContext(t), httpapi.StartRequest{Command: "true"})
	wantStatus(t, err, http.StatusServiceUnavailable)
	wantError(t, s.raw(t, "POST", "/start", `{"command":"true"}`), http.StatusServiceUnavailable)
}

func TestClientReportsNonJSONErrors(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)
	// No route has two segments before /list, so the mux answers with its
	// plain-text 404.
	c := s.client()
	c.URL = s.srv.URL + "/not/here/"
	_, err := c.List(testContext(t))
	if e := wantStatus(t, err, http.StatusNotFound); e.Message != "404 page not found" {
		t.Errorf("message %q, want the server's text", e.Message)
	}
}

// TestWireTags pins the JSON names of the agentproc types httpapi embeds in
// its wire format (agentproc.TTYSize, agentproc.Truncation,
// agentproc.Limits, agentproc.ReadyCheck, agentproc.Port): renaming a tag
// there would silently change this API.
func TestWireTags(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		v    any
		want string
	}{
		{httpapi.StartRequest{Command: "x", TTY: &agentproc.TTYSize{Rows: 1, Cols: 2}}, `"tty":{"rows":1,"cols":2}`},
		{httpapi.Output{Truncated: &agentproc.Truncation{OriginalBytes: 1, RetainedBytes: 2, OmittedBytes: 3, TruncatedLines: 4, Strategy: "head_tail"}},
			`"truncated":{"original_bytes":1,"retained_bytes":2,"omitted_bytes":3,"truncated_lines":4,"strategy":"head_tail"}`},
		{httpapi.StartRequest{Command: "x", Ready: &agentproc.ReadyCheck{Port: 1, Match: "m"}}, `"ready":{"port":1,"match":"m"}`},
		{httpapi.Event{Port: &agentproc.Port{Network: "tcp", Addr: "::", Port: 1, PID: 2}}, `"port":{"network":"tcp","addr":"::","port":1,"pid":2}`},
		{httpapi.StartRequest{Command: "x", Limits: &agentproc.Limits{Memory: 1, Procs: 2, CPU: 0.5}}, `"limits":{"memory_bytes":1,"procs":2,"cpu":0.5}`},
	} {
		b, err := json.Marshal(tt.v)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), tt.want) {
			t.Errorf("json.Marshal(%T): got %s, want it to contain %s", tt.v, b, tt.want)
		}
	}
}
