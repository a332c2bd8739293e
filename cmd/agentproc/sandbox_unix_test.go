//go:build unix

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// TestMCPSandboxDefault: where the host supports the sandbox, agentproc mcp
// confines commands to the work dir by default and tells the model so;
// --sandbox=none does not.
func TestMCPSandboxDefault(t *testing.T) {
	t.Parallel()
	if !agentproc.SandboxSupport().Supported {
		t.Skipf("the sandbox is not supported here: %s", agentproc.SandboxSupport())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, tt := range []struct {
		args     []string
		confined bool
	}{
		{nil, true},
		{[]string{"--sandbox", "none"}, false},
	} {
		dir, outside := t.TempDir(), t.TempDir()
		c := newGoClient(t, ctx, agentprocCmd(append([]string{"mcp", "--workdir", dir}, tt.args...)...))
		tools, err := c.tools(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(tools[0].Description, "Commands run in a sandbox"); tools[0].Name != "execute" || got != tt.confined {
			t.Errorf("%v: execute's description mentions the sandbox: %v, want %v", tt.args, got, tt.confined)
		}
		res, err := c.call(ctx, "execute", map[string]any{"command": "echo in > inside && echo out > " + filepath.Join(outside, "f")}, false)
		if err != nil {
			t.Fatal(err)
		}
		_, errOutside := os.Stat(filepath.Join(outside, "f"))
		if _, err := os.Stat(filepath.Join(dir, "inside")); err != nil {
			t.Errorf("%v: the work dir was not writable: %v (%q)", tt.args, err, res.text)
		}
		if confined := errOutside != nil; confined != tt.confined {
			t.Errorf("%v: write outside the work dir refused: %v, want %v (%q)", tt.args, confined, tt.confined, res.text)
		}
		if err := c.close(); err != nil {
			t.Error(err)
		}
	}
}

// TestMCPSandboxRefusedAtStartup: a work dir the workspace sandbox cannot
// confine (it holds a credential directory the policy hides) is a startup
// error, exit 2 with why, whether the sandbox is the default or chosen: an
// MCP client hides stderr, so a warning there let commands run unconfined
// unseen. --sandbox=none runs them, as chosen.
func TestMCPSandboxRefusedAtStartup(t *testing.T) {
	t.Parallel()
	if !agentproc.SandboxSupport().Supported {
		t.Skipf("the sandbox is not supported here: %s", agentproc.SandboxSupport())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	home := t.TempDir()
	if err := os.Mkdir(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{nil, {"--sandbox", "workspace"}} {
		var stderr bytes.Buffer
		cmd := agentprocCmd(append([]string{"mcp", "--workdir", home}, args...)...)
		cmd.Env = append(cmd.Env, "HOME="+home)
		cmd.Stderr = &stderr
		cmd.Stdin = strings.NewReader("")
		err := cmd.Run()
		if code := cmd.ProcessState.ExitCode(); code != exitUsage || !strings.Contains(stderr.String(), "the workspace sandbox cannot confine commands in "+home) {
			t.Errorf("mcp %v in a home dir: got exit %d (%v), stderr %q; want exit 2 and why", args, code, err, stderr.String())
		}
	}

	cmd := agentprocCmd("mcp", "--workdir", home, "--sandbox", "none")
	cmd.Env = append(cmd.Env, "HOME="+home)
	c := newGoClient(t, ctx, cmd)
	res, err := c.call(ctx, "execute", map[string]any{"command": "echo works"}, false)
	if err != nil || res.isError || !strings.Contains(res.text, "works") {
		t.Errorf("--sandbox=none in a home dir: got %+v, %v; want the command run", res, err)
	}
	c.close()
}
