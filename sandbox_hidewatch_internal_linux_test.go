package agentproc

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentproc/agentproc/internal/inotifytest"
)

// TestHideWatchKeepsPolicy checks what hideWatch costs a Start: a policy
// is resolved once while nothing in its hidden directories changes, or
// only files are made there (a busy hidden directory), and again once a
// link or a directory is made in one (or a link renamed over one), a
// missing hidden directory appears, or one is removed and made again. Run as root and, through TestMend4Unprivileged, not: without
// root a hidden directory the host may not read (WorkspaceSandbox names
// root's /etc/ssl/private) could not be watched and made every Start
// resolve its policy again.
func TestHideWatchKeepsPolicy(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	ws := filepath.Join(home, "project")
	aws := filepath.Join(home, ".aws")
	for _, d := range []string{ws, aws} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
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
		t.Fatalf("WorkspaceSandbox's walk could not be watched: every Start would resolve it again")
	}
	if again := get(); again != first {
		t.Errorf("nothing changed: got the policy resolved again, want it kept")
	}
	if err := os.WriteFile(filepath.Join(aws, "config"), []byte("[default]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if again := get(); again != first {
		t.Errorf("a file made in a hidden directory: got the policy resolved again, want it kept")
	}
	// A file made and removed between two Starts (SQLite's journal in a
	// browser profile, many times a second while it browses) is no link.
	journal := filepath.Join(aws, "cache-journal")
	if err := os.WriteFile(journal, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(journal); err != nil {
		t.Fatal(err)
	}
	if again := get(); again != first {
		t.Errorf("a file made and removed in a hidden directory: got the policy resolved again, want it kept")
	}
	steps := []struct {
		what string
		do   func() error
	}{
		{"a link made in a hidden directory", func() error { return os.Symlink(ws, filepath.Join(aws, "credentials")) }},
		{"a directory made in a hidden directory", func() error { return os.Mkdir(filepath.Join(aws, "sso"), 0o700) }},
		{"a missing hidden directory made", func() error { return os.Mkdir(filepath.Join(home, ".kube"), 0o700) }},
		{"a link renamed over a hidden directory's link", func() error {
			tmp := filepath.Join(home, "new-link")
			if err := os.Symlink(home, tmp); err != nil {
				return err
			}
			return os.Rename(tmp, filepath.Join(aws, "credentials"))
		}},
		{"a hidden directory removed and made again", func() error {
			if err := os.RemoveAll(aws); err != nil {
				return err
			}
			return os.Mkdir(aws, 0o700)
		}},
	}
	prev := first
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatal(err)
		}
		next := get()
		if next == prev {
			t.Errorf("%s: got the policy kept, want it resolved again", s.what)
		}
		if again := get(); again != next {
			t.Errorf("%s, then nothing: got the policy resolved again, want it kept", s.what)
		}
		prev = next
	}
}

// TestHideWatchOverflow checks that a hideWatch whose queue overflowed
// resolves every cached policy again: the events lost may have been a
// link made in any hidden directory.
func TestHideWatchOverflow(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	ws := filepath.Join(home, "project")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	m := New()
	t.Cleanup(func() { _ = m.Close() })
	sb := WorkspaceSandbox(ws)
	first, err := m.cachedPolicy(sb, ws, "", true, false)
	if err != nil {
		t.Fatal(err)
	}
	// Events on a directory no policy names fill the Manager's queue.
	inotifytest.Overflow(t, m.sandbox.hides.ino, t.TempDir())
	again, err := m.cachedPolicy(sb, ws, "", true, false)
	if err != nil {
		t.Fatal(err)
	}
	if again == first {
		t.Error("after an overflow: got the policy kept, want it resolved again")
	}
}
