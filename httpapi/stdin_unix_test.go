//go:build unix

package httpapi_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/httpapi"
)

func TestStdin(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)
	ctx := testContext(t)
	c := s.client()

	id := start(t, c, httpapi.StartRequest{Command: "cat; echo eof", Stdin: true})
	resp, err := c.WriteStdin(ctx, id, httpapi.StdinRequest{Data: "hello\n"})
	if err != nil || resp.Written != 6 {
		t.Fatalf("write: got %+v, %v; want 6 bytes written", resp, err)
	}
	r := s.raw(t, "POST", "/"+id+"/stdin", `{"data":"world\n","close":true}`)
	if r.status != http.StatusOK || strings.TrimSpace(r.body) != `{"written":6}` {
		t.Fatalf("raw write and close: got %d %s, want {\"written\":6}", r.status, r.body)
	}
	out, err := c.Output(ctx, id, httpapi.OutputOptions{Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != "hello\nworld\neof\n" || out.Running {
		t.Fatalf("got %+v, want the input echoed, then eof", out)
	}

	// Closed, then exited: a conflict either way.
	_, err = c.WriteStdin(ctx, id, httpapi.StdinRequest{Data: "late"})
	wantStatus(t, err, http.StatusConflict)
	// Closing again is fine, as CloseStdin is.
	if _, err := c.WriteStdin(ctx, id, httpapi.StdinRequest{Close: true}); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

func TestStdinErrors(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)
	ctx := testContext(t)
	c := s.client()

	id := start(t, c, httpapi.StartRequest{Command: forever})
	_, err := c.WriteStdin(ctx, id, httpapi.StdinRequest{Data: "x"})
	wantStatus(t, err, http.StatusConflict)
	wantError(t, s.raw(t, "POST", "/"+id+"/stdin", `{"close":true}`), http.StatusConflict)
	wantError(t, s.raw(t, "POST", "/"+id+"/stdin", `{"data":`), http.StatusBadRequest)
	wantError(t, s.raw(t, "POST", "/"+unknownID+"/stdin", `{"data":"x"}`), http.StatusNotFound)
	_, err = s.client(httpapi.DefaultOwnerHeader, "bob").WriteStdin(ctx, id, httpapi.StdinRequest{Data: "x"})
	wantStatus(t, err, http.StatusNotFound)
}

func TestTTY(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)
	ctx := testContext(t)
	c := s.client()

	id := start(t, c, httpapi.StartRequest{Command: "stty size; read line; echo got $line", TTY: &agentproc.TTYSize{Rows: 30, Cols: 100}})
	// The terminal echoes input: write only once the size is out, or the
	// echo can come first.
	if _, err := c.Output(ctx, id, httpapi.OutputOptions{WaitFor: regexp.MustCompile(`^\d+ \d+$`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteStdin(ctx, id, httpapi.StdinRequest{Data: "hi\n"}); err != nil {
		t.Fatal(err)
	}
	out, err := c.Output(ctx, id, httpapi.OutputOptions{Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.Output, "30 100\r\n") || !strings.Contains(out.Output, "got hi") {
		t.Fatalf("output %q, want the terminal size and the line read", out.Output)
	}
}
