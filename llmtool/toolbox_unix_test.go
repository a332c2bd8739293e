//go:build unix

package llmtool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/llmtool"
)

// dispatch runs one call, failing the test on error, and returns its text.
func dispatch(t *testing.T, tb *llmtool.Toolbox, tool, args string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := tb.Dispatch(ctx, tool, json.RawMessage(args), nil)
	if err != nil {
		t.Fatalf("%s %s: %v", tool, args, err)
	}
	return res
}

// field returns the value of the first "name: value" line of a result.
func field(res, name string) string {
	for line := range strings.Lines(res) {
		if v, ok := strings.CutPrefix(line, name+": "); ok {
			return strings.TrimSuffix(v, "\n")
		}
	}
	return ""
}

// output returns the output section of a result: what follows its
// "output...:" line.
func output(res string) string {
	_, after, ok := strings.Cut(res, "\noutput")
	if !ok {
		return ""
	}
	_, text, _ := strings.Cut(after, ":\n")
	return text
}

func newToolbox(t *testing.T, opts ...agentproc.Option) *llmtool.Toolbox {
	t.Helper()
	m := agentproc.New(opts...)
	t.Cleanup(func() { m.Close() })
	return llmtool.New(m.Scope("test"), llmtool.Options{})
}

func TestTrailingAmpersandRunsInBackground(t *testing.T) {
	t.Parallel()
	tb := newToolbox(t)
	res := dispatch(t, tb, "execute", `{"command": "sleep 3600 &"}`)
	if field(res, "state") != "running in the background" || field(res, "command") != "sleep 3600" ||
		!strings.Contains(field(res, "note"), "use run_in_background instead of &") {
		t.Fatalf("got %q, want the command run in the background without its &, and a note", res)
	}
}

func TestOutputFollowsWithNext(t *testing.T) {
	t.Parallel()
	tb := newToolbox(t, agentproc.WithOutputLimits(64, 64, 0))

	res := dispatch(t, tb, "execute", `{"command": "i=0; while [ $i -lt 100 ]; do echo line $i; i=$((i+1)); done"}`)
	out := output(res)
	if !strings.HasPrefix(out, "line 0\n") || !strings.Contains(out, "bytes omitted ...]\n") || !strings.HasSuffix(out, "line 99\n") ||
		!strings.Contains(res, "\noutput (truncated: ") {
		t.Fatalf("got %q, want head, a marker, tail and the truncation stated", res)
	}
	if field(res, "state") != "exited with code 0" {
		t.Errorf("state: got %q, want exited with code 0", field(res, "state"))
	}
	id, next := field(res, "process_id"), field(res, "next")
	res = dispatch(t, tb, "process_output", fmt.Sprintf(`{"process_id": %q, "offset": %s}`, id, next))
	if !strings.Contains(res, "output: (no new output)\n") || field(res, "next") != next {
		t.Fatalf("read from next: got %q, want nothing new", res)
	}

	res = dispatch(t, tb, "execute", `{"command": "echo one; sleep 0.1; echo two", "run_in_background": true}`)
	id = field(res, "process_id")
	res = dispatch(t, tb, "process_output", fmt.Sprintf(`{"process_id": %q, "wait": true}`, id))
	if output(res) != "one\ntwo\n" || field(res, "state") != "exited with code 0" {
		t.Fatalf("wait: got %q, want the whole output after exit", res)
	}
	res = dispatch(t, tb, "process_output", fmt.Sprintf(`{"process_id": %q, "wait_for": "three"}`, id))
	if !strings.Contains(field(res, "note"), "exited without printing a line that matches") {
		t.Fatalf("wait_for on an exited process: got %q, want a note that nothing matched", res)
	}
}

func TestOutputIsPlainText(t *testing.T) {
	t.Parallel()
	tb := newToolbox(t)
	res := dispatch(t, tb, "execute", `{"command": "printf '\\033[1;32mBuilding\\033[0m\\n'; for i in 1 2 3; do printf '\\r\\033[K%d/3' $i; done; printf '\\n\\033[32m  Local: http://localhost:\\033[1m5173\\033[22m/\\033[0m\\n'"}`)
	if want := "Building\n3/3\n  Local: http://localhost:5173/\n"; output(res) != want {
		t.Fatalf("output: got %q, want %q", output(res), want)
	}
	res = dispatch(t, tb, "process_wait", fmt.Sprintf(`{"process_id": %q, "pattern": "localhost:\\d+/"}`, field(res, "process_id")))
	if field(res, "matched") != "  Local: http://localhost:5173/" {
		t.Fatalf("pattern: got %q, want the rendered line", res)
	}
}

// TestExecuteFloodIsStopped runs a command that prints forever: the tool
// result says it was stopped for its output, and keeps its start and end.
// The limit is 4 MiB, not the default 64 MiB: under make stress's -race
// and CPU burners `yes` did not print 64 MiB within execute's wait, and
// the result said "running" (a slow machine's, not the guard's, failure).
func TestExecuteFloodIsStopped(t *testing.T) {
	t.Parallel()
	m := agentproc.New()
	t.Cleanup(func() { m.Close() })
	tb := llmtool.New(m.Scope("test"), llmtool.Options{MaxOutput: 4 << 20})
	res := dispatch(t, tb, "execute", `{"command": "yes"}`)
	if st := field(res, "state"); !strings.HasPrefix(st, "stopped: its output passed 4 MiB") {
		t.Errorf("state: got %q, want why it was stopped", st)
	}
	if out := output(res); !strings.HasPrefix(out, "y\ny\n") || !strings.Contains(out, "bytes omitted ...]") {
		t.Errorf("output: got %.40q, want the head and tail of the flood", out)
	}
}

// TestInputAnswersPrompt writes the answer to a prompt through
// process_input and reads what the program made of it.
func TestInputAnswersPrompt(t *testing.T) {
	t.Parallel()
	tb := newToolbox(t)
	res := dispatch(t, tb, "execute", `{"command": "printf 'name? '; read name; echo \"hello $name\"; cat; echo done", "stdin": true}`)
	id := field(res, "process_id")
	if field(res, "state") != "running in the background" || !strings.Contains(field(res, "note"), "process_input") {
		t.Fatalf("got %q, want a background process and how to answer it", res)
	}
	res = dispatch(t, tb, "process_input", fmt.Sprintf(`{"process_id": %q, "text": "ada\n"}`, id))
	if field(res, "wrote") != "4 bytes" {
		t.Fatalf("got %q, want 4 bytes written", res)
	}
	res = dispatch(t, tb, "process_output", fmt.Sprintf(`{"process_id": %q, "wait_for": "hello"}`, id))
	if field(res, "matched") != "name? hello ada" {
		t.Fatalf("got %q, want the greeting", res)
	}
	res = dispatch(t, tb, "process_input", fmt.Sprintf(`{"process_id": %q, "text": "more\n", "close": true}`, id))
	if field(res, "stdin") != "closed" {
		t.Fatalf("got %q, want stdin closed", res)
	}
	res = dispatch(t, tb, "process_wait", fmt.Sprintf(`{"process_id": %q}`, id))
	if field(res, "state") != "exited with code 0" || output(res) != "name? hello ada\nmore\ndone\n" {
		t.Fatalf("got %q, want the whole dialogue and a clean exit", res)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := tb.Dispatch(ctx, "process_input", json.RawMessage(fmt.Sprintf(`{"process_id": %q, "text": "x"}`, id)), nil)
	if err == nil || !strings.Contains(err.Error(), "stdin is closed") {
		t.Errorf("write after exit: got %v, want stdin is closed", err)
	}
	res = dispatch(t, tb, "execute", `{"command": "sleep 3600", "run_in_background": true}`)
	_, err = tb.Dispatch(ctx, "process_input", json.RawMessage(fmt.Sprintf(`{"process_id": %q, "text": "x"}`, field(res, "process_id"))), nil)
	if err == nil || !strings.Contains(err.Error(), "start it with execute and stdin") {
		t.Errorf("write without stdin: got %v, want how to get one", err)
	}
}

// TestWaitPort starts a server on a free port and waits until it listens.
func TestWaitPort(t *testing.T) {
	t.Parallel()
	tb := newToolbox(t)
	port := freePort(t)
	// The test binary is the server (see TestMain); the sleep makes the
	// wait start before it listens.
	res := dispatch(t, tb, "execute", fmt.Sprintf(`{"command": "sleep 0.2; %s=%d exec %s", "run_in_background": true}`, listenEnv, port, os.Args[0]))
	id := field(res, "process_id")
	res = dispatch(t, tb, "process_wait", fmt.Sprintf(`{"process_id": %q, "port": %d}`, id, port))
	if want := fmt.Sprintf("tcp 127.0.0.1 port %d", port); !strings.HasPrefix(field(res, "listening"), want) {
		t.Fatalf("got %q, want listening on %s", res, want)
	}
	res = dispatch(t, tb, "process_signal", fmt.Sprintf(`{"process_id": %q, "signal": "terminate"}`, id))
	if st := field(res, "state"); st != "stopped by SIGTERM as asked (exit code 143)" {
		t.Errorf("signal: got %q, want stopped by SIGTERM", st)
	}
	res = dispatch(t, tb, "process_wait", fmt.Sprintf(`{"process_id": %q, "port": %d}`, id, port))
	if !strings.Contains(field(res, "note"), "exited before it listened") {
		t.Errorf("wait on an exited process: got %q, want a note", res)
	}
}

// TestWaitReportsProgress waits on a process that prints a line at a time:
// the progress reports carry its newest lines, grow, and stop at the result.
func TestWaitReportsProgress(t *testing.T) {
	t.Parallel()
	tb := newToolbox(t)
	res := dispatch(t, tb, "execute", `{"command": "for i in 1 2 3 4 5 6; do echo step $i; sleep 0.3; done; echo finished", "run_in_background": true}`)
	id := field(res, "process_id")

	var mu sync.Mutex
	var reports []string
	var last int64
	returned := false
	progress := func(written int64, newest string) {
		mu.Lock()
		defer mu.Unlock()
		if returned {
			t.Errorf("progress %q after the result", newest)
		}
		if written <= last {
			t.Errorf("progress went from %d to %d, want it to grow", last, written)
		}
		last = written
		reports = append(reports, newest)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := tb.Dispatch(ctx, "process_wait", json.RawMessage(fmt.Sprintf(`{"process_id": %q, "pattern": "finished"}`, id)), progress)
	mu.Lock()
	returned = true
	defer mu.Unlock()
	if err != nil || field(res, "matched") != "finished" {
		t.Fatalf("got %q, %v; want the match", res, err)
	}
	// How many reports a loaded machine lets through varies; what they
	// carry does not: the newest lines, in order.
	if len(reports) == 0 || !strings.HasPrefix(reports[0], "step ") {
		t.Fatalf("reports %q: want at least one, with the steps", reports)
	}
	for _, r := range reports {
		if n := strings.Count(r, "\n") + 1; n > 5 {
			t.Errorf("report %q has %d lines, want at most 5", r, n)
		}
	}
}

// freePort returns a TCP port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, p, _ := net.SplitHostPort(l.Addr().String())
	n, _ := strconv.Atoi(p)
	return n
}
