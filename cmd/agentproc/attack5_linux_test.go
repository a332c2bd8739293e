package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestMCPStateDirOfOtherSessions (fifth attack review): sessions share a
// --state-dir, each in a dir of its own under it, and the Manager hid only
// its own session's dir: a command of one session's workspace sandbox
// read the records of every other live session of the user, among them
// the command lines of everything they ran, sandboxed or not (an
// operator's unsandboxed session: a password typed on a command line,
// a token in a curl header). The command now hides the whole --state-dir.
// The control: the other session's record holds the command, and an
// unsandboxed session reads it.
func TestMCPStateDirOfOtherSessions(t *testing.T) {
	ctx, _ := sandboxAttack(t)
	ws := t.TempDir()
	state := filepath.Join(t.TempDir(), "state")
	const secret = "OTHER-SESSION-cmdline-5e1"
	other := newGoClient(t, ctx, agentprocCmd("mcp", "--workdir", ws, "--state-dir", state, "--sandbox", "none", "--grace", "2s"))
	defer other.close()
	res, err := other.call(ctx, "execute", map[string]any{"command": "echo " + secret + " >/dev/null; exec sleep 3600", "run_in_background": true}, false)
	if err != nil || res.isError {
		t.Fatalf("the other session's execute: %+v, %v", res, err)
	}
	look := "grep -r -h -o -a " + secret + " " + shellQuote(state) + " 2>/dev/null | head -1"
	control := newGoClient(t, ctx, agentprocCmd("mcp", "--workdir", ws, "--state-dir", state, "--sandbox", "none", "--grace", "2s"))
	defer control.close()
	res, err = control.call(ctx, "execute", map[string]any{"command": look}, false)
	if err != nil || !strings.Contains(output(res.text), secret) {
		t.Fatalf("control: an unsandboxed session's grep: %+v, %v; want the other session's command line", res, err)
	}
	c := newGoClient(t, ctx, agentprocCmd("mcp", "--workdir", ws, "--state-dir", state, "--grace", "2s"))
	defer c.close()
	res, err = c.call(ctx, "execute", map[string]any{"command": look}, false)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(output(res.text), secret) {
		t.Errorf("a sandboxed session read another session's record: %q; want the state dir hidden", res.text)
	}
}
