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

// TestSandboxToldAndKept checks that a Toolbox with a Sandbox tells the
// model what its commands may reach, and refuses a workdir outside the
// sandbox's writable directories (it would become writable) before
// starting anything.
func TestSandboxToldAndKept(t *testing.T) {
	t.Parallel()
	// Not t.TempDir: Go's RemoveAll of the nested directory it makes
	// fails under Wine 8 (unlinkat: Invalid function), where this test
	// runs too (make test-windows); nothing is written in ws.
	ws, err := os.MkdirTemp("", "agentproc-llmtool")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(ws) })
	m := agentproc.New()
	defer m.Close()
	tb := llmtool.New(m.Scope("c"), llmtool.Options{Sandbox: agentproc.WorkspaceSandbox(ws)})
	var desc string
	for _, tool := range tb.Tools() {
		if tool.Name == "execute" {
			desc = tool.Description
		}
	}
	for _, want := range []string{"sandbox", ws, "no network", "Permission denied"} {
		if !strings.Contains(desc, want) {
			t.Errorf("execute's description does not say %q:\n%s", want, desc)
		}
	}
	args, _ := json.Marshal(map[string]any{"command": "true", "workdir": filepath.Dir(ws)})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := tb.Dispatch(ctx, "execute", args, nil); err == nil || !strings.Contains(err.Error(), "outside the sandbox") {
		t.Errorf("execute in %s: got %v, want an error saying it is outside the sandbox", filepath.Dir(ws), err)
	}
	if n := len(m.List()); n != 0 {
		t.Errorf("%d processes started, want none", n)
	}
}
