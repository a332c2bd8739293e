package agentproc_test

import (
	"os"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
)

// TestAttackLogSocketLinkChain: the seventeenth review watches a hidden
// link's name, so that a host that points /dev/log elsewhere has the next
// Start build afresh. Where the link leads to another link (/dev/log to a
// stable name that the log daemon in charge points at its own socket, the
// tmux habit for SSH_AUTH_SOCK), only the first name was watched: the
// policy covers the name as written and the chain's last target, and a
// re-pointed link in the middle left its new target covered by nothing.
// A later NetworkNone tree of the same Manager wrote its line there.
func TestAttackLogSocketLinkChain(t *testing.T) {
	requireRootSandbox(t)
	if _, err := os.Lstat("/dev/log"); err == nil {
		t.Skip("/dev/log exists on this host (or another test's stand-in): not replaced")
	}
	ws := t.TempDir()
	first := listenLogSocket(t, "unixgram", "/run/agentproc-atk18r-syslog/log", []string{"/run/agentproc-atk18r-syslog"})
	moved := listenLogSocket(t, "unixgram", "/run/agentproc-atk18r-syslog2/log", []string{"/run/agentproc-atk18r-syslog2"})
	if first == nil || moved == nil {
		t.Skip("the stand-in sockets exist: not replaced")
	}
	const middle = "/run/agentproc-atk18r-current"
	if err := os.Symlink(first.path, middle); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(middle) })
	if err := os.Symlink(middle, "/dev/log"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove("/dev/log") })
	first.name, moved.name = "/dev/log", "/dev/log"
	m := newManager(t)
	req := helperRequest(t, "logsend")
	req.WorkDir = ws
	req.Sandbox = agentproc.WorkspaceSandbox(ws) // NetworkNone
	req.Env[logSendEnv] = "unixgram:/dev/log"
	// The first Start builds the policy, /dev/log resolved through the
	// chain to first.
	if out := runSandboxed(t, m, req).Text; first.received(t) != "" || !strings.Contains(out, "denied /dev/log: ") {
		t.Fatalf("first tree: got %q, want /dev/log refused", out)
	}
	// The host points the middle link at another daemon's socket; /dev/log
	// itself is unchanged.
	if err := os.Remove(middle); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(moved.path, middle); err != nil {
		t.Fatal(err)
	}
	ctl := req
	ctl.Sandbox = nil
	out := runSandboxed(t, m, ctl).Text
	if got := moved.received(t); !strings.Contains(got, logLine) {
		t.Fatalf("control: %s without the sandbox: got %q (tree said %q), want the line", moved.path, got, out)
	}
	out = runSandboxed(t, m, req).Text
	if got := moved.received(t); got != "" || !strings.Contains(out, "denied /dev/log: ") {
		t.Errorf("NetworkNone, middle link re-pointed after the policy: %s got %q (tree said %q), want nothing and the write refused", moved.path, got, out)
	}
}

// TestAttackDoorThroughWorkspaceLink: a link the host made in the
// tree's work dir to a door socket (a project's `docker.sock` link for a
// compose setup), before the first Start and after it. The door is
// covered in the namespace and the link resolves to the cover, so both
// are refused (held). Control: both links reach the door unconfined.
func TestAttackDoorThroughWorkspaceLink(t *testing.T) {
	requireRootSandbox(t)
	ws := t.TempDir()
	made := makeDoors(t, map[string][]string{"/run/docker.sock": nil}, 0o755)
	door := "/run/docker.sock"
	if len(made) == 0 {
		t.Skip("this host has its own /run/docker.sock: not replaced")
	}
	before, after := ws+"/docker.sock", ws+"/later.sock"
	if err := os.Symlink(door, before); err != nil {
		t.Fatal(err)
	}
	plain := newManager(t)
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	probeDoors(t, ws, []string{before}, plain, m)
	if err := os.Symlink(door, after); err != nil {
		t.Fatal(err)
	}
	probeDoors(t, ws, []string{after}, plain, m)
}
