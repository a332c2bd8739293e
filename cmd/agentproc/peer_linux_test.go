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

// TestServeRefusesSandboxedPeer is row 6 of issue 37: a sandboxed tree
// that reaches serve's Unix socket (same user) and asks it to run a
// command gets 403 and nothing runs, also when it execs the client with
// an environment of its own (no marker); the same request from an
// unsandboxed tree runs, the control.
func TestServeRefusesSandboxedPeer(t *testing.T) {
	if f := agentproc.SandboxSupport(); !f.Supported {
		t.Skipf("no sandbox here: %s", f)
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir, ws, outside := t.TempDir(), t.TempDir(), t.TempDir()
	sock := filepath.Join(dir, "agentproc.sock")
	startServe(t, ctx, "--socket", sock, "--workdir", dir, "--grace", "2s")
	m := agentproc.New()
	defer m.Close()
	target := filepath.Join(outside, "f")
	client := runMainEnv + "=1 " + socketEnv + "=" + shq(sock) + " " + shq(os.Args[0]) + " run -- " + shq("echo x > "+shq(target))
	attack := func(command string, sb *agentproc.Sandbox) agentproc.Output {
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
	if out := attack(client, nil); out.Info.ExitCode == nil || *out.Info.ExitCode != 0 {
		t.Fatalf("control: an unsandboxed tree's request: %s %q, want it run", out.Info.Reason, out.Text)
	}
	if err := os.Remove(target); err != nil {
		t.Fatalf("control: got %v, want the unsandboxed tree's request to have written outside", err)
	}
	for name, command := range map[string]string{"as it is": client, "with env -i (no marker)": "env -i " + client} {
		out := attack(command, agentproc.WorkspaceSandbox(ws))
		t.Logf("%s: %s: %q", name, out.Info.Reason, out.Text)
		if !strings.Contains(out.Text, "sandboxed process") {
			t.Errorf("%s: output %q, want serve's refusal", name, out.Text)
		}
		if _, err := os.Stat(target); err == nil {
			t.Errorf("%s: serve ran the sandboxed tree's command, want it refused", name)
			_ = os.Remove(target)
		}
	}
}

// shq quotes s for sh.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
