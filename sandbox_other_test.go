//go:build !linux && !darwin

package agentproc_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
)

// TestSandboxUnsupportedHere checks that, without a sandbox mechanism, a
// Sandbox fails Start with ErrUnsupported naming the field, and that
// BestEffort runs the command with the gaps in Warnings.
func TestSandboxUnsupportedHere(t *testing.T) {
	t.Parallel()
	// Not t.TempDir: Wine cannot remove its nested directories (see
	// windows_test.go).
	ws, err := os.MkdirTemp("", "agentproc-sandbox")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(ws) })
	m := newManager(t)
	sb := agentproc.WorkspaceSandbox(ws)
	_, err = m.Start(testContext(t), agentproc.Request{Command: "exit 0", WorkDir: ws, Sandbox: sb})
	if !errors.Is(err, agentproc.ErrUnsupported) || !strings.Contains(err.Error(), "Sandbox.Write") {
		t.Fatalf("Start: got %v, want ErrUnsupported naming Sandbox.Write", err)
	}
	sb.BestEffort = true
	p := mustStart(t, m, agentproc.Request{Command: "exit 0", WorkDir: ws, Sandbox: sb})
	info := mustWait(t, p)
	if w := strings.Join(info.Warnings, "\n"); !strings.Contains(w, "Sandbox.Write") || !strings.Contains(w, "Sandbox.Network") {
		t.Errorf("warnings %q, want Sandbox.Write and Sandbox.Network named", info.Warnings)
	}
}
