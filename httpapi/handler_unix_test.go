//go:build unix

package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/quartz"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/httpapi"
)

// forever is a command that runs until it is signalled.
const forever = "exec sleep 3600"

// start starts command through c and fails the test on error.
func start(t *testing.T, c *httpapi.Client, req httpapi.StartRequest) string {
	t.Helper()
	resp, err := c.Start(testContext(t), req)
	if err != nil {
		t.Fatalf("start %q: %v", req.Command, err)
	}
	if !resp.Started || resp.ID == "" {
		t.Fatalf("start %q: got %+v, want started with an ID", req.Command, resp)
	}
	return resp.ID
}

// keys returns the sorted keys of obj.
func keys(obj map[string]any) []string {
	var ks []string
	for k := range obj {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func TestStartWaitOutput(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)
	ctx := testContext(t)
	c := s.client()

	before := time.Now().Unix()
	id := start(t, c, httpapi.StartRequest{Command: "echo out; echo err >&2; exit 3"})
	out, err := c.Output(ctx, id, httpapi.OutputOptions{Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != "out\nerr\n" || out.Running || out.ExitCode == nil || *out.ExitCode != 3 ||
		out.Reason != agentproc.ReasonExited || out.Truncated != nil || out.TimedOut {
		t.Fatalf("got %+v, want the whole output, exited with code 3", out)
	}

	p, err := c.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now().Unix()
	if p.ID != id || p.Command != "echo out; echo err >&2; exit 3" || p.Running || p.Background ||
		p.ExitCode == nil || *p.ExitCode != 3 || p.PID == 0 || p.Reason != agentproc.ReasonExited {
		t.Fatalf("got %+v, want the exited process", p)
	}
	if p.StartedAt < before || p.StartedAt > after || p.ExitedAt == nil || *p.ExitedAt < p.StartedAt || *p.ExitedAt > after {
		t.Fatalf("started_at_unix %d, exited_at_unix %v, want both in [%d, %d]", p.StartedAt, p.ExitedAt, before, after)
	}
}

// TestWireShapes checks the JSON field names that Coder's clients read.
func TestWireShapes(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)
	dir := t.TempDir()

	r := s.raw(t, "POST", "/start", `{"command":"exec sleep 3600","workdir":"`+dir+`","env":{"A":"b"},"background":true,"client_token":"ignored"}`)
	if r.status != http.StatusOK {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	started := r.object(t)
	if got, want := keys(started), []string{"background", "command", "id", "started"}; !slices.Equal(got, want) {
		t.Errorf("start keys %v, want %v", got, want)
	}
	id, _ := started["id"].(string)
	if started["started"] != true || id == "" {
		t.Fatalf("start reply %s, want an id and started true", r.body)
	}

	// Running: no exit fields.
	r = s.raw(t, "GET", "/list", "")
	list := r.object(t)
	procs, _ := list["processes"].([]any)
	if len(procs) != 1 {
		t.Fatalf("list %s, want one process", r.body)
	}
	proc := procs[0].(map[string]any)
	if got, want := keys(proc), []string{"background", "command", "denials", "id", "pid", "running", "started_at_unix", "workdir"}; !slices.Equal(got, want) {
		t.Errorf("running process keys %v, want %v", got, want)
	}
	if proc["id"] != id || proc["command"] != "exec sleep 3600" || proc["workdir"] != dir ||
		proc["background"] != true || proc["running"] != true {
		t.Errorf("process %v, want the one started", proc)
	}
	if sec, _ := proc["started_at_unix"].(float64); sec < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Errorf("started_at_unix %v, want Unix seconds of now", proc["started_at_unix"])
	}
	r = s.raw(t, "GET", "/"+id, "")
	if got := r.object(t); !slices.Equal(keys(got), keys(proc)) {
		t.Errorf("GET /{id} keys %v, want the list's %v", keys(got), keys(proc))
	}
	r = s.raw(t, "GET", "/"+id+"/output", "")
	if got := keys(r.object(t)); !slices.Equal(got, []string{"output", "running"}) {
		t.Errorf("running output keys %v, want [output running]", got)
	}

	r = s.raw(t, "POST", "/"+id+"/signal", `{"signal":"kill"}`)
	if r.status != http.StatusOK {
		t.Fatalf("signal: %d %s", r.status, r.body)
	}
	if got := keys(r.object(t)); !slices.Equal(got, []string{"message"}) {
		t.Errorf("signal reply keys %v, want [message]", got)
	}

	r = s.raw(t, "GET", "/"+id+"/output?wait=true", "")
	outObj := r.object(t)
	if got, want := keys(outObj), []string{"exit_code", "output", "reason", "running", "signal"}; !slices.Equal(got, want) {
		t.Errorf("exited output keys %v, want %v", got, want)
	}
	if outObj["exit_code"] != float64(137) || outObj["running"] != false || outObj["signal"] != "SIGKILL" || outObj["reason"] != "killed" {
		t.Errorf("output %s, want killed by SIGKILL, exit code 137", r.body)
	}
	// Without a cgroup, sleep's peak_memory_bytes is its own from the
	// kernel's exit records where the host may read them (root in the
	// initial namespaces), and absent elsewhere: there it cannot be told
	// from the host's own pages its leader borrowed until exec
	// (Info.MaxRSS). Never the host's: a few MiB at most.
	r = s.raw(t, "GET", "/"+id, "")
	exited := r.object(t)
	want := []string{"background", "command", "cpu_time_ms", "denials", "exit_code", "exited_at_unix", "id", "pid", "reason", "running", "signal", "started_at_unix", "workdir"}
	if peak, ok := exited["peak_memory_bytes"].(float64); ok {
		want = slices.Insert(want, slices.Index(want, "pid"), "peak_memory_bytes")
		if peak <= 0 || peak > 32<<20 {
			t.Errorf("peak_memory_bytes of sleep: got %v, want above 0 and at most 32 MiB (sleep's own)", peak)
		}
	}
	if got := keys(exited); !slices.Equal(got, want) {
		t.Errorf("exited process keys %v, want %v", got, want)
	}
}

func TestTruncatedShape(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, []agentproc.Option{agentproc.WithOutputLimits(100, 100, 0)}, nil)
	id := start(t, s.client(), httpapi.StartRequest{Command: "i=0; while [ $i -lt 1000 ]; do echo line $i; i=$((i+1)); done"})
	r := s.raw(t, "GET", "/"+id+"/output?wait=true", "")
	trunc, ok := r.object(t)["truncated"].(map[string]any)
	if !ok {
		t.Fatalf("output %s has no truncated object", r.body)
	}
	for _, k := range []string{"original_bytes", "retained_bytes", "omitted_bytes", "strategy"} {
		if _, ok := trunc[k]; !ok {
			t.Errorf("truncated %v has no %q", trunc, k)
		}
	}
	orig, _ := trunc["original_bytes"].(float64)
	kept, _ := trunc["retained_bytes"].(float64)
	omitted, _ := trunc["omitted_bytes"].(float64)
	if trunc["strategy"] != "head_tail" || kept != 200 || orig != kept+omitted {
		t.Errorf("truncated %v, want head_tail keeping 200 bytes", trunc)
	}

	out, err := s.client().Output(testContext(t), id, httpapi.OutputOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out.Truncated == nil || out.Truncated.RetainedBytes != 200 || !strings.HasSuffix(out.Output, "line 999\n") {
		t.Errorf("got %+v, want the truncated tail", out)
	}
}

func TestStartPassesRequestThrough(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)
	ctx := testContext(t)
	c := s.client()
	dir := t.TempDir()

	id := start(t, c, httpapi.StartRequest{Command: `pwd; echo "$GREETING"`, WorkDir: dir, Env: map[string]string{"GREETING": "hi there"}})
	out, err := c.Output(ctx, id, httpapi.OutputOptions{Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Split(out.Output, "\n"); len(got) < 2 || (got[0] != dir && got[0] != real) || got[1] != "hi there" {
		t.Fatalf("output %q, want the work dir and the env value", out.Output)
	}
	p, err := c.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if p.WorkDir != dir || p.Background {
		t.Fatalf("got %+v, want workdir %s, not background", p, dir)
	}
}

func TestTrailingAmpersandIsBackground(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)
	ctx := testContext(t)
	c := s.client()

	resp, err := c.Start(ctx, httpapi.StartRequest{Command: "echo serving; exec sleep 3600 &"})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Started || !resp.Background || resp.Command != "echo serving; exec sleep 3600" || resp.Warnings != nil {
		t.Fatalf("got %+v, want a background start of the command without its &", resp)
	}
	p, err := c.Get(ctx, resp.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Background || p.Command != resp.Command || !p.Running {
		t.Fatalf("got %+v, want the running background process", p)
	}

	resp, err = c.Start(ctx, httpapi.StartRequest{Command: "nohup true"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Background || len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "nohup") {
		t.Fatalf("got %+v, want a foreground start with a warning about nohup", resp)
	}
	if p, err = c.Get(ctx, resp.ID); err != nil || !slices.Equal(p.Warnings, resp.Warnings) {
		t.Fatalf("got %+v, %v; want the warnings in the process too", p, err)
	}
}

func TestListOrderAndSnapshot(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)
	ctx := testContext(t)
	c := s.client()

	done := start(t, c, httpapi.StartRequest{Command: "echo done"})
	if _, err := c.Output(ctx, done, httpapi.OutputOptions{Wait: true}); err != nil {
		t.Fatal(err)
	}
	server := start(t, c, httpapi.StartRequest{Command: "echo listening; " + forever, Background: true})
	procs, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(procs) != 2 || procs[0].ID != server || !procs[0].Running || !procs[0].Background || procs[1].ID != done || procs[1].Running {
		t.Fatalf("list %+v, want the running server first, then the exited command", procs)
	}

	// A snapshot of a running process does not wait.
	out, err := c.Output(ctx, server, httpapi.OutputOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !out.Running || out.ExitCode != nil || out.TimedOut {
		t.Fatalf("got %+v, want a running snapshot", out)
	}
}

func TestSignals(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)
	ctx := testContext(t)
	c := s.client()

	for _, tc := range []struct {
		sig  agentproc.Signal
		name string
		code int
	}{
		{agentproc.SignalKill, "SIGKILL", 137},
		{agentproc.SignalTerminate, "SIGTERM", 143},
		{agentproc.SignalInterrupt, "SIGINT", 130},
	} {
		id := start(t, c, httpapi.StartRequest{Command: forever})
		// No readiness event is needed: Start returns after the exec of
		// sh, which does not catch these signals, and neither does the
		// sleep it execs, so the outcome is the same whenever one lands.
		if err := c.Signal(ctx, id, tc.sig); err != nil {
			t.Fatalf("signal %s: %v", tc.sig, err)
		}
		out, err := c.Output(ctx, id, httpapi.OutputOptions{Wait: true})
		if err != nil {
			t.Fatal(err)
		}
		if out.Running || out.Signal != tc.name || out.ExitCode == nil || *out.ExitCode != tc.code || out.Reason != agentproc.ReasonKilled {
			t.Fatalf("after %s: got %+v, want killed by %s with code %d", tc.sig, out, tc.name, tc.code)
		}
		// A signal to an exited process is a conflict, by Client and raw.
		wantStatus(t, c.Signal(ctx, id, tc.sig), http.StatusConflict)
		wantError(t, s.raw(t, "POST", "/"+id+"/signal", `{"signal":"`+string(tc.sig)+`"}`), http.StatusConflict)
	}
}

func TestMaxRunningIs429(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, []agentproc.Option{agentproc.WithMaxRunning(1)}, nil)
	start(t, s.client(), httpapi.StartRequest{Command: forever})
	_, err := s.client().Start(testContext(t), httpapi.StartRequest{Command: forever})
	wantStatus(t, err, http.StatusTooManyRequests)
	wantError(t, s.raw(t, "POST", "/start", `{"command":"true"}`), http.StatusTooManyRequests)
}

func TestWaitTimeout(t *testing.T) {
	t.Parallel()
	clk := quartz.NewMock(t)
	s := newTestServer(t, nil, nil, httpapi.WithClock(clk), httpapi.WithMaxWait(time.Minute))
	ctx := testContext(t)
	c := s.client()
	id := start(t, c, httpapi.StartRequest{Command: "echo started; " + forever})

	for _, tc := range []struct {
		timeout time.Duration
		want    time.Duration
	}{
		{10 * time.Second, 10 * time.Second},
		{time.Hour, time.Minute}, // the server's cap wins
		{0, time.Minute},         // no timeout: the cap
	} {
		trap := clk.Trap().AfterFunc("httpapi", "wait")
		type result struct {
			out httpapi.Output
			err error
		}
		got := make(chan result, 1)
		go func() {
			out, err := c.Output(ctx, id, httpapi.OutputOptions{Wait: true, Timeout: tc.timeout})
			got <- result{out, err}
		}()
		call := trap.MustWait(ctx)
		if call.Duration != tc.want {
			t.Errorf("timeout %s: the wait is bounded by %s, want %s", tc.timeout, call.Duration, tc.want)
		}
		call.MustRelease(ctx)
		trap.Close()
		clk.Advance(call.Duration).MustWait(ctx)
		var r result
		select {
		case r = <-got:
		case <-ctx.Done():
			t.Fatalf("timeout %s: the wait did not end when its time passed", tc.timeout)
		}
		if r.err != nil {
			t.Fatal(r.err)
		}
		if !r.out.Running || !r.out.TimedOut || r.out.ExitCode != nil {
			t.Fatalf("timeout %s: got %+v, want the running state marked timed_out", tc.timeout, r.out)
		}
	}
}

func TestWaitEndsWhenClientDisconnects(t *testing.T) {
	t.Parallel()
	clk := quartz.NewMock(t)
	// finished receives the path of every request the handler has finished.
	finished := make(chan string, 8)
	observe := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(w, r)
			finished <- r.URL.Path
		})
	}
	s := newTestServer(t, nil, observe, httpapi.WithClock(clk))
	ctx := testContext(t)
	c := s.client()
	id := start(t, c, httpapi.StartRequest{Command: forever})
	<-finished // the start request

	trap := clk.Trap().AfterFunc("httpapi", "wait")
	defer trap.Close()
	waitCtx, disconnect := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Output(waitCtx, id, httpapi.OutputOptions{Wait: true})
		errc <- err
	}()
	// The handler is now inside its wait, which only the process's exit,
	// the mock clock or the client can end.
	trap.MustWait(ctx).MustRelease(ctx)
	disconnect()

	select {
	case path := <-finished:
		if path != "/"+id+"/output" {
			t.Fatalf("finished %s, want the output request", path)
		}
	case <-ctx.Done():
		t.Fatal("the handler kept waiting after its client disconnected")
	}
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("client error %v, want context.Canceled", err)
	}
	p, err := c.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Running {
		t.Fatalf("got %+v, want the process still running: the disconnect ended only the wait", p)
	}
}

// TestWaitOutlivesWriteTimeout runs a wait longer than the server's
// WriteTimeout; without the extended deadline the reply would be cut.
func TestWaitOutlivesWriteTimeout(t *testing.T) {
	t.Parallel()
	m := agentproc.New()
	t.Cleanup(func() { _ = m.Close() })
	srv := httptest.NewUnstartedServer(httpapi.NewHandler(m))
	srv.Config.WriteTimeout = 50 * time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)
	// A fresh connection per request: on a reused one the transport would
	// quietly retry a GET whose reply was cut, hiding the failure.
	tr := srv.Client().Transport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	t.Cleanup(tr.CloseIdleConnections)
	c := &httpapi.Client{URL: srv.URL, HTTPClient: &http.Client{Transport: tr}}
	ctx := testContext(t)

	// The command's own duration is what the test is about: it must
	// outlast the WriteTimeout. It is started on the Manager, not through
	// the server: the start handler does not extend its write deadline,
	// and on a loaded machine its reply can take longer than 50 ms.
	p, err := m.Start(ctx, agentproc.Request{Command: "sleep 0.3; echo finished"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Output(ctx, p.ID(), httpapi.OutputOptions{Wait: true})
	if err != nil {
		t.Fatalf("wait longer than the WriteTimeout: %v", err)
	}
	if out.Running || out.Output != "finished\n" {
		t.Fatalf("got %+v, want the finished process", out)
	}
}

func TestOwnerIsolationByHeader(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)
	ctx := testContext(t)
	alice := s.client(httpapi.DefaultOwnerHeader, "alice")
	bob := s.client(httpapi.DefaultOwnerHeader, "bob")
	nobody := s.client()

	aliceID := start(t, alice, httpapi.StartRequest{Command: forever})
	unownedID := start(t, nobody, httpapi.StartRequest{Command: forever})

	requireIsolated(t, s, bob, aliceID, httpapi.DefaultOwnerHeader, "bob")
	requireIsolated(t, s, nobody, aliceID)
	requireIsolated(t, s, alice, unownedID, httpapi.DefaultOwnerHeader, "alice")

	requireOnly(t, alice, aliceID)
	requireOnly(t, nobody, unownedID)
	requireOnly(t, bob)
	if err := alice.Signal(ctx, aliceID, agentproc.SignalKill); err != nil {
		t.Fatalf("alice signals her own process: %v", err)
	}

	// The owner is recorded in the Manager: Scope("alice") sees it.
	if got := s.m.Scope("alice").List(); len(got) != 1 || got[0].ID != aliceID {
		t.Fatalf("Scope(alice).List() = %+v, want her process", got)
	}
	// Without the header, a request sees what Manager.Start started.
	p, err := s.m.Start(ctx, agentproc.Request{Command: forever})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nobody.Get(ctx, p.ID()); err != nil {
		t.Fatalf("unowned Get of a Manager.Start process: %v", err)
	}
}

func TestOwnerHeaderName(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil, httpapi.WithOwnerHeader("x-chat-id"))
	alice := s.client("X-Chat-Id", "alice")
	id := start(t, alice, httpapi.StartRequest{Command: forever})
	// The default header means nothing now.
	requireIsolated(t, s, s.client(httpapi.DefaultOwnerHeader, "alice"), id, httpapi.DefaultOwnerHeader, "alice")
	requireOnly(t, alice, id)
}

func TestOwnerIsolationByAuthorize(t *testing.T) {
	t.Parallel()
	tokens := map[string]string{"token-a": "alice", "token-b": "bob", "token-anon": ""}
	s := newTestServer(t, nil, nil, httpapi.WithAuthorize(func(r *http.Request) (string, error) {
		owner, ok := tokens[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		if !ok {
			return "", errors.New("unknown token")
		}
		return owner, nil
	}))
	alice := s.client("Authorization", "Bearer token-a")
	// Bob claims to be alice in the owner header: the hook decides.
	bob := s.client("Authorization", "Bearer token-b", httpapi.DefaultOwnerHeader, "alice")
	anon := s.client("Authorization", "Bearer token-anon")

	aliceID := start(t, alice, httpapi.StartRequest{Command: forever})
	requireIsolated(t, s, bob, aliceID, "Authorization", "Bearer token-b", httpapi.DefaultOwnerHeader, "alice")
	requireIsolated(t, s, anon, aliceID, "Authorization", "Bearer token-anon")
	requireOnly(t, alice, aliceID)
	requireOnly(t, bob)
	requireOnly(t, anon)
	if got := s.m.Scope("alice").List(); len(got) != 1 || got[0].ID != aliceID {
		t.Fatalf("Scope(alice).List() = %+v, want her process", got)
	}
}

// requireIsolated checks that c (which sends header, for the raw requests)
// cannot see, read or signal process id, and gets exactly the reply an
// unknown ID gets.
func requireIsolated(t *testing.T, s *testServer, c *httpapi.Client, id string, header ...string) {
	t.Helper()
	ctx := testContext(t)
	_, err := c.Get(ctx, id)
	wantStatus(t, err, http.StatusNotFound)
	_, err = c.Output(ctx, id, httpapi.OutputOptions{})
	wantStatus(t, err, http.StatusNotFound)
	_, err = c.Output(ctx, id, httpapi.OutputOptions{Wait: true})
	wantStatus(t, err, http.StatusNotFound)
	wantStatus(t, c.Signal(ctx, id, agentproc.SignalKill), http.StatusNotFound)

	for _, r := range []struct{ method, path, body string }{
		{"GET", "/" + id, ""},
		{"GET", "/" + id + "/output", ""},
		{"POST", "/" + id + "/signal", `{"signal":"kill"}`},
	} {
		got := s.raw(t, r.method, r.path, r.body, header...)
		unknown := s.raw(t, r.method, strings.Replace(r.path, id, unknownID, 1), r.body, header...)
		wantError(t, got, http.StatusNotFound)
		if want := strings.ReplaceAll(unknown.body, unknownID, id); got.body != want {
			t.Errorf("%s %s: another owner's ID gets %s, an unknown one %s", r.method, r.path, got.body, unknown.body)
		}
	}
	p, err := s.m.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Info().Running {
		t.Fatalf("process %s was stopped by another owner", id)
	}
}

// requireOnly checks that c lists exactly ids.
func requireOnly(t *testing.T, c *httpapi.Client, ids ...string) {
	t.Helper()
	procs, err := c.List(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range procs {
		got = append(got, p.ID)
	}
	slices.Sort(got)
	slices.Sort(ids)
	if !slices.Equal(got, ids) {
		t.Fatalf("list %v, want %v", got, ids)
	}
}

func TestStartTimeout(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)
	ctx := testContext(t)
	c := s.client()
	// The timeout is real time, but the outcome does not depend on when
	// it fires: the process runs until stopped, and SIGTERM ends sh and
	// the sleep it execs alike.
	id := start(t, c, httpapi.StartRequest{Command: forever, Timeout: "10ms"})
	out, err := c.Output(ctx, id, httpapi.OutputOptions{Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if out.Running || out.Reason != agentproc.ReasonTimeout || out.Signal != "SIGTERM" {
		t.Fatalf("got %+v, want the process stopped by its timeout", out)
	}
}
