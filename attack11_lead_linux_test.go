package agentproc_test

import (
	"os"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
)

// TestAttackSystemSecretCopies: WorkspaceSandbox hid /etc/shadow and
// /etc/gshadow, not the copies the system keeps of them (the "-" backups
// useradd and passwd leave, Debian's /var/backups copies, pam_pwhistory's
// old hashes): a tree sandboxed as root, which owns them, read the
// password hashes from /etc/shadow- (eleventh review, the lead's). The
// host's real files are used, read only; their bytes never reach the log:
// each read only prints a token. Skips where none of them exists.
func TestAttackSystemSecretCopies(t *testing.T) {
	requireRootSandbox(t)
	var probe strings.Builder
	var present []string
	for _, p := range []string{"/etc/shadow-", "/etc/gshadow-", "/var/backups/shadow.bak", "/var/backups/gshadow.bak", "/etc/security/opasswd", "/var/log/btmp"} {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Size() > 0 {
			present = append(present, p)
			probe.WriteString("cat " + shellQuote(p) + " >/dev/null 2>&1 && echo 'READ:" + p + "'; ")
		}
	}
	if len(present) == 0 {
		t.Skip("none of the password files' copies exists here")
	}
	probe.WriteString("true")
	ws := t.TempDir()
	m := newManager(t, agentproc.WithRedaction(false))
	control := runSandboxed(t, m, agentproc.Request{Command: probe.String(), WorkDir: ws})
	out := runSandboxed(t, m, agentproc.Request{Command: probe.String(), WorkDir: ws, Sandbox: agentproc.WorkspaceSandbox(ws)})
	for _, p := range present {
		if !strings.Contains(control.Text, "READ:"+p+"\n") {
			t.Errorf("control: %s not read without the sandbox (output %q)", p, control.Text)
		}
		if strings.Contains(out.Text, "READ:"+p+"\n") {
			t.Errorf("a tree sandboxed as root read %s, want it hidden", p)
		}
	}
}
