package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// Tests of the ninth attack review (unprivileged and the surfaces):
// docs/sandbox-threats.md, "Ninth attack review (unprivileged and the
// surfaces)".

// TestAttackMCPReadsAgentSecrets drives the README's first example end to
// end: an agent runs `agentproc mcp` (workspace sandbox by default) and its
// model's command reads the agent's own ~/.claude.json, where `claude mcp
// add -e` keeps other MCP servers' tokens, and a key that ~/.ssh only links
// to (~/.ssh/id_ed25519 -> ../dotfiles/ssh/id_ed25519, as GNU stow makes
// it). Both reached the model's tool result before the fixes in the
// library (TestAttackAgentConfigSecrets, TestAttackHiddenDirLinksOut). The
// control: the same session with --sandbox none reads both.
func TestAttackMCPReadsAgentSecrets(t *testing.T) {
	if f := agentproc.SandboxSupport(); !f.Supported {
		t.Skipf("the sandbox is not supported here: %s", f)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	home := t.TempDir()
	ws := filepath.Join(home, "project")
	for _, d := range []string{ws, filepath.Join(home, ".ssh"), filepath.Join(home, "dotfiles", "ssh")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		filepath.Join(home, ".claude.json"):                  `{"mcpServers":{"github":{"env":{"GITHUB_PERSONAL_ACCESS_TOKEN":"MCPCFG-TOKEN"}}}}`,
		filepath.Join(home, "dotfiles", "ssh", "id_ed25519"): "MCPCFG-KEY",
	}
	for p, s := range files {
		if err := os.WriteFile(p, []byte(s+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../dotfiles/ssh/id_ed25519", filepath.Join(home, ".ssh", "id_ed25519")); err != nil {
		t.Fatal(err)
	}
	read := func(sandbox string) string {
		t.Helper()
		cmd := agentprocCmd("mcp", "--workdir", ws, "--sandbox", sandbox, "--grace", "2s")
		cmd.Env = append(cmd.Env, "HOME="+home)
		c := newGoClient(t, ctx, cmd)
		defer c.close()
		res, err := c.call(ctx, "execute", map[string]any{"command": "cat ~/.claude.json ~/.ssh/id_ed25519 ~/dotfiles/ssh/id_ed25519; true"}, false)
		if err != nil || res.isError {
			t.Fatalf("--sandbox %s: execute: got %+v, %v; want a result", sandbox, res, err)
		}
		return res.text
	}
	if got := read("none"); !strings.Contains(got, "MCPCFG-TOKEN") || strings.Count(got, "MCPCFG-KEY") != 2 {
		t.Fatalf("control, --sandbox none: got %q, want the token once and the key twice", got)
	}
	if got := read("workspace"); strings.Contains(got, "MCPCFG-") {
		t.Errorf("--sandbox workspace: got %q, want neither the token nor the key", got)
	}
}
