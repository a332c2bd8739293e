package llmtool_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/llmtool"
)

// TestSandboxLinkWorkDirRefused is row 1 of issue 37 through the tools
// (and so agentproc mcp): a workdir inside the sandbox's workspace that is
// a link to outside it, or has one in an intermediate component, is
// refused like one written outside, and nothing is written outside. The
// control runs the same call with no sandbox, which writes there.
func TestSandboxLinkWorkDirRefused(t *testing.T) {
	if f := agentproc.SandboxSupport(); !f.Supported {
		t.Skipf("no sandbox here: %s", f)
	}
	t.Parallel()
	ws, outside := t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(outside, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	m := agentproc.New()
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	call := func(tb *llmtool.Toolbox, dir string) (string, error) {
		args, _ := json.Marshal(map[string]any{"command": "echo x > f", "workdir": dir})
		return tb.Dispatch(ctx, "execute", args, nil)
	}
	if out, err := call(llmtool.New(m.Scope("free"), llmtool.Options{}), filepath.Join(ws, "link")); err != nil {
		t.Fatalf("control: %v (%s)", err, out)
	}
	if err := os.Remove(filepath.Join(outside, "f")); err != nil {
		t.Fatalf("control: got %v, want the unconfined write through the link to land outside", err)
	}

	tb := llmtool.New(m.Scope("c"), llmtool.Options{Sandbox: agentproc.WorkspaceSandbox(ws)})
	for _, dir := range []string{filepath.Join(ws, "link"), filepath.Join(ws, "link", "sub"), filepath.Join(ws, "link", "sub") + "/.."} {
		if out, err := call(tb, dir); err == nil || !strings.Contains(err.Error(), "outside the sandbox") {
			t.Errorf("execute in %s: got %v (%s), want an error saying it is outside the sandbox", dir, err, out)
		}
	}
	if n := len(m.Scope("c").List()); n != 0 {
		t.Errorf("%d processes started, want none", n)
	}
	for _, f := range []string{"f", "sub/f"} {
		if _, err := os.Stat(filepath.Join(outside, f)); err == nil {
			t.Errorf("%s was written outside the workspace, want nothing", f)
		}
	}
}
