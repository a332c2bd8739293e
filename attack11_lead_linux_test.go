package agentproc_test

import (
	"os"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
)

// TestAttackSystemSecretCopies: WorkspaceSandbox hid /etc/shadow and
// /etc/gshadow, not the copies the system keeps of them (the "-" backups
// useradd and passwd leave, Debian's /var/backups copies, pam_pwhistory's
// old hashes): a tree sandboxed as root, which owns them, read the
// password hashes from /etc/shadow- (eleventh review, the lead's). The
// host's real files are used, read only; their bytes never reach the log:
// each read only prints a token. It skips where none of them exists;
// TestSystemSecretCopiesFixture runs it where each copy the host lacks (or
// has empty) is made in a mount namespace of its own.
func TestAttackSystemSecretCopies(t *testing.T) {
	requireRootSandbox(t)
	fixture := os.Getenv(secretCopiesFixtureEnv) != ""
	if fixture {
		makeSecretCopyFixtures(t, systemSecretCopies)
	}
	var probe strings.Builder
	var present []string
	for _, p := range systemSecretCopies {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Size() > 0 {
			present = append(present, p)
			probe.WriteString("cat " + shellQuote(p) + " >/dev/null 2>&1 && echo 'READ:" + p + "'; ")
		}
	}
	switch {
	case fixture && len(present) != len(systemSecretCopies):
		t.Fatalf("the fixture: got %q, want every one of %q", present, systemSecretCopies)
	case len(present) == 0:
		t.Skip("none of the password files' copies exists here (TestSystemSecretCopiesFixture makes them)")
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

// TestSandboxUIDFallbackKeepsHostDumpable: where the tree cannot be held
// (no thread pidfds: pretended here), a root host's forking thread takes
// another uid, and changing a thread's euid makes the whole process's
// memory undumpable (commit_creds): the host lost its core dumps and its
// /proc files' owner checks for good after its first such Start. The
// thread sets the host's dumpable flag back. Root only: without root no
// uid is taken.
func TestSandboxUIDFallbackKeepsHostDumpable(t *testing.T) {
	requireRootSandbox(t)
	before, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	if err != nil || before != 1 {
		t.Skipf("this process is not dumpable to start with (%d, %v)", before, err)
	}
	ws := t.TempDir()
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	restore := agentproc.FailThreadPidfd(syscall.EINVAL)
	defer restore()
	for range 3 { // the throwaway thread, then ready threads
		mustWait(t, mustStart(t, m, agentproc.Request{Command: "true", WorkDir: ws}))
	}
	if after, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); err != nil || after != 1 {
		t.Errorf("host dumpable after three Starts on the uid fallback: got %d (%v), want 1", after, err)
	}
}
