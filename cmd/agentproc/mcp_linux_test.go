package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMCPWaitsEndAtPrompt: through the Go SDK's client, every wait on a
// process that sits at a prompt ends as soon as the prompt is seen (well
// before the 30 s of process_output's wait and process_wait's timeout),
// with the prompt in the output, and a pattern matches the unfinished
// prompt line.
func TestMCPWaitsEndAtPrompt(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := t.TempDir()
	c := newGoClient(t, ctx, agentprocCmd("mcp", "--workdir", dir, "--grace", "2s", "--sandbox", "none"))
	defer c.close()
	res, err := c.call(ctx, "execute", map[string]any{"command": `printf 'Continue? [y/N] '; read a; echo "got $a"`, "stdin": true}, false)
	if err != nil || res.isError {
		t.Fatalf("execute: %+v, %v", res, err)
	}
	id := field(res.text, "process_id")
	// Each wait must end well inside its own timeout (30 s and 20 s); 10 s
	// leaves room for a loaded machine while the quiet period is 0.3 s.
	const within = 10 * time.Second
	for _, tt := range []struct {
		tool        string
		args        map[string]any
		wantMatched string
	}{
		{"process_wait", map[string]any{"timeout": 20}, ""},
		{"process_wait", map[string]any{"pattern": `\[y/N\]`, "timeout": 20}, "Continue? [y/N] "},
		{"process_wait", map[string]any{"pattern": "never printed", "timeout": 20}, ""},
		{"process_wait", map[string]any{"port": 0, "timeout": 20}, ""},
		{"process_output", map[string]any{"wait": true}, ""},
		{"process_output", map[string]any{"wait_for": "Continue"}, "Continue? [y/N] "},
	} {
		args := map[string]any{"process_id": id}
		for k, v := range tt.args {
			args[k] = v
		}
		start := time.Now()
		res, err := c.call(ctx, tt.tool, args, true)
		took := time.Since(start)
		if err != nil || res.isError {
			t.Fatalf("%s %v: %+v, %v", tt.tool, tt.args, res, err)
		}
		if took > within {
			t.Errorf("%s %v: took %v, want under %v (the process waits for input)", tt.tool, tt.args, took, within)
		}
		if !strings.Contains(field(res.text, "state"), "waiting for input") || !strings.HasPrefix(output(res.text), "Continue? [y/N] ") {
			t.Errorf("%s %v: got %q, want the prompt and the waiting state", tt.tool, tt.args, res.text)
		}
		if got := field(res.text, "matched"); got != strings.TrimSpace(tt.wantMatched) && got != tt.wantMatched {
			t.Errorf("%s %v: got matched %q, want %q", tt.tool, tt.args, got, tt.wantMatched)
		}
		if tt.wantMatched == "" && !strings.Contains(field(res.text, "note"), "waiting for input") {
			t.Errorf("%s %v: got note %q, want it to say the process waits for input", tt.tool, tt.args, field(res.text, "note"))
		}
	}
	if _, err := c.call(ctx, "process_input", map[string]any{"process_id": id, "text": "y\n"}, false); err != nil {
		t.Fatal(err)
	}
	res, err = c.call(ctx, "process_wait", map[string]any{"process_id": id, "timeout": 20}, false)
	if err != nil || field(res.text, "state") != "exited with code 0" || !strings.Contains(output(res.text), "got y") {
		t.Errorf("after the answer: got %+v, %v; want the exit and the answer", res, err)
	}
}

// TestMCPSharedStateDir: sessions given the same --state-dir (the help's
// one fixed directory) each get tools, in a directory of their own under
// it; what one killed with SIGKILL left is gone and its directory removed
// once the next session starts, while a live session's process runs on;
// a session that ends removes its directory.
func TestMCPSharedStateDir(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := t.TempDir()
	state := filepath.Join(t.TempDir(), "state")
	start := func() (*goClient, *exec.Cmd) {
		cmd := agentprocCmd("mcp", "--workdir", dir, "--state-dir", state, "--sandbox", "none", "--grace", "2s")
		return newGoClient(t, ctx, cmd), cmd
	}
	sleeper := func(c *goClient, name string) string {
		t.Helper()
		pidFile := filepath.Join(dir, name+".pid")
		res, err := c.call(ctx, "execute", map[string]any{"command": "echo $$ > " + pidFile + "; exec sleep 3600", "run_in_background": true}, false)
		if err != nil || res.isError {
			t.Fatalf("%s: execute: got %+v, %v; want it started", name, res, err)
		}
		waitFile(t, ctx, pidFile)
		return pidFile
	}
	live, _ := start()
	livePID := sleeper(live, "live")
	doomed, doomedCmd := start()
	orphanPID := sleeper(doomed, "orphan")
	if err := doomedCmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = doomed.close()
	// The killed session's host guard may already have killed its tree
	// (the library's guarantee); either way it must be gone, and its
	// directory too, once the next session has started.
	third, _ := start()
	if pid := readPID(t, orphanPID); alive(pid) {
		t.Errorf("process %d, orphaned by a killed session, still runs after the next session started", pid)
	}
	if pid := readPID(t, livePID); !alive(pid) {
		t.Errorf("process %d of a live session was stopped by a new session on the same --state-dir", pid)
	}
	sessions := func() int {
		entries, _ := os.ReadDir(state)
		return len(entries)
	}
	if got := sessions(); got != 2 {
		t.Errorf("state dir: got %d session dirs, want 2 (the live ones)", got)
	}
	_ = third.close()
	_ = live.close()
	requireGone(t, ctx, livePID)
	if got := sessions(); got != 0 {
		t.Errorf("state dir after the sessions ended: got %d session dirs, want 0", got)
	}
}
