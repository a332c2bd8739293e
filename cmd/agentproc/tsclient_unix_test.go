//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tsClient is the official TypeScript SDK (@modelcontextprotocol/sdk from
// npm) behind testdata/tsclient/driver.mjs, which node runs: the test sends
// it one request per line and reads one JSON answer per line.
type tsClient struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

// tsAnswer is one line the driver writes.
type tsAnswer struct {
	Ready    bool        `json:"ready"`
	Tools    []*mcp.Tool `json:"tools"`
	Text     string      `json:"text"`
	IsError  bool        `json:"isError"`
	Progress []string    `json:"progress"`
	Closed   bool        `json:"closed"`
	Error    string      `json:"error"`
}

// newTSClient installs the SDK at the version package-lock.json pins into a
// temporary directory with npm ci, then starts the driver on agentproc mcp.
func newTSClient(t *testing.T, ctx context.Context, mcpArgs ...string) *tsClient {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed (.ci/install-test-deps.sh installs it in CI)")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not installed (.ci/install-test-deps.sh installs it in CI)")
	}
	dir := t.TempDir()
	for _, name := range []string{"package.json", "package-lock.json", "driver.mjs"} {
		b, err := os.ReadFile(filepath.Join("testdata", "tsclient", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	install := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error")
	install.Dir = dir
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}

	args := append([]string{filepath.Join(dir, "driver.mjs"), os.Args[0]}, mcpArgs...)
	cmd := exec.Command(node, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &tsClient{cmd: cmd, in: in, out: bufio.NewScanner(stdout)}
	c.out.Buffer(nil, 16<<20)
	t.Cleanup(func() {
		in.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	a, err := c.next()
	if err != nil || !a.Ready {
		t.Fatalf("driver did not connect: %+v, %v", a, err)
	}
	return c
}

// next reads the driver's next answer. The driver answers every request,
// and the test's deadline kills it otherwise.
func (c *tsClient) next() (tsAnswer, error) {
	if !c.out.Scan() {
		if err := c.out.Err(); err != nil {
			return tsAnswer{}, err
		}
		return tsAnswer{}, io.ErrUnexpectedEOF
	}
	var a tsAnswer
	if err := json.Unmarshal(c.out.Bytes(), &a); err != nil {
		return tsAnswer{}, fmt.Errorf("driver wrote %q: %w", c.out.Bytes(), err)
	}
	if a.Error != "" {
		return a, fmt.Errorf("TypeScript SDK: %s", a.Error)
	}
	return a, nil
}

func (c *tsClient) send(req map[string]any) (tsAnswer, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return tsAnswer{}, err
	}
	if _, err := c.in.Write(append(b, '\n')); err != nil {
		return tsAnswer{}, err
	}
	return c.next()
}

func (c *tsClient) tools(context.Context) ([]*mcp.Tool, error) {
	a, err := c.send(map[string]any{"op": "list"})
	return a.Tools, err
}

func (c *tsClient) call(_ context.Context, tool string, args map[string]any, progress bool) (toolResult, error) {
	a, err := c.send(map[string]any{"op": "call", "tool": tool, "args": args, "progress": progress})
	return toolResult{text: a.Text, isError: a.IsError, progress: a.Progress}, err
}

func (c *tsClient) close() error {
	a, err := c.send(map[string]any{"op": "close"})
	if err == nil && !a.Closed {
		err = fmt.Errorf("driver answered %+v to close", a)
	}
	return err
}

// TestTypeScriptSDKSession drives agentproc mcp through the session of
// TestGoSDKSession with the TypeScript SDK, as an agent built on it would.
func TestTypeScriptSDKSession(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	c := newTSClient(t, ctx, "mcp", "--workdir", dir, "--grace", "2s")
	pidFile := runSession(t, ctx, c, dir)

	// A silent command longer than the client's timeout: the heartbeat's
	// progress resets it (resetTimeoutOnProgress), so the call completes.
	a, err := c.send(map[string]any{"op": "call", "tool": "execute", "args": map[string]any{"command": "sleep 8; echo done"},
		"progress": true, "timeout": (heartbeatInterval + 1500*time.Millisecond).Milliseconds()})
	if err != nil || field(a.Text, "state") != "exited with code 0" || len(a.Progress) == 0 {
		t.Errorf("a quiet 8 s command with a 6.5 s client timeout: got %+v, %v; want it to complete with heartbeats", a, err)
	}
	if err := c.close(); err != nil {
		t.Errorf("close: %v", err)
	}
	requireGone(t, ctx, pidFile)
}
