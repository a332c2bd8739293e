//go:build unix

package main

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMCPRedactsSecrets is issue 39's MCP surface, through the Go SDK's
// client: a secret-looking variable of the server's own environment is
// redacted by default in every result a model reads (a foreground
// execute, its progress notifications, a background process's output and
// a wait's), raw and base64, though the command read it from a file (the
// sandbox keeps the variable out of the command's environment).
func TestMCPRedactsSecrets(t *testing.T) {
	t.Parallel()
	const name, secret = "AGENTPROC_MCP_TEST_API_TOKEN", "mcp-s3cret-value-4711-abcdefgh"
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "secret.txt"), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := agentprocCmd("mcp", "--workdir", dir)
	cmd.Env = append(cmd.Env, name+"="+secret)
	c := newGoClient(t, ctx, cmd)
	defer c.close()

	b64 := base64.StdEncoding.EncodeToString([]byte(secret))
	redacted := "[redacted:" + name + "]"
	check := func(what, text string) {
		t.Helper()
		if strings.Contains(text, secret) || strings.Contains(text, b64) {
			t.Errorf("%s: got %q, want the secret redacted", what, text)
		}
	}
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

	// The foreground result and its progress notifications.
	res := call("execute", map[string]any{"command": "cat secret.txt; printf '%s' \"$(cat secret.txt)\" | base64; sleep 1; echo end"}, true)
	check("execute", res.text)
	if !strings.Contains(output(res.text), redacted+"\n") || strings.Count(res.text, redacted) < 2 {
		t.Errorf("execute: got %q, want the value and its base64 each read %s", res.text, redacted)
	}
	sawRedacted := false
	for _, p := range res.progress {
		check("execute's progress", p)
		sawRedacted = sawRedacted || strings.Contains(p, redacted)
	}
	if !sawRedacted {
		t.Errorf("execute's progress: got %q, want a notification with the newest line, %s", res.progress, redacted)
	}

	// A background process read by process_output and process_wait.
	res = call("execute", map[string]any{"command": "cat secret.txt; echo ready", "run_in_background": true}, false)
	id := field(res.text, "process_id")
	res = call("process_output", map[string]any{"process_id": id, "wait_for": "ready"}, false)
	check("process_output", res.text)
	if !strings.Contains(res.text, redacted) {
		t.Errorf("process_output: got %q, want %s", res.text, redacted)
	}
	res = call("process_wait", map[string]any{"process_id": id}, false)
	check("process_wait", res.text)
}
