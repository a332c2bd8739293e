package agentproc_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
)

// TestAttackSysVSharedMemory: System V IPC objects (shared memory, message
// queues, semaphores) are named by number in the IPC namespace and checked
// by owner only; neither Landlock nor the file system sees them. A tree of
// the host's user attached the host's 0600 segment and read it (and could
// have written it, or removed the host's queues and semaphores). As root
// each tree now runs in an IPC namespace of its own. Without root one
// cannot be made: documented, and the test skips.
func TestAttackSysVSharedMemory(t *testing.T) {
	requireSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("without root the tree shares the host's IPC namespace (docs/sandbox-threats.md)")
	}
	ws, _, _ := sandboxWorkspace(t)
	id, err := unix.SysvShmGet(unix.IPC_PRIVATE, 4096, unix.IPC_CREAT|0o600)
	if err != nil {
		t.Skipf("System V shared memory: %v", err)
	}
	t.Cleanup(func() { _, _ = unix.SysvShmCtl(id, unix.IPC_RMID, nil) })
	mem, err := unix.SysvShmAttach(id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	copy(mem, "SHM-SECRET-OF-THE-HOST")
	t.Cleanup(func() { _ = unix.SysvShmDetach(mem) })
	m := newManager(t, agentproc.WithRedaction(false))
	probe := attackProbe(t, ws, "shmread", strconv.Itoa(id))
	if out := runSandboxed(t, m, probe); !strings.Contains(out.Text, "SHM-SECRET") {
		t.Fatalf("control: got exit %d %q, want the segment read without the sandbox", exitCode(out.Info), out.Text)
	}
	probe.Sandbox = agentproc.WorkspaceSandbox(ws)
	out := runSandboxed(t, m, probe)
	if strings.Contains(out.Text, "SHM-SECRET") {
		t.Errorf("sandboxed: got %q, want the host's segment out of reach", out.Text)
	}
	// The tree still has System V IPC of its own (PostgreSQL's initdb
	// needs a segment).
	if out := runSandboxed(t, m, agentproc.Request{Command: "ipcmk -M 4096 && ipcs -m | grep -c 4096", WorkDir: ws, Sandbox: probe.Sandbox}); exitCode(out.Info) != 0 {
		t.Errorf("own segment: got exit %d %q, want it made", exitCode(out.Info), out.Text)
	}
}
