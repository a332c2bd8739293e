package agentproc

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestAttackHideWatchDrainedDuringResolve: hideWatch drops a directory's
// registrations when an event there fires, and the Start that drains it
// drops the policies it names from the cache. A policy being resolved
// at that moment (its walk has registered the directory, it is not kept
// yet) was then kept as the walk left it, its registration gone: a link
// made in ~/.aws while a concurrent Start resolved another work dir's
// policy left that policy without the link's target hidden, for every
// later tree of that work dir until the cache started over. A tree that
// keeps Starts in flight with new work dirs (each a policy) makes the
// window wide. Here a concurrent Start's drain is made between the
// resolve and the keeping (afterPolicyResolve).
func TestAttackHideWatchDrainedDuringResolve(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	ws := filepath.Join(home, "project")
	aws := filepath.Join(home, ".aws")
	dotfiles := filepath.Join(home, "dotfiles")
	for _, d := range []string{ws, aws, dotfiles} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	target := filepath.Join(dotfiles, "credentials")
	if err := os.WriteFile(target, []byte("[default]\n"), 0o600); err != nil {
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
	var drained []string
	afterPolicyResolve = func() {
		afterPolicyResolve = nil
		if err := os.Symlink(target, filepath.Join(aws, "credentials")); err != nil {
			t.Error(err)
		}
		drained, _ = m.sandbox.hides.changed() // a concurrent Start's check
	}
	t.Cleanup(func() { afterPolicyResolve = nil })
	first := get()
	if slices.Contains(first.hide, target) {
		t.Fatalf("the link's target hidden by the resolve that ran before the link was made")
	}
	if len(drained) == 0 {
		t.Fatalf("the concurrent drain: got no policy stale, want the one being resolved")
	}
	if again := get(); !slices.Contains(again.hide, target) {
		t.Errorf("the Start after a link made in ~/.aws during a concurrent resolve: got %s not hidden, want it hidden", target)
	}
}
