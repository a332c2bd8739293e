package agentproc_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/internal/testuser"
)

// logSendEnv tells the "logsend" helper the log sockets to write to, one
// a line, each as KIND:PATH (unixgram for syslog's and journald's
// datagram sockets, unix for journald's stream socket).
const logSendEnv = "AGENTPROC_TEST_LOGSEND"

// logLine is what the "logsend" helper writes to each socket: a syslog
// line (a forwarder sends it to its log server as it is).
const logLine = "<13>agentproc-atk16r: LEFT-THE-TREE"

func init() {
	// logsend writes logLine to each socket logSendEnv names and prints
	// "sent PATH" or "denied PATH: ERR" for each.
	agentproc.RegisterHelper("logsend", helperLogSend, false)
}

func helperLogSend() int {
	for spec := range strings.SplitSeq(os.Getenv(logSendEnv), "\n") {
		kind, p, _ := strings.Cut(spec, ":")
		c, err := net.DialTimeout(kind, p, 5*time.Second)
		if err == nil {
			_, err = c.Write([]byte(logLine + "\n"))
			err = errors.Join(err, c.Close())
		}
		if err != nil {
			fmt.Printf("denied %s: %v\n", p, err)
			continue
		}
		fmt.Printf("sent %s\n", p)
	}
	return 0
}

// logSocket is a stand-in for one of the host's log sockets: what a tree
// writes there is what a forwarding syslog daemon or journal uploader
// carries off the host.
type logSocket struct {
	kind, path string
	name       string // what the tree writes to: path, or a link to it
	gram       *net.UnixConn
	stream     *net.UnixListener
}

// listenLogSocket listens on p (kind unixgram or unix) where this host
// has nothing, making the directories of dirs that are missing; all are
// removed at cleanup. It returns nil where p exists (the host's own: left
// alone).
func listenLogSocket(t *testing.T, kind, p string, dirs []string) *logSocket {
	t.Helper()
	if _, err := os.Lstat(p); err == nil {
		return nil
	}
	for _, dir := range dirs {
		if _, err := os.Lstat(dir); err == nil {
			continue
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Remove(dir) })
	}
	s := &logSocket{kind: kind, path: p, name: p}
	addr := &net.UnixAddr{Name: p, Net: kind}
	var err error
	if kind == "unixgram" {
		s.gram, err = net.ListenUnixgram(kind, addr)
	} else {
		s.stream, err = net.ListenUnix(kind, addr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o666); err != nil { // as journald's and rsyslog's are
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s.gram != nil {
			_ = s.gram.Close()
		} else {
			_ = s.stream.Close()
		}
		_ = os.Remove(p)
	})
	return s
}

// received returns what reached s since the last call. Called after the
// tree's Wait: a datagram is queued by the sender's write, a stream
// connection sits in the backlog with its data, so a deadline of a few
// milliseconds only ends the read of what is already there.
func (s *logSocket) received(t *testing.T) string {
	t.Helper()
	var got strings.Builder
	buf := make([]byte, 4096)
	if s.gram != nil {
		for {
			_ = s.gram.SetReadDeadline(time.Now().Add(5 * time.Millisecond))
			n, err := s.gram.Read(buf)
			if err != nil {
				return got.String()
			}
			got.Write(buf[:n])
		}
	}
	for {
		_ = s.stream.SetDeadline(time.Now().Add(5 * time.Millisecond))
		c, err := s.stream.Accept()
		if err != nil {
			return got.String()
		}
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		for {
			n, err := c.Read(buf)
			got.Write(buf[:n])
			if err != nil {
				break
			}
		}
		_ = c.Close()
	}
}

// TestAttackLogSocketsCarryOff: a NetworkNone tree (root) writes a line
// to the host's syslog socket (/dev/log) and to journald's (the native
// and the stream socket, and the syslog socket journald forwards to a
// syslog daemon through). Where the host forwards its logs (rsyslog's
// "*.* @@logs:514", systemd-journal-upload, a Fluent Bit or Vector
// agent, the rule on most managed fleets) that line leaves the host: a
// way out for a tree that has no network. Stand-ins here: this host runs
// neither syslog nor journald.
func TestAttackLogSocketsCarryOff(t *testing.T) {
	requireRootSandbox(t)
	ws := t.TempDir()
	journal := []string{"/run/systemd", "/run/systemd/journal"}
	// /dev/log as a link to a syslog daemon's socket elsewhere (on
	// systemd hosts it links to journald's dev-log).
	var devLog *logSocket
	if _, err := os.Lstat("/dev/log"); err != nil {
		devLog = listenLogSocket(t, "unixgram", "/run/agentproc-atk16r-syslog/log", []string{"/run/agentproc-atk16r-syslog"})
		if err := os.Symlink(devLog.path, "/dev/log"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Remove("/dev/log") })
		devLog.name = "/dev/log"
	}
	var socks []*logSocket
	for _, s := range []*logSocket{
		devLog,
		listenLogSocket(t, "unixgram", "/run/systemd/journal/socket", journal),
		listenLogSocket(t, "unixgram", "/run/systemd/journal/dev-log", journal),
		listenLogSocket(t, "unixgram", "/run/systemd/journal/syslog", journal),
		listenLogSocket(t, "unix", "/run/systemd/journal/stdout", journal),
	} {
		if s != nil {
			socks = append(socks, s)
		}
	}
	if len(socks) == 0 {
		t.Skip("this host has its own log sockets: not replaced")
	}
	var specs []string
	for _, s := range socks {
		specs = append(specs, s.kind+":"+s.name)
	}
	req := helperRequest(t, "logsend")
	req.Env[logSendEnv] = strings.Join(specs, "\n")
	req.WorkDir = ws

	out := runSandboxed(t, newManager(t), req).Text
	for _, s := range socks {
		if got := s.received(t); !strings.Contains(got, logLine) {
			t.Fatalf("control: %s without the sandbox: got %q (tree said %q), want the line", s.path, got, out)
		}
	}
	// One Manager, a policy per request, as a server's clients narrow it.
	// NetworkLoopback, NetworkPorts and NetworkHosts take the same cover
	// (any network but NetworkHost); left out for the test's time, a
	// resolve each.
	m := newManager(t)
	sb := agentproc.WorkspaceSandbox(ws) // NetworkNone
	req.Sandbox = sb
	out = runSandboxed(t, m, req).Text
	for _, s := range socks {
		if got := s.received(t); got != "" || !strings.Contains(out, "denied "+s.name+": ") {
			t.Errorf("NetworkNone: %s got %q (tree said %q), want nothing and the write refused", s.name, got, out)
		}
	}
	// NetworkHost gives the tree the network: its logs are its own.
	sb = agentproc.WorkspaceSandbox(ws)
	sb.Network = agentproc.NetworkHost
	req.Sandbox = sb
	runSandboxed(t, m, req)
	for _, s := range socks {
		if got := s.received(t); !strings.Contains(got, logLine) {
			t.Errorf("NetworkHost: %s got %q, want the line (the tree has the network)", s.path, got)
		}
	}
}

// TestAttackHiddenPathFUSEView: a FUSE file system that shows a
// directory elsewhere (bindfs, as Vagrant's and many a container setup's
// uid mapping uses: bindfs /data/home /home) shows a hidden path at a
// second name whose inodes are the FUSE file system's, served by a daemon
// that reads the first name unconfined. Neither a bind's device match nor
// Landlock's rules on the hidden inodes reach them. Both directions: the
// home shown elsewhere (the key read at the view), and the home itself a
// view (the key read at the source). TestAttack16rUnprivileged runs it
// again as the unprivileged user, on a view root makes.
func TestAttackHiddenPathFUSEView(t *testing.T) {
	requireSandbox(t)
	src, view := os.Getenv(fuseSrcEnv), os.Getenv(fuseViewEnv)
	if src == "" {
		if os.Geteuid() != 0 {
			t.Skip("the FUSE mount needs root: TestAttack16rUnprivileged makes it and runs this as " + sandboxUser)
		}
		src, view = makeFUSEView(t, 0, 0)
	}
	for _, c := range []struct{ home, other string }{{src, view}, {view, src}} {
		t.Setenv("HOME", c.home)
		ws := filepath.Join(c.home, "project")
		names := []string{filepath.Join(c.home, ".ssh", "id_ed25519"), filepath.Join(c.other, ".ssh", "id_ed25519")}
		cmd := ""
		for _, n := range names {
			cmd += "echo " + shellQuote(n) + ": $(cat " + shellQuote(n) + " 2>&1); "
		}
		req := agentproc.Request{Command: cmd, WorkDir: ws, Timeout: time.Minute}
		if ctl := runSandboxed(t, newManager(t, agentproc.WithRedaction(false)), req).Text; strings.Count(ctl, "FUSE-VIEW-KEY") != len(names) {
			t.Fatalf("control, home %s: got %q, want the key read at both names", c.home, ctl)
		}
		out := runSandboxed(t, newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws))), req).Text
		for line := range strings.Lines(out) {
			if strings.Contains(line, "FUSE-VIEW-KEY") {
				t.Errorf("home %s: a hidden key was read through a FUSE view: got %q, want it refused at both names", c.home, strings.TrimSpace(line))
			}
		}
	}
}

// fuseSrcEnv and fuseViewEnv carry, for the unprivileged re-run, the
// home makeFUSEView made and its view.
const (
	fuseSrcEnv  = "AGENTPROC_ATK16R_FUSE_SRC"
	fuseViewEnv = "AGENTPROC_ATK16R_FUSE_VIEW"
)

// makeFUSEView makes, as root, a home (src) with a key at
// .ssh/id_ed25519 and a project directory, uid's and gid's, and shows it
// at view with bindfs; Cleanup unmounts it. It skips t without bindfs.
func makeFUSEView(t *testing.T, uid, gid int) (src, view string) {
	t.Helper()
	bindfs, err := exec.LookPath("bindfs")
	if err != nil {
		t.Skip("needs bindfs (the bindfs package)")
	}
	// Not t.TempDir: the unprivileged re-run must reach it, and the
	// test's own directory is root's 0700.
	dir, err := os.MkdirTemp("", "agentproc-fuse-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, view = filepath.Join(dir, "src"), filepath.Join(dir, "view")
	key := filepath.Join(src, ".ssh", "id_ed25519")
	for _, d := range []string{filepath.Join(src, ".ssh"), filepath.Join(src, "project"), view} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(key, []byte("FUSE-VIEW-KEY\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{src, filepath.Join(src, ".ssh"), filepath.Join(src, "project"), key, view} {
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command(bindfs, src, view).CombinedOutput(); err != nil {
		t.Skipf("bindfs %s %s: %v: %s", src, view, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("fusermount", "-u", view).CombinedOutput(); err != nil {
			t.Errorf("fusermount -u %s: %v: %s", view, err, out)
		}
	})
	return src, view
}

// TestAttack16rUnprivileged re-runs TestAttackHiddenPathFUSEView as the
// unprivileged user, Landlock and seccomp alone, on a view root makes.
func TestAttack16rUnprivileged(t *testing.T) {
	requireSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount the view and switch users")
	}
	u, err := user.Lookup(sandboxUser)
	if err != nil {
		t.Skipf("no user %s: %v", sandboxUser, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	src, view := makeFUSEView(t, uid, gid)
	const test = "TestAttackHiddenPathFUSEView"
	out, err := testuser.Run(t, time.Minute, []string{fuseSrcEnv + "=" + src, fuseViewEnv + "=" + view}, "-test.run=^"+test+"$")
	if err != nil {
		t.Fatalf("as %s: %v\n%s", sandboxUser, err, out)
	}
	if !strings.Contains(out, "--- PASS: "+test+" ") {
		t.Errorf("as %s: got no PASS line for %s, want one\n%s", sandboxUser, test, out)
	}
}

// TestAttackNameServiceDoors: the name services that ask a directory
// server for what they are not sure of, each through a socket any uid may
// use: sssd's NSS responder (mode 0666), winbindd's pipe and nslcd's
// socket. A NetworkNone tree's `getent passwd CHOSEN` sends CHOSEN to
// the domain's server (an LDAP filter, an RPC), as nscd's and resolved's
// sockets did before they were listed (TestAttackRootDaemonDoors,
// TestAttackSystemdVarlinkDoors). Stand-ins: none of these runs here.
func TestAttackNameServiceDoors(t *testing.T) {
	requireRootSandbox(t)
	requireDoorsShut(t, t.TempDir(), map[string][]string{
		"/var/lib/sss/pipes/nss":   {"/var/lib/sss", "/var/lib/sss/pipes"},
		"/run/samba/winbindd/pipe": {"/run/samba", "/run/samba/winbindd"},
		"/run/nslcd/socket":        {"/run/nslcd"},
	})
}

// TestAttackWirelessControlDoors: wpa_supplicant's and hostapd's control
// sockets (ctrl_interface=/run/wpa_supplicant, Debian's and Ubuntu's
// wpa_supplicant under NetworkManager among them; hostapd's
// /run/hostapd) take any command from a peer that may connect, root as
// their owner: a NetworkNone tree adds a network and enables it (the
// host joins the tree's access point, or leaves its own), and SET of a
// global such as pkcs11_module_path names a library the daemon loads as
// root for the next EAP-TLS network (the class of CVE-2024-5290, there
// through D-Bus). Stand-ins: neither runs here.
func TestAttackWirelessControlDoors(t *testing.T) {
	requireRootSandbox(t)
	requireDoorsShut(t, t.TempDir(), map[string][]string{
		"/run/wpa_supplicant/wlan0": {"/run/wpa_supplicant"},
		"/run/hostapd/wlan0":        {"/run/hostapd"},
	})
}

// TestAttackRootServiceControlDoors: servers' control sockets that serve
// a root peer as their administrator and change what the host does on
// the network: HAProxy's admin socket (Debian's stock haproxy.cfg:
// /run/haproxy/admin.sock, "level admin"; "set server B/S addr" sends the
// host's users' traffic elsewhere), strongSwan's VICI and stroke sockets
// (load and start a tunnel: the host's routes), dhcpcd's (release,
// rebind: the host off its network). Stand-ins: none runs here.
func TestAttackRootServiceControlDoors(t *testing.T) {
	requireRootSandbox(t)
	requireDoorsShut(t, t.TempDir(), map[string][]string{
		"/run/haproxy/admin.sock":     {"/run/haproxy"},
		"/run/charon.vici":            nil,
		"/run/charon.ctl":             nil,
		"/run/strongswan/charon.vici": {"/run/strongswan"},
		"/run/dhcpcd/sock":            {"/run/dhcpcd"},
		"/run/dhcpcd.sock":            nil,
	})
}

// TestAttackEndpointAgentDoors: osquery's extension socket, which fleets
// of managed hosts run (osqueryd's /var/osquery/osquery.em, Fleet's
// orbit's /opt/orbit/orbit-osquery.em, Kolide's launcher's under
// /var/kolide-k2), takes a Thrift query call from a peer that may
// connect, root as its owner: SQL that osqueryd runs as root, whose
// tables read files as root, outside the tree's view (augeas, yara), and
// reach the network (curl), for a NetworkNone tree. The
// directories also hold the agents' enrollment secrets. Stand-ins: none
// runs here.
func TestAttackEndpointAgentDoors(t *testing.T) {
	requireRootSandbox(t)
	requireDoorsShut(t, t.TempDir(), map[string][]string{
		"/var/osquery/osquery.em":                         {"/var/osquery"},
		"/opt/orbit/orbit-osquery.em":                     {"/opt/orbit"},
		"/var/kolide-k2/k2device.kolide.com/osquery.sock": {"/var/kolide-k2", "/var/kolide-k2/k2device.kolide.com"},
	})
}

// TestAttackRootAgentSecrets: the identities of the agents a server runs
// as root, root's 0600, which a root tree owns and read: a Cloudflare
// Tunnel's credentials (`cloudflared service install` keeps them in
// /etc/cloudflared: whoever holds them serves the tunnel's hostnames), a
// Teleport node's keys and certificates and its join token (the node's
// identity to the cluster), and a Wazuh or OSSEC agent's key (the agent's
// identity to its manager).
func TestAttackRootAgentSecrets(t *testing.T) {
	requireRootSandbox(t)
	system := map[string]string{}
	for i, p := range []string{"/etc/cloudflared/6d2b-tunnel.json", "/var/lib/teleport/proc/host.key",
		"/etc/teleport.yaml", "/var/ossec/etc/client.keys"} {
		system[p] = fmt.Sprintf("ROOT-AGENT-SECRET-%d\n", i)
	}
	secrets := map[string]string{}
	for _, p := range makeHostFiles(t, system) {
		secrets[p] = system[p]
	}
	requireHiddenFromRoot(t, t.TempDir(), secrets)
}
