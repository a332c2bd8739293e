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

// TestMCPSandboxFallsBack: a work dir the workspace sandbox cannot confine
// (it holds a credential directory the policy hides) leaves the default
// server working, unconfined, with a warning; asked for explicitly, the
// sandbox is an error.
func TestMCPSandboxFallsBack(t *testing.T) {
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
	cmd := agentprocCmd("mcp", "--workdir", home)
	cmd.Env = append(cmd.Env, "HOME="+home)
	var warning bytes.Buffer
	cmd.Stderr = &warning
	c := newGoClient(t, ctx, cmd)
	res, err := c.call(ctx, "execute", map[string]any{"command": "echo works"}, false)
	if err != nil || res.isError || !strings.Contains(res.text, "works") {
		t.Errorf("default sandbox in a home dir: got %+v, %v; want the command run", res, err)
	}
	c.close()
	if !strings.Contains(warning.String(), "warning: the workspace sandbox cannot confine commands in "+home) {
		t.Errorf("default sandbox in a home dir: stderr %q, want a warning that says why", warning.String())
	}

	var stderr bytes.Buffer
	explicit := agentprocCmd("mcp", "--workdir", home, "--sandbox", "workspace")
	explicit.Env = append(explicit.Env, "HOME="+home)
	explicit.Stderr = &stderr
	explicit.Stdin = strings.NewReader("")
	if err := explicit.Run(); err == nil || !strings.Contains(stderr.String(), "the workspace sandbox cannot confine commands in") {
		t.Errorf("--sandbox=workspace in a home dir: %v, stderr %q; want an error that says why", err, stderr.String())
	}
}
