package agentproc

import (
	"os"
	"path/filepath"
	"testing"
)

// SetMaxHideWatches sets the bound on a Manager's hide watches
// (maxHideWatches) until restore, so that a test passes it with a few
// hundred directories, not thousands.
func SetMaxHideWatches(n int) (restore func()) {
	old := maxHideWatches
	maxHideWatches = n
	return func() { maxHideWatches = old }
}

// TestHideWatchHiddenFileRewritten: a hidden file is watched at its name
// for a link made there (TestAttackHiddenFileSwappedForLink), not for a
// file: ~/.claude.json and the shells' histories are rewritten by a
// rename many times while an agent runs, and each would have every next
// Start resolve its policy again. The policy is kept across such a
// rewrite, and resolved again when a link takes the file's place. Runs as
// root and, through TestAttack13uUnprivileged, not.
func TestHideWatchHiddenFileRewritten(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	ws := filepath.Join(home, "project")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	hidden := filepath.Join(home, ".claude.json")
	if err := os.WriteFile(hidden, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := New()
	t.Cleanup(func() { _ = m.Close() })
	sb := WorkspaceSandbox(ws)
	get := func() *sandboxPolicy {
		t.Helper()
		pol, err := m.cachedPolicy(sb, ws, "", true, false)
		if err != nil {
			t.Fatal(err)
		}
		return pol
	}
	first := get()
	if first.unwatched {
		t.Fatal("WorkspaceSandbox's walk could not be watched")
	}
	tmp := filepath.Join(home, ".claude.json.tmp")
	if err := os.WriteFile(tmp, []byte("{\"n\":1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, hidden); err != nil {
		t.Fatal(err)
	}
	if again := get(); again != first {
		t.Errorf("a hidden file rewritten by a rename: got the policy resolved again, want it kept")
	}
	moved := filepath.Join(home, "dotfiles-claude.json")
	if err := os.Rename(hidden, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(moved, hidden); err != nil {
		t.Fatal(err)
	}
	if again := get(); again == first {
		t.Errorf("a hidden file replaced by a link: got the policy kept, want it resolved again")
	}
}
