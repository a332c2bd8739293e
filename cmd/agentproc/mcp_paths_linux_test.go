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

// TestMCPLinkWorkDirRefused is row 1 of issue 37 as the review ran it:
// under agentproc mcp's default workspace sandbox, one execute makes
// ws/link pointing outside, and a second asks for workdir ws/link; the
// second is refused and nothing is written outside.
func TestMCPLinkWorkDirRefused(t *testing.T) {
	if f := agentproc.SandboxSupport(); !f.Supported {
		t.Skipf("no sandbox here: %s", f)
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ws, outside := t.TempDir(), t.TempDir()
	c := newGoClient(t, ctx, agentprocCmd("mcp", "--workdir", ws, "--grace", "2s"))
	defer c.close()
	res, err := c.call(ctx, "execute", map[string]any{"command": "ln -s " + shq(outside) + " link"}, false)
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
	if _, err := os.Stat(filepath.Join(outside, "f")); err == nil {
		t.Errorf("the command wrote through the link, outside the workspace")
	}
}
