package agentproc

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestSandboxGrantAfterSwap checks that a Write directory swapped for a
// link between the policy's resolution and the building of its ruleset is
// not granted through the link: the tree cannot write where it points.
func TestSandboxGrantAfterSwap(t *testing.T) {
	m, _, ws := sandboxTestManager(t)
	outside := t.TempDir()
	d := filepath.Join(ws, "d")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	pol, err := m.sandboxPolicyFor(&Sandbox{Write: []string{d}, NoDefaultWrite: true}, ws, "", true, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(d); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, d); err != nil {
		t.Fatal(err)
	}
	m.sandbox.useThreads()
	built, err := m.sandbox.cache.get(pol)
	if err != nil {
		t.Fatal(err)
	}
	defer built.done()
	cmd := exec.Command("/bin/sh", "-c", "echo x > d/f")
	cmd.Dir = ws
	if err := built.start(cmd, sandboxStart{}); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if _, statErr := os.Stat(filepath.Join(outside, "f")); statErr == nil {
		t.Errorf("the write through the swapped link landed outside (exit %v), want it refused", err)
	}
	if err == nil {
		t.Errorf("the write through the swapped link exited 0, want a failure")
	}
}

// TestRawPolicyKeyHasBound checks that the policy cache tells a narrowed
// policy from the same lists unnarrowed, and a chosen work dir from the
// default: one holds what the other grants unchecked, so neither may be
// served the other's cached answer.
func TestRawPolicyKeyHasBound(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	sb := WorkspaceSandbox(ws)
	narrowed, err := sb.Narrow(nil)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{
		rawPolicyKey(sb, ws, "", true, false):        true,
		rawPolicyKey(narrowed, ws, "", true, false):  true,
		rawPolicyKey(narrowed, ws, "", false, false): true,
	}
	if len(keys) != 3 {
		t.Errorf("got %d distinct keys for an unnarrowed, a narrowed and a default-dir policy, want 3", len(keys))
	}
}
