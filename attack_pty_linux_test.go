package agentproc_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
)

// TestAttackHostTerminal: a tree opens the host's terminal by its path
// (/dev/pts/N, the user's own device) to write into what the user sees or
// read what the user types. Held: as root the tree's /dev/pts is not the
// host's, without root Landlock grants no device but the tree's own. The
// control, unconfined, writes to it. Runs as root and, through
// TestSandboxUnprivileged, not.
func TestAttackHostTerminal(t *testing.T) {
	requireSandbox(t)
	ws, _, _ := sandboxWorkspace(t)
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer master.Close()
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	tty := "/dev/pts/" + strconv.Itoa(n)
	m := newManager(t, agentproc.WithRedaction(false))
	cmd := "(echo INJECTED > " + tty + ") 2>/dev/null && echo WROTE; (timeout 1 cat " + tty + ") 2>/dev/null; echo rc=$?"
	if out := runSandboxed(t, m, agentproc.Request{Command: cmd, WorkDir: ws}); !strings.Contains(out.Text, "WROTE") {
		t.Fatalf("control: got %q, want the terminal written unconfined", out.Text)
	}
	out := runSandboxed(t, m, agentproc.Request{Command: cmd, WorkDir: ws, Sandbox: agentproc.WorkspaceSandbox(ws)})
	if strings.Contains(out.Text, "WROTE") || strings.Contains(out.Text, "rc=124") {
		t.Errorf("sandboxed: got %q, want the host's terminal neither written nor opened for reading", out.Text)
	}
}
