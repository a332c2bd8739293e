package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The parts of the MCP tests every OS shares: the Go SDK's client over
// stdio, the readers of a tool result, and the waits on a helper's PID
// file (alive is per OS).

// toolResult is what a client got from one tool call.
type toolResult struct {
	text     string
	isError  bool
	progress []string // the messages of the progress notifications
}

// mcpClient is one MCP client implementation under test.
type mcpClient interface {
	tools(ctx context.Context) ([]*mcp.Tool, error)
	call(ctx context.Context, tool string, args map[string]any, progress bool) (toolResult, error)
	close() error
}

// agentprocCmd returns the command that runs agentproc with args: the test
// binary, made agentproc by runMainEnv.
func agentprocCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	return cmd
}

// goClient is the Go SDK's client.
type goClient struct {
	session *mcp.ClientSession
	mu      sync.Mutex
	notes   map[string][]string // progress messages by token
}

func newGoClient(t testing.TB, ctx context.Context, cmd *exec.Cmd) *goClient {
	t.Helper()
	gc := &goClient{notes: map[string][]string{}}
	client := mcp.NewClient(&mcp.Implementation{Name: "agentproc-go-test", Version: "1.0.0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			gc.mu.Lock()
			defer gc.mu.Unlock()
			tok := fmt.Sprint(req.Params.ProgressToken)
			gc.notes[tok] = append(gc.notes[tok], req.Params.Message)
		},
	})
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	gc.session = session
	return gc
}

func (gc *goClient) tools(ctx context.Context) ([]*mcp.Tool, error) {
	res, err := gc.session.ListTools(ctx, nil)
	if err != nil {
		return nil, err
	}
	return res.Tools, nil
}

var progressTokens struct {
	sync.Mutex
	n int
}

func (gc *goClient) call(ctx context.Context, tool string, args map[string]any, progress bool) (toolResult, error) {
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	var token string
	if progress {
		progressTokens.Lock()
		progressTokens.n++
		token = fmt.Sprintf("go-%d", progressTokens.n)
		progressTokens.Unlock()
		params.SetProgressToken(token)
	}
	res, err := gc.session.CallTool(ctx, params)
	if err != nil {
		return toolResult{}, err
	}
	var sb strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			sb.WriteString(tc.Text)
		}
	}
	gc.mu.Lock()
	defer gc.mu.Unlock()
	return toolResult{text: sb.String(), isError: res.IsError, progress: gc.notes[token]}, nil
}

func (gc *goClient) close() error { return gc.session.Close() }

// field returns the value of the first "name: value" line of a result.
func field(res, name string) string {
	for line := range strings.Lines(res) {
		if v, ok := strings.CutPrefix(line, name+": "); ok {
			return strings.TrimSuffix(v, "\n")
		}
	}
	return ""
}

// output returns what follows a result's "output...:" line.
func output(res string) string {
	_, after, ok := strings.Cut(res, "\noutput")
	if !ok {
		return ""
	}
	_, text, _ := strings.Cut(after, ":\n")
	return text
}

// waitFile waits until path exists and is not empty.
func waitFile(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	for ctx.Err() == nil {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 && b[len(b)-1] == '\n' {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("%s was never written", path)
}

// requireGone fails unless the process whose PID is in pidFile has ended
// (a zombie waiting for a reaper counts as ended) before ctx does.
func requireGone(t *testing.T, ctx context.Context, pidFile string) {
	t.Helper()
	pid := readPID(t, pidFile)
	for {
		if !alive(pid) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("process %d is still running after the client left", pid)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// readPID returns the PID a helper wrote to pidFile.
func readPID(t *testing.T, pidFile string) int {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", pidFile, err)
	}
	return pid
}

// checkTools fails unless c lists the six tools, each with an object
// schema and a description that teaches.
func checkTools(t *testing.T, ctx context.Context, c mcpClient) {
	t.Helper()
	tools, err := c.tools(ctx)
	if err != nil {
		t.Fatalf("list tools: %v", err)
	}
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
		b, _ := json.Marshal(tool.InputSchema)
		var schema struct {
			Type       string         `json:"type"`
			Properties map[string]any `json:"properties"`
		}
		if err := json.Unmarshal(b, &schema); err != nil || schema.Type != "object" || len(tool.Description) < 80 {
			t.Errorf("tool %s: schema %s, description %q; want an object schema and a description that teaches", tool.Name, b, tool.Description)
		}
	}
	slices.Sort(names)
	if want := []string{"execute", "process_input", "process_list", "process_output", "process_signal", "process_wait"}; !slices.Equal(names, want) {
		t.Fatalf("tools: got %v, want %v", names, want)
	}
}

// shellCommands are the commands of runSession in one OS's shell.
type shellCommands struct {
	server      func(port int) string // this binary as listenEnv's server
	dial        func(port int) string // dialEnv's client, then "to stderr" on stderr
	prompt      string                // prints "name? ", reads a line, greets it
	answer      string                // the line process_input sends
	ticker      string                // prints tick 1 ... lastTick, a while apart
	lastTick    string
	leftRunning func(pidFile string) string // writes its PID to pidFile, runs on
	// stop is the signal that stops the server, stoppedState how the
	// state process_signal then reports starts.
	stop, stoppedState string
	portWait           bool // whether process_wait can wait for the server's port
	// sleep is a command that runs quietly for about n seconds.
	sleep func(n int) string
}

// runSession drives the session the issue lists through c: list the tools,
// start a server in the background and wait for its port, run a foreground
// command, read the server's output by offset, answer a prompt on stdin,
// watch progress, stop, list. It leaves one process running and returns
// the file its PID is written to, for the caller to check it is gone
// after the client leaves.
func runSession(t *testing.T, ctx context.Context, c mcpClient, dir string) (pidFile string) {
	sh := sessionShell
	t.Helper()
	call := func(tool string, args map[string]any, progress bool) toolResult {
		t.Helper()
		res, err := c.call(ctx, tool, args, progress)
		if err != nil {
			t.Fatalf("%s %v: %v", tool, args, err)
		}
		if res.isError {
			t.Fatalf("%s %v: tool error %q", tool, args, res.text)
		}
		return res
	}

	checkTools(t, ctx, c)

	// A server in the background, and a wait for its port.
	port := freePort(t)
	res := call("execute", map[string]any{
		"command":           sh.server(port),
		"run_in_background": true,
	}, false)
	server := field(res.text, "process_id")
	if field(res.text, "state") != "running in the background" {
		t.Fatalf("execute in the background: got %q", res.text)
	}
	if sh.portWait {
		res = call("process_wait", map[string]any{"process_id": server, "port": port}, true)
		if want := fmt.Sprintf("tcp 127.0.0.1 port %d", port); !strings.HasPrefix(field(res.text, "listening"), want) {
			t.Fatalf("process_wait port: got %q, want %s", res.text, want)
		}
	}
	res = call("process_output", map[string]any{"process_id": server, "wait_for": "listening on"}, false)
	next, err := strconv.Atoi(field(res.text, "next"))
	if err != nil || !strings.HasPrefix(output(res.text), "listening on 127.0.0.1:") {
		t.Fatalf("process_output: got %q, want the server's first line and next", res.text)
	}

	// A foreground command that talks to it.
	res = call("execute", map[string]any{"command": sh.dial(port)}, true)
	if field(res.text, "state") != "exited with code 0" || output(res.text) != "dialed\nto stderr\n" {
		t.Fatalf("foreground execute: got %q, want dialed and stderr, exit 0", res.text)
	}

	// Only the server's new output, from next on.
	res = call("process_output", map[string]any{"process_id": server, "offset": next, "wait_for": "accepted"}, false)
	if output(res.text) != "accepted\n" || field(res.text, "matched") != "accepted" {
		t.Fatalf("process_output from %d: got %q, want only the new line", next, res.text)
	}

	// A prompt answered on stdin.
	res = call("execute", map[string]any{"command": sh.prompt, "stdin": true}, false)
	prompt := field(res.text, "process_id")
	res = call("process_input", map[string]any{"process_id": prompt, "text": sh.answer}, false)
	if field(res.text, "wrote") != fmt.Sprintf("%d bytes", len(sh.answer)) {
		t.Fatalf("process_input: got %q", res.text)
	}
	res = call("process_wait", map[string]any{"process_id": prompt}, false)
	if field(res.text, "state") != "exited with code 0" || output(res.text) != "name? hello ada\n" {
		t.Fatalf("after the answer: got %q, want the greeting and exit 0", res.text)
	}

	// A long wait reports progress with the newest lines.
	res = call("execute", map[string]any{"command": sh.ticker, "run_in_background": true}, false)
	ticker := field(res.text, "process_id")
	res = call("process_wait", map[string]any{"process_id": ticker, "pattern": sh.lastTick}, true)
	if field(res.text, "matched") != sh.lastTick || len(res.progress) == 0 || !strings.HasPrefix(res.progress[0], "tick ") {
		t.Fatalf("process_wait with progress: got %q and progress %q, want the match and news of the ticks", res.text, res.progress)
	}

	// A tool error is a result the model reads, not a protocol error.
	if r, err := c.call(ctx, "process_output", map[string]any{"process_id": "no-such-process"}, false); err != nil || !r.isError || !strings.Contains(r.text, "no process") {
		t.Errorf("unknown process: got %+v, %v; want a tool error", r, err)
	}

	// Stop the server, then list.
	res = call("process_signal", map[string]any{"process_id": server, "signal": sh.stop}, false)
	if st := field(res.text, "state"); !strings.HasPrefix(st, sh.stoppedState) {
		t.Fatalf("process_signal %s: got %q, want state %q", sh.stop, res.text, sh.stoppedState)
	}
	pidFile = filepath.Join(dir, "left-running.pid")
	res = call("execute", map[string]any{"command": sh.leftRunning(pidFile), "run_in_background": true}, false)
	left := field(res.text, "process_id")
	res = call("process_list", map[string]any{}, false)
	for id, want := range map[string]string{
		left: "running in the background", server: sh.stoppedState,
		prompt: "exited with code 0", ticker: "exited with code 0",
	} {
		if !strings.Contains(res.text, "process_id: "+id+"\n") {
			t.Errorf("process_list: %s missing from %q", id, res.text)
		}
		if !strings.Contains(res.text, "state: "+want+"\n") {
			t.Errorf("process_list: no %q in %q", want, res.text)
		}
	}
	waitFile(t, ctx, pidFile)
	// So that the caller's requireGone cannot pass on a PID that was
	// never alive.
	if pid := readPID(t, pidFile); !alive(pid) {
		t.Fatalf("process %d, left running, is not alive before the client leaves", pid)
	}
	return pidFile
}

// TestGoSDKSession drives runSession with the Go SDK's client, in sh on
// Unix and in cmd.exe on Windows (sessionShell), and requires the process
// left running to be gone once the client has left.
func TestGoSDKSession(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := testDir(t)
	c := newGoClient(t, ctx, agentprocCmd("mcp", "--workdir", dir, "--grace", "2s"))
	pidFile := runSession(t, ctx, c, dir)
	if err := c.close(); err != nil {
		t.Errorf("close: %v", err)
	}
	requireGone(t, ctx, pidFile)
}

// TestMCPProgressHeartbeat: a call that waits on a silent command sends a
// progress notification at least every heartbeatInterval when the client
// asked for progress (a token), and none when it did not.
func TestMCPProgressHeartbeat(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := testDir(t)
	c := newGoClient(t, ctx, agentprocCmd("mcp", "--workdir", dir, "--sandbox", "none"))
	defer c.close()
	cmd := sessionShell.sleep(int(2*heartbeatInterval/time.Second) + 1)
	res, err := c.call(ctx, "execute", map[string]any{"command": cmd}, true)
	if err != nil || res.isError || len(res.progress) < 2 {
		t.Errorf("%s with a progress token: got %d notifications (%q), %v; want at least 2", cmd, len(res.progress), res.progress, err)
	}
	res, err = c.call(ctx, "execute", map[string]any{"command": sessionShell.sleep(6)}, false)
	if err != nil || res.isError || len(res.progress) != 0 {
		t.Errorf("without a token: got %d notifications, %v; want none", len(res.progress), err)
	}
}
