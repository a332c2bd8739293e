package agentproc_test

import (
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
)

// TestAttackPOSIXMessageQueue: a POSIX message queue is named in the IPC
// namespace's mqueue file system, which no path of the tree's reaches. A
// tree opens the host's queue by name if the kernel lets it.
func TestAttackPOSIXMessageQueue(t *testing.T) {
	requireSandbox(t)
	ws, _, _ := sandboxWorkspace(t)
	name := "agentproc-attack-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	p, _ := unix.BytePtrFromString(name)
	fd, _, errno := unix.Syscall6(unix.SYS_MQ_OPEN, uintptr(unsafe.Pointer(p)), uintptr(unix.O_RDWR|unix.O_CREAT|unix.O_EXCL), 0o600, 0, 0, 0)
	if errno != 0 {
		t.Skipf("mq_open: %v", errno)
	}
	_ = unix.Close(int(fd))
	t.Cleanup(func() { _, _, _ = unix.Syscall(unix.SYS_MQ_UNLINK, uintptr(unsafe.Pointer(p)), 0, 0) })
	m := newManager(t, agentproc.WithRedaction(false))
	probe := attackProbe(t, ws, "mqopen", name)
	if out := runSandboxed(t, m, probe); !strings.Contains(out.Text, "reached") {
		t.Fatalf("control: got %q, want the queue opened without the sandbox", out.Text)
	}
	probe.Sandbox = agentproc.WorkspaceSandbox(ws)
	out := runSandboxed(t, m, probe)
	t.Logf("sandboxed: %q", out.Text)
	if strings.Contains(out.Text, "reached") {
		t.Errorf("sandboxed: got %q, want the host's queue out of reach", out.Text)
	}
}
