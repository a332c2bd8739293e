package agentproc_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// Tests of the eleventh attack review (root): docs/sandbox-threats.md,
// "Eleventh attack review (root)".

// TestAttackHiddenDirLinkToPublicDotfiles: the tenth review stopped hiding
// a hidden directory's link target that is root's and readable by every
// local user (systemPublic), so that a virtualenv's link to the system's
// python3 was not taken from every tree. For a host that runs as root
// every file of its user is root's: a dotfile repository cloned as root
// outside /root (/opt/dotfiles, /srv/dotfiles: git checks files out 0644
// and directories 0755 under umask 022) and stowed into /root/.aws is
// "public" by that rule, and the credentials the ninth review hid at the
// links' targets were read there again. A system file is one under the
// system's own trees, not any file of root's.
func TestAttackHiddenDirLinkToPublicDotfiles(t *testing.T) {
	requireRootSandbox(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	ws := filepath.Join(home, "project")
	// The repository sits where every user may search: /tmp is 1777, the
	// repository's directories 0755 and its files 0644, as a clone is.
	repo, err := os.MkdirTemp("", "dotfiles")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(repo) })
	target := filepath.Join(repo, "aws", "credentials")
	for _, d := range []string{ws, filepath.Join(home, ".aws"), filepath.Dir(target)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(target, []byte("aws_secret_access_key = PUBLIC-DOTFILE-SECRET\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(home, ".aws", "credentials")); err != nil {
		t.Fatal(err)
	}
	cmd := "cat " + shellQuote(target) + "; true"
	plain := newManager(t, agentproc.WithRedaction(false))
	if ctl := runSandboxed(t, plain, agentproc.Request{Command: cmd, WorkDir: ws, Timeout: time.Minute}); !strings.Contains(ctl.Text, "PUBLIC-DOTFILE-SECRET") {
		t.Fatalf("control without the sandbox: got %q, want the credentials read", ctl.Text)
	}
	m := newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	if out := runSandboxed(t, m, agentproc.Request{Command: cmd, WorkDir: ws, Timeout: time.Minute}); strings.Contains(out.Text, "PUBLIC-DOTFILE-SECRET") {
		t.Errorf("the target of ~/.aws/credentials, a root-owned 0644 file outside the system's trees: got %q, want it hidden", out.Text)
	}
}
