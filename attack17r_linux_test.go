package agentproc_test

import (
	"os"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
)

// TestAttackLogSocketsMadeLater: the sixteenth review covers the host's log
// sockets as a policy is built, /dev/log resolved through its link, and a
// Manager keeps its built policies. The host then points /dev/log at
// another daemon's socket (a syslog daemon started after the agent's first
// command, in place of journald or of another syslog daemon). A later
// NetworkNone tree of the same Manager wrote a line there: the re-pointed
// link's new target was covered by nothing, as the namespace's watch
// looked only for missing paths (and ReadOnly's links).
func TestAttackLogSocketsMadeLater(t *testing.T) {
	requireRootSandbox(t)
	if _, err := os.Lstat("/dev/log"); err == nil {
		t.Skip("/dev/log exists on this host (or another test's stand-in): not replaced")
	}
	ws := t.TempDir()
	first := listenLogSocket(t, "unixgram", "/run/agentproc-atk17r-syslog/log", []string{"/run/agentproc-atk17r-syslog"})
	if err := os.Symlink(first.path, "/dev/log"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove("/dev/log") })
	first.name = "/dev/log"
	m := newManager(t)
	req := helperRequest(t, "logsend")
	req.WorkDir = ws
	req.Sandbox = agentproc.WorkspaceSandbox(ws) // NetworkNone
	req.Env[logSendEnv] = "unixgram:/dev/log"
	// The first Start builds the policy, /dev/log resolved to first.
	if out := runSandboxed(t, m, req).Text; first.received(t) != "" || !strings.Contains(out, "denied /dev/log: ") {
		t.Fatalf("first tree: got %q, want /dev/log refused", out)
	}
	moved := listenLogSocket(t, "unixgram", "/run/agentproc-atk17r-syslog2/log", []string{"/run/agentproc-atk17r-syslog2"})
	if err := os.Remove("/dev/log"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(moved.path, "/dev/log"); err != nil {
		t.Fatal(err)
	}
	moved.name = "/dev/log"
	// Only the link changes: a path the policy found missing, made now
	// (journald's directory), has the next Start build afresh anyway.
	socks := []*logSocket{moved}
	var specs []string
	for _, s := range socks {
		specs = append(specs, s.kind+":"+s.name)
	}
	req.Env[logSendEnv] = strings.Join(specs, "\n")
	ctl := req // the same Env
	ctl.Sandbox = nil
	out := runSandboxed(t, m, ctl).Text
	for _, s := range socks {
		if got := s.received(t); !strings.Contains(got, logLine) {
			t.Fatalf("control: %s without the sandbox: got %q (tree said %q), want the line", s.path, got, out)
		}
	}
	out = runSandboxed(t, m, req).Text
	for _, s := range socks {
		if got := s.received(t); got != "" || !strings.Contains(out, "denied "+s.name+": ") {
			t.Errorf("NetworkNone, after the policy: %s got %q (tree said %q), want nothing and the write refused", s.path, got, out)
		}
	}
}

// TestAttackLogSocketRemade: where /dev/log is the syslog daemon's socket
// itself (a host without journald), a restart of the daemon removes it and
// binds it again. The host's unlink detaches the tree namespace's cover
// from the old name, and the new socket is another inode: the next
// NetworkNone tree of the same Manager must find it covered again.
func TestAttackLogSocketRemade(t *testing.T) {
	requireRootSandbox(t)
	if _, err := os.Lstat("/dev/log"); err == nil {
		t.Skip("/dev/log exists on this host (or another test's stand-in): not replaced")
	}
	ws := t.TempDir()
	first := listenLogSocket(t, "unixgram", "/dev/log", nil)
	m := newManager(t)
	req := helperRequest(t, "logsend")
	req.WorkDir = ws
	req.Sandbox = agentproc.WorkspaceSandbox(ws) // NetworkNone
	req.Env[logSendEnv] = "unixgram:/dev/log"
	if out := runSandboxed(t, m, req).Text; first.received(t) != "" || !strings.Contains(out, "denied /dev/log: ") {
		t.Fatalf("first tree: got %q, want /dev/log refused", out)
	}
	// The daemon restarts: its socket removed and bound again.
	_ = first.gram.Close()
	if err := os.Remove("/dev/log"); err != nil {
		t.Fatal(err)
	}
	again := listenLogSocket(t, "unixgram", "/dev/log", nil)
	ctl := req // the same Env
	ctl.Sandbox = nil
	if out := runSandboxed(t, m, ctl).Text; !strings.Contains(again.received(t), logLine) {
		t.Fatalf("control: the remade /dev/log without the sandbox: tree said %q, want the line received", out)
	}
	out := runSandboxed(t, m, req).Text
	if got := again.received(t); got != "" || !strings.Contains(out, "denied /dev/log: ") {
		t.Errorf("NetworkNone, /dev/log remade after the policy: got %q (tree said %q), want nothing and the write refused", got, out)
	}
}

// TestAttackRPCBindDoor: rpcbind, which NFS servers and clients run
// (Debian's nfs-common and RHEL's nfs-utils pull it in; systemd's
// rpcbind.socket listens at /run/rpcbind.sock), takes SET and UNSET from a
// peer on its local socket by the peer's uid, and a uid-0 peer is its
// superuser: a NetworkNone tree could unregister the host's NFS services
// (mountd, nlockmgr: the host's NFS clients fail) or register one at an
// address of its choosing, which the host's remote RPC clients are then
// sent to (the protocol read, not run). Its abstract socket is under
// Landlock's scope; the pathname one was not covered. A stand-in: no
// rpcbind runs here.
func TestAttackRPCBindDoor(t *testing.T) {
	requireRootSandbox(t)
	requireDoorsShut(t, t.TempDir(), map[string][]string{"/run/rpcbind.sock": nil})
}

// TestAttackChrootLogSockets: rsyslog listens on more sockets than
// /dev/log where a chrooted daemon logs: Debian's and Ubuntu's postfix
// (their default MTA) adds /var/spool/postfix/dev/log
// (/etc/rsyslog.d/postfix.conf, $AddUnixListenSocket), and their haproxy
// package /var/lib/haproxy/dev/log (49-haproxy.conf). Mode 0666 in
// directories any user may search: a NetworkNone tree's line written there
// is forwarded with the host's logs, as through /dev/log. Stand-ins: no
// rsyslog runs here.
func TestAttackChrootLogSockets(t *testing.T) {
	requireRootSandbox(t)
	var socks []*logSocket
	for _, s := range []*logSocket{
		listenLogSocket(t, "unixgram", "/var/spool/postfix/dev/log", []string{"/var/spool/postfix", "/var/spool/postfix/dev"}),
		listenLogSocket(t, "unixgram", "/var/lib/haproxy/dev/log", []string{"/var/lib/haproxy", "/var/lib/haproxy/dev"}),
	} {
		if s != nil {
			socks = append(socks, s)
		}
	}
	if len(socks) == 0 {
		t.Skip("this host has its own chroot log sockets: not replaced")
	}
	ws := t.TempDir()
	var specs []string
	for _, s := range socks {
		specs = append(specs, s.kind+":"+s.name)
	}
	req := helperRequest(t, "logsend")
	req.Env[logSendEnv] = strings.Join(specs, "\n")
	req.WorkDir = ws
	m := newManager(t)
	out := runSandboxed(t, m, req).Text
	for _, s := range socks {
		if got := s.received(t); !strings.Contains(got, logLine) {
			t.Fatalf("control: %s without the sandbox: got %q (tree said %q), want the line", s.path, got, out)
		}
	}
	req.Sandbox = agentproc.WorkspaceSandbox(ws) // NetworkNone
	out = runSandboxed(t, m, req).Text
	for _, s := range socks {
		if got := s.received(t); got != "" || !strings.Contains(out, "denied "+s.name+": ") {
			t.Errorf("NetworkNone: %s got %q (tree said %q), want nothing and the write refused", s.name, got, out)
		}
	}
}
