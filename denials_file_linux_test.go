package agentproc_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
)

// TestSandboxInferredFileDenials checks that the tree's own "Permission
// denied" and "Read-only file system" messages become Inferred file
// denials when the policy explains them, and only then: a path the policy
// allows but the file's mode refuses is not reported.
func TestSandboxInferredFileDenials(t *testing.T) {
	requireSandbox(t)
	ws, key, _ := sandboxWorkspace(t)
	m := newManager(t)
	sb := agentproc.WorkspaceSandbox(ws)
	locked := filepath.Join(ws, "locked")
	out := runSandboxed(t, m, agentproc.Request{WorkDir: ws, Sandbox: sb, Command: "cat " + key + "; touch /usr/agentproc-denied; " +
		"echo x > " + filepath.Join(ws, ".git", "config") + "; echo x > " + locked + "; chmod 000 " + locked + "; cat " + locked + "; true"})
	want := []agentproc.Denial{
		{Kind: "file", Op: "read", Target: key, Rule: "Hide", Count: 1, Inferred: true},
		{Kind: "file", Op: "write", Target: "/usr/agentproc-denied", Rule: "outside Write", Count: 1, Inferred: true},
	}
	if isRoot() {
		want = append(want, agentproc.Denial{Kind: "file", Op: "write", Target: filepath.Join(ws, ".git", "config"), Rule: "ReadOnly", Count: 1, Inferred: true})
	}
	for _, w := range want {
		if !slices.Contains(out.Denials, w) {
			t.Errorf("denials: got %+v, want %+v among them\noutput: %s", out.Denials, w, out.Text)
		}
	}
	if !strings.Contains(out.Text, locked+": Permission denied") {
		t.Errorf("output: got %q, want cat refused %s by its mode", out.Text, locked)
	}
	for _, d := range out.Denials {
		if d.Target == locked {
			t.Errorf("denials: got %+v for a path the policy allows", d)
		}
	}
}
