//go:build unix

package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/httpapi"
)

// TestOutputPlainAndWaitPort: ?plain=true renders colour codes and
// redraws away, and ?wait_port returns the port a real server listens on,
// which then shows in the process JSON.
func TestOutputPlainAndWaitPort(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)
	ctx := testContext(t)
	c := s.client()

	id := start(t, c, httpapi.StartRequest{Command: `printf '\033[32mok\033[0m 10%%\r\033[K100%%\n'`})
	out, err := c.Output(ctx, id, httpapi.OutputOptions{Wait: true, Plain: true})
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != "100%\n" {
		t.Errorf("plain output: got %q, want %q", out.Output, "100%\n")
	}

	if runtime.GOOS != "linux" {
		return
	}
	id = start(t, c, httpapi.StartRequest{Command: "exec python3 -m http.server 0 --bind 127.0.0.1", Background: true})
	anyPort := 0
	out, err = c.Output(ctx, id, httpapi.OutputOptions{WaitPort: &anyPort})
	if err != nil {
		t.Fatal(err)
	}
	if out.Port == nil || out.Port.Port == 0 || out.TimedOut {
		t.Fatalf("wait_port: got port %+v timed out %v, want a port", out.Port, out.TimedOut)
	}
	// The Background process's Ports are kept current by the watcher; the
	// wait above has scanned it, so Get shows the port.
	p, err := c.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Ports) != 1 || p.Ports[0].Port != out.Port.Port {
		t.Errorf("ports: got %+v, want [%d]", p.Ports, out.Port.Port)
	}
}

// readEvents reads Server-Sent Events from GET /events until stop returns
// true.
func readEvents(t *testing.T, s *testServer, header http.Header, stop func(agentproc.Event) bool) []agentproc.Event {
	t.Helper()
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.srv.URL+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type: got %q", ct)
	}
	var events []agentproc.Event
	sc := bufio.NewScanner(resp.Body)
	var id string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			var e agentproc.Event
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e); err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(id); got == "" {
				t.Errorf("event without id: %+v", e)
			}
			events = append(events, e)
			if stop(e) {
				return events
			}
		}
	}
	t.Fatalf("stream ended: %v; events so far %+v", sc.Err(), events)
	return nil
}

// TestEventsStream: GET /events carries only the caller's processes and
// resumes after Last-Event-ID.
func TestEventsStream(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)
	alice := s.client(httpapi.DefaultOwnerHeader, "alice")
	bob := s.client(httpapi.DefaultOwnerHeader, "bob")
	bobID := start(t, bob, httpapi.StartRequest{Command: "exit 0"})
	id := start(t, alice, httpapi.StartRequest{Command: "exit 0"})

	h := http.Header{}
	h.Set(httpapi.DefaultOwnerHeader, "alice")
	h.Set("Last-Event-ID", "0") // replay from the start
	events := readEvents(t, s, h, func(e agentproc.Event) bool {
		return e.Type == agentproc.EventExited && e.ID == id
	})
	if events[0].Type != agentproc.EventStarted || events[0].ID != id {
		t.Errorf("first event: got %+v, want alice's start", events[0])
	}
	for _, e := range events {
		if e.ID == bobID || e.Owner != "alice" {
			t.Errorf("alice saw %+v", e)
		}
	}
	// Resuming after the start replays from the next event on.
	h.Set("Last-Event-ID", itoa(events[0].Seq))
	again := readEvents(t, s, h, func(agentproc.Event) bool { return true })
	if again[0].Seq <= events[0].Seq {
		t.Errorf("resumed stream began with seq %d, want after %d", again[0].Seq, events[0].Seq)
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
