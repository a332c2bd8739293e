//go:build unix

package httpapi_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/httpapi"
)

// TestUnixSocket0600 is docs/http.md's setup for a local agent: the handler on
// a Unix socket only its user can open. The Host rule lets any name through
// there (no browser reaches a Unix socket), so a client that dials the
// socket with a made-up host works.
func TestUnixSocket0600(t *testing.T) {
	t.Parallel()
	m := agentproc.New()
	t.Cleanup(func() { _ = m.Close() })

	// Short path: sun_path holds about 100 bytes.
	dir, err := os.MkdirTemp("", "ap")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: httpapi.NewHandler(m, quiet())}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		<-served // Serve returns once Close has closed the listener
	})

	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Fatalf("socket mode %v, want 0600", got)
	}
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	c := &httpapi.Client{URL: "http://agent", HTTPClient: &http.Client{Transport: tr}}
	ctx := testContext(t)
	resp, err := c.Start(ctx, httpapi.StartRequest{Command: "echo over the socket"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Output(ctx, resp.ID, httpapi.OutputOptions{Wait: true})
	if err != nil || out.Output != "over the socket\n" {
		t.Fatalf("got %+v, %v; want the echo", out, err)
	}
}

func TestMaxRunningPerOwner(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil, httpapi.WithMaxRunningPerOwner(2))
	ctx := testContext(t)
	a, b := s.client(httpapi.DefaultOwnerHeader, "a"), s.client(httpapi.DefaultOwnerHeader, "b")

	first := start(t, a, httpapi.StartRequest{Command: forever})
	start(t, a, httpapi.StartRequest{Command: forever})
	_, err := a.Start(ctx, httpapi.StartRequest{Command: forever})
	wantStatus(t, err, http.StatusTooManyRequests)
	// Another owner has slots of its own.
	start(t, b, httpapi.StartRequest{Command: forever})

	// A slot comes back when a process exits.
	if err := a.Signal(ctx, first, agentproc.SignalKill); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Output(ctx, first, httpapi.OutputOptions{Wait: true}); err != nil {
		t.Fatal(err)
	}
	start(t, a, httpapi.StartRequest{Command: forever})
}

// TestMaxRunningPerOwnerConcurrent checks that Starts racing each other do
// not overshoot the cap.
func TestMaxRunningPerOwnerConcurrent(t *testing.T) {
	t.Parallel()
	const limit, tries = 3, 12
	s := newTestServer(t, nil, nil, httpapi.WithMaxRunningPerOwner(limit))
	c := s.client(httpapi.DefaultOwnerHeader, "a")
	ctx := testContext(t)

	var wg sync.WaitGroup
	codes := make(chan int, tries)
	for range tries {
		wg.Go(func() {
			_, err := c.Start(ctx, httpapi.StartRequest{Command: forever})
			if err == nil {
				codes <- http.StatusOK
				return
			}
			if e, ok := errors.AsType[*httpapi.Error](err); !ok || e.StatusCode != http.StatusTooManyRequests {
				t.Errorf("start: %v, want 200 or 429", err)
			}
			codes <- http.StatusTooManyRequests
		})
	}
	wg.Wait()
	close(codes)
	ok := 0
	for code := range codes {
		if code == http.StatusOK {
			ok++
		}
	}
	if ok < 1 || ok > limit {
		t.Fatalf("%d of %d concurrent starts succeeded, want between 1 and %d", ok, tries, limit)
	}
	if running := len(s.m.Scope("a").List()); running != ok {
		t.Fatalf("%d running, want %d", running, ok)
	}
}
