package agentproc

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestAttackHideWatchInstanceRefusedOnce: a Manager makes its inotify
// instance at its first policy resolve, and took a refusal then (EMFILE:
// the user's fs.inotify.max_user_instances, 128, spent) as its answer for
// its whole life: every later Start resolved its policy again, walk and
// ruleset. Without root every tree of the user counts against that limit
// (a tree of another session's Manager, `agentproc mcp` per agent, holding
// 128 instances while this one starts), and the limit is back as soon as
// that tree ends. The control: while the instances are held the policy is
// not kept. Runs as the unprivileged test user alone, through
// TestAttack15uUnprivileged: root's instances are shared with the
// machine's daemons, which the test would starve for its few milliseconds.
func TestAttackHideWatchInstanceRefusedOnce(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("runs as the unprivileged test user (TestAttack15uUnprivileged)")
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	ws := filepath.Join(home, "project")
	if err := os.MkdirAll(filepath.Join(home, ".aws"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(ws, 0o700); err != nil {
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
	// What a tree of the same user does: take every inotify instance.
	var held []int
	release := func() {
		for _, fd := range held {
			_ = unix.Close(fd)
		}
		held = nil
	}
	defer release()
	for range 4096 {
		fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
		if errors.Is(err, unix.EMFILE) {
			break
		}
		if err != nil {
			t.Fatalf("inotify_init1: %v", err)
		}
		held = append(held, fd)
	}
	start := time.Now()
	first := get()
	resolve := time.Since(start)
	release()
	if !first.unwatched {
		t.Fatalf("control: with the user's inotify instances spent, got the policy watched, want it unwatched")
	}
	second := get()
	if third := get(); third != second {
		t.Errorf("the instances given back: got the policy resolved again at each Start (one resolve %v), want it kept", resolve)
	}
}
