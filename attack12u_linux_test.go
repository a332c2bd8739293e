package agentproc_test

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// Tests of the twelfth attack review (unprivileged and the surfaces):
// docs/sandbox-threats.md, "Twelfth attack review (unprivileged and the
// surfaces)".

// TestAttackTreeHoldFailsOpen: without root a sandboxed tree is held
// stopped until the thread that forked it, which shares its Landlock
// domain, has exited (the eleventh review's treeHold); the hold needs a
// pidfd of that thread. holdTree gave up on the hold at any failure of
// that pidfd, as it does where the kernel has no thread pidfds, so a host
// short of descriptors (EMFILE) or memory started its tree unheld, beside
// the thread, and said nothing: the window of
// TestAttackForkingThreadSignalled (the host's environment and memory, a
// SIGKILL to the host) was open again. The Start must fail instead. The
// control has the kernel lack thread pidfds (EINVAL), the documented open
// case, where the tree runs; and the real pidfd, after the failures, where
// the Start runs held: the failures left the Manager usable. Both paths
// (the throwaway first thread and the ready thread of later Starts) are
// taken. Unprivileged only: as root the thread takes another uid and
// nothing is held.
func TestAttackTreeHoldFailsOpen(t *testing.T) {
	requireSandbox(t)
	if os.Geteuid() == 0 {
		t.Skip("as root the forking thread takes forkerUID rather than holding the tree: TestAttack12uUnprivileged runs this as " + sandboxUser)
	}
	ws := t.TempDir()
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	run := func() (string, error) {
		p, err := m.Start(t.Context(), agentproc.Request{Command: "echo RAN", WorkDir: ws, Timeout: time.Minute})
		if err != nil {
			return "", err
		}
		mustWait(t, p)
		return p.Output().Text, nil
	}
	restore := agentproc.FailThreadPidfd(syscall.EINVAL)
	for i := range 3 {
		if out, err := run(); err != nil || !strings.Contains(out, "RAN") {
			restore()
			t.Fatalf("control: Start %d without thread pidfds (an old kernel): got %v (%q), want it run", i, err, out)
		}
	}
	restore()
	restore = agentproc.FailThreadPidfd(syscall.EMFILE)
	for i := range 3 {
		out, err := run()
		if err == nil {
			t.Errorf("Start %d, the thread's pidfd failing with EMFILE: got the tree run unheld (%q), want the Start refused", i, out)
		} else if !strings.Contains(err.Error(), "too many open files") {
			t.Errorf("Start %d, the thread's pidfd failing with EMFILE: got %v, want an error naming it", i, err)
		}
	}
	restore()
	if out, err := run(); err != nil || !strings.Contains(out, "RAN") {
		t.Fatalf("control: Start with the thread's pidfd after the failures: got %v (%q), want it run", err, out)
	}
}

// TestAttack12uUnprivileged runs this review's tests as the unprivileged
// user, where the hold is the forking thread's only protection.
func TestAttack12uUnprivileged(t *testing.T) {
	requireSandbox(t)
	tests := []string{"TestAttackTreeHoldFailsOpen"}
	out, err := runAsSandboxUser(t, 2*time.Minute, "-test.run=^("+strings.Join(tests, "|")+")$")
	if err != nil {
		t.Fatalf("as %s: %v\n%s", sandboxUser, err, out)
	}
	for _, name := range tests {
		if !strings.Contains(out, "--- PASS: "+name+" ") {
			t.Errorf("as %s: got no PASS line for %s, want one\n%s", sandboxUser, name, out)
		}
	}
}
