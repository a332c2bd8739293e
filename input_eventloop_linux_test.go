package agentproc_test

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// eventLoopCommand returns the shell command that runs script (in
// testdata/eventloop) with tool, or skips the test when tool is not
// installed (CI installs node and python3: .ci/install-test-deps.sh).
func eventLoopCommand(t testing.TB, tool, script string) string {
	t.Helper()
	path, err := exec.LookPath(tool)
	if err != nil {
		t.Skipf("%s is not installed: %v", tool, err)
	}
	abs, err := filepath.Abs(filepath.Join("testdata", "eventloop", script))
	if err != nil {
		t.Fatal(err)
	}
	return "exec " + path + " " + abs
}

// awaitingEvents returns a channel of the prompts of p's
// EventAwaitingInput events, from a subscription made now.
func awaitingEvents(t *testing.T, m *agentproc.Manager) <-chan agentproc.Event {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	all := m.Subscribe(ctx)
	out := make(chan agentproc.Event, agentproc.EventBuffer)
	go func() {
		defer close(out)
		for e := range all {
			if e.Type == agentproc.EventAwaitingInput {
				out <- e
			}
		}
	}()
	return out
}

// nextAwaiting returns the next awaiting-input event, failing the test if
// none comes in time.
func nextAwaiting(t *testing.T, events <-chan agentproc.Event) agentproc.Event {
	t.Helper()
	select {
	case e := <-events:
		return e
	case <-time.After(testTimeout):
		t.Fatal("no awaiting_input event in time")
		return agentproc.Event{}
	}
}

// TestAwaitingInputEventLoop runs prompts that wait for their answer in an
// epoll wait, never in a read of stdin: Node's readline (rl.question) and
// Python's asyncio (loop.connect_read_pipe), each on a stdin pipe and on a
// terminal. WaitOutput returns with AwaitingInput once the prompt is out
// and the quiet period has passed; after WriteStdin the answer is
// processed and the second question is reported as a new change to
// awaiting (so the flag cleared in between); after the last answer and the
// end of stdin the process exits.
func TestAwaitingInputEventLoop(t *testing.T) {
	t.Parallel()
	for _, prog := range []struct{ name, tool, script string }{
		{"node-readline", "node", "ask.js"},
		{"python-asyncio", "python3", "ask.py"},
	} {
		for _, tty := range []bool{false, true} {
			name := prog.name + "/stdin"
			if tty {
				name = prog.name + "/tty"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				req := agentproc.Request{Command: eventLoopCommand(t, prog.tool, prog.script)}
				if tty {
					req.TTY = &agentproc.TTYSize{}
				} else {
					req.Stdin = true
				}
				m := newManager(t, agentproc.WithInputQuiet(100*time.Millisecond))
				events := awaitingEvents(t, m)
				p := mustStart(t, m, req)
				ctx := testContext(t)

				out := followUntilInput(t, p)
				if got := agentproc.PlainText(out); !strings.HasSuffix(got, "Project name? ") {
					t.Errorf("output when awaiting input: got %q, want it to end with the prompt", got)
				}
				if !p.Info().AwaitingInput {
					t.Errorf("Info.AwaitingInput: got false, want true")
				}
				if e := nextAwaiting(t, events); e.ID != p.ID() || e.Line != "Project name? " {
					t.Errorf("first awaiting_input event: got %+v, want the prompt of %s", e, p.ID())
				}

				if _, err := p.WriteStdin(ctx, []byte("demo\n")); err != nil {
					t.Fatal(err)
				}
				if _, err := p.WaitMatch(ctx, regexp.MustCompile(`name=demo`), agentproc.Plain); err != nil {
					t.Fatalf("WaitMatch name=demo: %v (output %q)", err, p.Output().Text)
				}
				// An event is published only on a change to true.
				if e := nextAwaiting(t, events); e.ID != p.ID() || e.Line != "License? " {
					t.Errorf("second awaiting_input event: got %+v, want the second prompt of %s", e, p.ID())
				}
				if _, err := p.WriteStdin(ctx, []byte("MIT\n")); err != nil {
					t.Fatal(err)
				}
				if _, err := p.WaitMatch(ctx, regexp.MustCompile(`license=MIT`), agentproc.Plain); err != nil {
					t.Fatalf("WaitMatch license=MIT: %v (output %q)", err, p.Output().Text)
				}
				// Node keeps running until a stdin pipe ends, even once
				// readline is closed.
				if err := p.CloseStdin(ctx); err != nil {
					t.Fatal(err)
				}
				info := mustWait(t, p)
				if info.AwaitingInput {
					t.Errorf("AwaitingInput after exit: got true, want false")
				}
			})
		}
	}
}

// TestNotAwaitingInputEventLoop: event loops that must never be reported
// as awaiting input, each beside a Node prompt that is. A Node HTTP server
// with a stdin pipe it never reads waits in epoll_pwait on sockets only,
// and serves requests without a word; a Node loop with a question pending
// on stdin (so stdin is in its epoll set, for input) prints every 20 ms.
// The prompt starts after both went quiet or busy, so by the time it is
// reported the watcher has looked at them too.
func TestNotAwaitingInputEventLoop(t *testing.T) {
	t.Parallel()
	// A longer quiet period than the others: the busy loop must not be
	// starved of the CPU for that long under make stress.
	m := newManager(t, agentproc.WithInputQuiet(500*time.Millisecond))
	events := awaitingEvents(t, m)
	ctx := testContext(t)

	server := mustStart(t, m, agentproc.Request{Command: eventLoopCommand(t, "node", "serve.js"), Stdin: true})
	portRE := regexp.MustCompile(`port=(\d+)`)
	line, err := server.WaitMatch(ctx, portRE)
	if err != nil {
		t.Fatalf("server: %v (output %q)", err, server.Output().Text)
	}
	url := "http://127.0.0.1:" + portRE.FindStringSubmatch(line)[1] + "/"
	get := func() {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || string(body) != "ok\n" {
			t.Fatalf("GET %s: got %q, %v; want ok", url, body, err)
		}
	}
	get()

	busy := mustStart(t, m, agentproc.Request{Command: eventLoopCommand(t, "node", "busy.js"), Stdin: true})
	if _, err := busy.WaitMatch(ctx, regexp.MustCompile(`tick 3`)); err != nil {
		t.Fatalf("busy loop: %v (output %q)", err, busy.Output().Text)
	}

	prompt := mustStart(t, m, agentproc.Request{Command: eventLoopCommand(t, "node", "ask.js"), Stdin: true})
	followUntilInput(t, prompt)
	get()
	if e := nextAwaiting(t, events); e.ID != prompt.ID() {
		t.Errorf("awaiting_input event: got one for %s, want only the prompt %s (server %s, busy loop %s)",
			e.ID, prompt.ID(), server.ID(), busy.ID())
	}
	if server.Info().AwaitingInput {
		t.Errorf("server: AwaitingInput true, want false (its epoll set holds sockets only)")
	}
	if busy.Info().AwaitingInput {
		t.Errorf("busy loop: AwaitingInput true, want false (it keeps printing)")
	}
	if _, err := busy.WriteStdin(ctx, []byte("y\n")); err != nil {
		t.Fatal(err)
	}
	if info := mustWait(t, busy); info.ExitCode == nil || *info.ExitCode != 0 {
		t.Errorf("busy loop exit: got %+v, want 0", info)
	}
}
