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

// Rows of issue 37's sandbox review, run against the command: each attack
// aims at a file outside every sandbox, and passes when that file is not
// written.

// sandboxAttack skips where no sandbox can be made, and returns the test's
// context and the directory outside every sandbox that the attack aims at.
func sandboxAttack(t *testing.T) (ctx context.Context, outside string) {
	t.Helper()
	if f := agentproc.SandboxSupport(); !f.Supported {
		t.Skipf("no sandbox here: %s", f)
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx, t.TempDir()
}

// written reports whether the attack wrote path, removing it so that the
// next attempt starts clean.
func written(path string) bool {
	_, err := os.Stat(path)
	_ = os.Remove(path)
	return err == nil
}

// TestMCPLinkWorkDirRefused is row 1: under agentproc mcp's default
// workspace sandbox, one execute makes ws/link pointing outside, and a
// second asks for workdir ws/link; the second is refused and nothing is
// written outside.
func TestMCPLinkWorkDirRefused(t *testing.T) {
	ctx, outside := sandboxAttack(t)
	ws := t.TempDir()
	c := newGoClient(t, ctx, agentprocCmd("mcp", "--workdir", ws, "--grace", "2s"))
	defer c.close()
	res, err := c.call(ctx, "execute", map[string]any{"command": "ln -s " + shellQuote(outside) + " link"}, false)
	if err != nil || res.isError {
		t.Fatalf("execute ln -s: %+v, %v", res, err)
	}
	if fi, err := os.Lstat(filepath.Join(ws, "link")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the first call made no link: %v", err)
	}
	res, err = c.call(ctx, "execute", map[string]any{"command": "echo x > f", "workdir": filepath.Join(ws, "link")}, false)
	if err != nil || !res.isError || !strings.Contains(res.text, "outside the sandbox") {
		t.Errorf("execute in ws/link: %+v, %v; want an error saying it is outside the sandbox", res, err)
	}
	if written(filepath.Join(outside, "f")) {
		t.Errorf("the command wrote through the link, outside the workspace")
	}
}

// TestServeRefusesSandboxedPeer is row 6: a sandboxed tree that reaches
// serve's Unix socket (same user) and asks it to run a command gets 403
// and nothing runs, also when it execs the client with an environment of
// its own (no marker); the same request from an unsandboxed tree runs,
// the control.
func TestServeRefusesSandboxedPeer(t *testing.T) {
	ctx, outside := sandboxAttack(t)
	dir, ws := t.TempDir(), t.TempDir()
	_, env := serveInDir(t, ctx, dir, "--grace", "2s")
	m := agentproc.New()
	defer m.Close()
	target := filepath.Join(outside, "f")
	client := runMainEnv + "=1 " + shellQuote(env[0]) + " " + shellQuote(os.Args[0]) + " run -- " + shellQuote("echo x > "+shellQuote(target))
	attack := treeRunner(t, ctx, m, ws)
	if out := attack(client, nil); out.Info.ExitCode == nil || *out.Info.ExitCode != 0 {
		t.Fatalf("control: an unsandboxed tree's request: %s %q, want it run", out.Info.Reason, out.Text)
	}
	if !written(target) {
		t.Fatalf("control: got nothing written, want the unsandboxed tree's request to have written outside")
	}
	for name, command := range map[string]string{"as it is": client, "with env -i (no marker)": "env -i " + client} {
		out := attack(command, agentproc.WorkspaceSandbox(ws))
		t.Logf("%s: %s: %q", name, out.Info.Reason, out.Text)
		if !strings.Contains(out.Text, "sandboxed process") {
			t.Errorf("%s: output %q, want serve's refusal", name, out.Text)
		}
		if written(target) {
			t.Errorf("%s: serve ran the sandboxed tree's command, want it refused", name)
		}
	}
}

// treeRunner returns a function that runs command in a tree of m in ws
// (sandboxed by sb, or not when nil), waits for its end and returns its
// output; it fails t if the tree cannot start or its end is not seen
// before ctx ends.
func treeRunner(t *testing.T, ctx context.Context, m *agentproc.Manager, ws string) func(command string, sb *agentproc.Sandbox) agentproc.Output {
	return func(command string, sb *agentproc.Sandbox) agentproc.Output {
		t.Helper()
		p, err := m.Start(ctx, agentproc.Request{Command: command, WorkDir: ws, Sandbox: sb})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		return p.Output()
	}
}
