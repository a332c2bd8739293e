package agentproc_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
)

// TestAttackHiddenDirLinkToSystemFile: a hidden directory that holds a
// Python virtualenv (`gcloud config virtualenv create` makes
// ~/.config/gcloud/virtenv, whose bin/python3 links to the system's) had
// the link's target, the system's interpreter, hidden from every tree:
// python3 failed in every sandboxed command. A system file any local user
// reads is no one's secret.
func TestAttackHiddenDirLinkToSystemFile(t *testing.T) {
	requireSandbox(t)
	perl, err := filepath.EvalSymlinks("/usr/bin/perl")
	if err != nil {
		t.Skip("no /usr/bin/perl")
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	ws := filepath.Join(home, "project")
	bin := filepath.Join(home, ".config", "gcloud", "virtenv", "bin")
	for _, d := range []string{ws, bin} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(perl, filepath.Join(bin, "perl")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/share", filepath.Join(bin, "share")); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	p, err := m.Start(t.Context(), agentproc.Request{Command: "/usr/bin/perl -e 'print qq(ran\\n)'; ls /usr/share | head -1 | wc -l", WorkDir: ws})
	if err != nil {
		t.Fatalf("Start: got %v, want a process", err)
	}
	info := mustWait(t, p)
	if out := p.Output().Text; !strings.Contains(out, "ran\n1\n") {
		t.Errorf("perl and /usr/share in a sandbox with a hidden link to them: got %q (exit %v), want %q", out, info.ExitCode, "ran\n1\n")
	}
}
