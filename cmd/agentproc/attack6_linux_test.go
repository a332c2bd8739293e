package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMCPRelativeStateDirHidden (sixth attack review): the fifth review
// hid the whole --state-dir in the workspace policy by appending the flag
// as given to Sandbox.Hide, which takes absolute paths only: `agentproc
// mcp --state-dir state` (a path relative to the working directory, which
// the Manager itself takes) refused to start with the workspace sandbox,
// naming `--sandbox=none` as the way to run the commands unconfined. The
// dir is now hidden by its absolute path. The control: an unsandboxed
// session given the same relative dir reads the other session's record.
func TestMCPRelativeStateDirHidden(t *testing.T) {
	ctx, _ := sandboxAttack(t)
	ws, base := t.TempDir(), t.TempDir()
	const secret = "OTHER-SESSION-cmdline-6a2"
	inBase := func(args ...string) *exec.Cmd {
		c := agentprocCmd(args...)
		c.Dir = base
		return c
	}
	other := newGoClient(t, ctx, inBase("mcp", "--workdir", ws, "--state-dir", "state", "--sandbox", "none", "--grace", "2s"))
	defer other.close()
	res, err := other.call(ctx, "execute", map[string]any{"command": "echo " + secret + " >/dev/null; exec sleep 3600", "run_in_background": true}, false)
	if err != nil || res.isError {
		t.Fatalf("the other session's execute: %+v, %v", res, err)
	}
	look := "grep -r -h -o -a " + secret + " " + shellQuote(filepath.Join(base, "state")) + " 2>/dev/null | head -1"
	control := newGoClient(t, ctx, inBase("mcp", "--workdir", ws, "--state-dir", "state", "--sandbox", "none", "--grace", "2s"))
	defer control.close()
	res, err = control.call(ctx, "execute", map[string]any{"command": look}, false)
	if err != nil || !strings.Contains(output(res.text), secret) {
		t.Fatalf("control: an unsandboxed session's grep: %+v, %v; want the other session's command line", res, err)
	}
	c := newGoClient(t, ctx, inBase("mcp", "--workdir", ws, "--state-dir", "state", "--grace", "2s"))
	defer c.close()
	res, err = c.call(ctx, "execute", map[string]any{"command": look}, false)
	if err != nil {
		t.Fatalf("a sandboxed session with a relative --state-dir: %v; want it to start and run the command", err)
	}
	if strings.Contains(output(res.text), secret) {
		t.Errorf("a sandboxed session read another session's record: %q; want the state dir hidden", res.text)
	}
}
