//go:build unix

package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/coder/quartz"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/httpapi"
)

// uiChunk mirrors the data of a GET /ui/output event.
type uiChunk struct {
	Offset  int64  `json:"offset"`
	Next    int64  `json:"next"`
	Resume  int64  `json:"resume"`
	Omitted int64  `json:"omitted"`
	EOF     bool   `json:"eof"`
	Text    string `json:"text"`
	Partial string `json:"partial"`
}

func decodeJSON[T any](t *testing.T, data string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	return v
}

// TestUIOutputStream: GET /ui/output sends finished lines rendered as a
// terminal shows them, the unfinished line apart, and a reconnect from
// Resume gets the unfinished line again whole and nothing else twice.
func TestUIOutputStream(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil, httpapi.WithUI())
	ctx := testContext(t)
	p, err := s.m.Start(ctx, agentproc.Request{
		Command: `printf '\033[1mone\033[0m\ntw'; read x; printf 'o\rTW\n3\n'`,
		Stdin:   true,
	})
	if err != nil {
		t.Fatal(err)
	}
	path := "/ui/output?id=" + p.ID()
	var first uiChunk
	var text string
	s.readSSE(t, path, nil, func(typ, data string) bool {
		if typ != "output" {
			return false
		}
		c := decodeJSON[uiChunk](t, data)
		text += c.Text
		first = c
		return c.Partial == "tw"
	})
	if text != "one\n" {
		t.Errorf("finished text before the answer: got %q, want %q", text, "one\n")
	}
	if first.Resume != int64(len("\033[1mone\033[0m\n")) {
		t.Errorf("resume: got %d, want the start of the unfinished line, %d", first.Resume, len("\033[1mone\033[0m\n"))
	}
	if _, err := p.WriteStdin(ctx, []byte("\n")); err != nil {
		t.Fatal(err)
	}
	// Reconnect from Resume: the unfinished line comes whole, rendered
	// with the "\r" that rewrote it.
	text = ""
	s.readSSE(t, fmt.Sprintf("%s&offset=%d", path, first.Resume), nil, func(typ, data string) bool {
		c := decodeJSON[uiChunk](t, data)
		text += c.Text
		if c.EOF && c.Partial != "" {
			t.Errorf("partial %q in the last event", c.Partial)
		}
		return c.EOF
	})
	if text != "TWo\n3\n" {
		t.Errorf("text after reconnecting: got %q, want %q", text, "TWo\n3\n")
	}
}

// TestUIOutputOmitted: a process whose output outgrows the Manager's head
// and tail is followed with the omission reported once, between the head
// and the tail, and the unfinished line before it is finished first.
func TestUIOutputOmitted(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, []agentproc.Option{agentproc.WithOutputLimits(64, 64, 0)}, nil, httpapi.WithUI())
	ctx := testContext(t)
	p, err := s.m.Start(ctx, agentproc.Request{Command: `i=0; while [ $i -lt 200 ]; do echo "line $i"; i=$((i+1)); done`})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	var text string
	omitted := 0
	s.readSSE(t, "/ui/output?id="+p.ID(), nil, func(typ, data string) bool {
		c := decodeJSON[uiChunk](t, data)
		if c.Omitted > 0 {
			omitted++
			if !strings.HasSuffix(text, "\n") {
				t.Errorf("omission after %q, which does not end a line", text)
			}
			text += "[omitted]\n"
		}
		text += c.Text
		return c.EOF
	})
	if omitted != 1 {
		t.Errorf("%d omissions reported, want 1", omitted)
	}
	if !strings.HasPrefix(text, "line 0\nline 1\n") || !strings.HasSuffix(text, "line 198\nline 199\n") || !strings.Contains(text, "[omitted]") {
		t.Errorf("followed text %q, want head, omission, tail", text)
	}
}

// TestUIEvents: GET /ui/events starts with a snapshot of the caller's
// processes, carries the API's events, and reports a listening port, which
// no event does, as an "info" event.
func TestUIEvents(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("listening ports are read from /proc on Linux only")
	}
	s := newTestServer(t, nil, nil, httpapi.WithUI())
	ctx := testContext(t)
	before, err := s.m.Scope("alice").Start(ctx, agentproc.Request{Command: "sleep 30"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.m.Scope("bob").Start(ctx, agentproc.Request{Command: "sleep 30"})
	if err != nil {
		t.Fatal(err)
	}
	var server *agentproc.Process
	header := http.Header{httpapi.DefaultOwnerHeader: {"alice"}}
	sawStart := false
	s.readSSE(t, "/ui/events", header, func(typ, data string) bool {
		switch typ {
		case "snapshot":
			snap := decodeJSON[struct {
				Processes []httpapi.Process `json:"processes"`
			}](t, data)
			if len(snap.Processes) != 1 || snap.Processes[0].ID != before.ID() || snap.Processes[0].Owner != "alice" {
				t.Errorf("snapshot %+v, want alice's one process %s (not bob's %s)", snap.Processes, before.ID(), other.ID())
			}
			server, err = s.m.Scope("alice").Start(ctx, agentproc.Request{
				Command: "exec python3 -m http.server 0 --bind 127.0.0.1", Background: true,
			})
			if err != nil {
				t.Fatal(err)
			}
		case "started":
			e := decodeJSON[httpapi.Event](t, data)
			sawStart = e.ID == server.ID()
		case "info":
			e := decodeJSON[httpapi.Event](t, data)
			return e.ID == server.ID() && e.Info != nil && len(e.Info.Ports) > 0
		}
		return false
	})
	if !sawStart {
		t.Error("no started event for the server before its info event")
	}
}

// TestUIUsage: GET /ui/events carries the CPU time and memory of the
// caller's running processes, in the snapshot and in "usage" events as
// they change, and none of another owner's.
func TestUIUsage(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil, httpapi.WithUI())
	ctx := testContext(t)
	burner, err := s.m.Scope("alice").Start(ctx, agentproc.Request{Command: "while :; do :; done"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.m.Scope("bob").Start(ctx, agentproc.Request{Command: "sleep 30"})
	if err != nil {
		t.Fatal(err)
	}
	type usage struct {
		CPUTimeMS   int64 `json:"cpu_time_ms"`
		MemoryBytes int64 `json:"memory_bytes"`
	}
	header := http.Header{httpapi.DefaultOwnerHeader: {"alice"}}
	var first int64 = -1
	s.readSSE(t, "/ui/events", header, func(typ, data string) bool {
		var u struct {
			Usage map[string]usage `json:"usage"`
		}
		if typ != "snapshot" && typ != "usage" {
			return false
		}
		if err := json.Unmarshal([]byte(data), &u); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		if _, ok := u.Usage[other.ID()]; ok {
			t.Errorf("%s event: got bob's process %s, want alice's only", typ, other.ID())
		}
		if runtime.GOOS != "linux" {
			if len(u.Usage) > 0 {
				t.Errorf("%s event: got usage %v, want none where Process.Usage is unsupported", typ, u.Usage)
			}
			return true
		}
		got, ok := u.Usage[burner.ID()]
		switch {
		case typ == "snapshot":
			if !ok || got.MemoryBytes <= 0 {
				t.Errorf("snapshot usage of %s: got %+v (present %v), want memory above 0", burner.ID(), got, ok)
			}
			first = got.CPUTimeMS
			return false
		case ok && got.MemoryBytes <= 0:
			t.Errorf("usage event of %s: got %+v, want memory above 0", burner.ID(), got)
		}
		return ok && got.CPUTimeMS > first
	})
}

// TestUIUsageHidden: GET /ui/events?usage=0, what a hidden page asks,
// reads no usage: none in the snapshot and no usage ticker, while the
// stream's events go on; without it, or with usage=1, both are there. Any
// other value is refused.
func TestUIUsageHidden(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		query string
		usage bool
	}{
		{"", true},
		{"?usage=1", true},
		{"?usage=0", false},
	} {
		t.Run("/ui/events"+tt.query, func(t *testing.T) {
			t.Parallel()
			clk := quartz.NewMock(t)
			trap := clk.Trap().NewTicker("httpapi")
			s := newTestServer(t, nil, nil, httpapi.WithUI(), httpapi.WithClock(clk))
			ctx := testContext(t)
			burner, err := s.m.Start(ctx, agentproc.Request{Command: "while :; do :; done"})
			if err != nil {
				t.Fatal(err)
			}
			// The tags of the stream's tickers, recorded before each is
			// released: all of them are made after the snapshot, before
			// the first event that follows it.
			var tickers []string
			trapCtx, stopTrap := context.WithCancel(ctx)
			trapDone := make(chan struct{})
			go func() {
				defer close(trapDone)
				for {
					call, err := trap.Wait(trapCtx)
					if err != nil {
						return
					}
					tickers = append(tickers, strings.Join(call.Tags, " "))
					if call.Release(trapCtx) != nil {
						return
					}
				}
			}()
			var later *agentproc.Process
			s.readSSE(t, "/ui/events"+tt.query, nil, func(typ, data string) bool {
				switch typ {
				case "snapshot":
					snap := decodeJSON[struct {
						Usage map[string]json.RawMessage `json:"usage"`
					}](t, data)
					_, got := snap.Usage[burner.ID()]
					if want := tt.usage && runtime.GOOS == "linux"; got != want {
						t.Errorf("snapshot: usage of the running %s: got %v, want %v", burner.ID(), got, want)
					}
					if later, err = s.m.Start(ctx, agentproc.Request{Command: "sleep 30"}); err != nil {
						t.Fatal(err)
					}
				case "usage":
					if !tt.usage {
						t.Errorf("usage event %s, want none", data)
					}
				case "started":
					return decodeJSON[httpapi.Event](t, data).ID == later.ID()
				}
				return false
			})
			stopTrap()
			<-trapDone
			trap.Close()
			if got := slices.Contains(tickers, "httpapi ui-usage"); got != tt.usage {
				t.Errorf("usage ticker made: got %v, want %v (tickers %q)", got, tt.usage, tickers)
			}
		})
	}
	t.Run("?usage=yes", func(t *testing.T) {
		t.Parallel()
		s := newTestServer(t, nil, nil, httpapi.WithUI())
		obj := wantError(t, s.raw(t, http.MethodGet, "/ui/events?usage=yes", ""), http.StatusBadRequest)
		if msg, _ := obj["message"].(string); !strings.Contains(msg, "usage") {
			t.Errorf("message %q, want it to name the usage parameter", msg)
		}
	})
}
