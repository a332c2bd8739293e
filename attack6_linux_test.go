package agentproc_test

import (
	"bytes"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/internal/egress"
)

// Tests of the sixth attack review: docs/sandbox-threats.md, "Sixth attack
// review".

// TestAttackDeviceMadeBeforeRemake: as root a policy's Landlock ruleset
// leaves out the host's devices (confine.HostDevices, a list read when
// the policy is built) and grants /dev entry by entry, so that a device
// made later has no rule. But the shared ruleset is made again every 512
// own-dir rules (confine.LandlockShared), and that making granted /dev's
// entries as they were then, less the list of the build: a block device
// made between the build and the remaking (a loop device losetup adds, a
// disk plugged in) was readable from then on, by the tree's uid 0, the
// device's owner. Now the making of the rules leaves out every host device
// it meets, whatever the list says. The controls: the host reads the
// secret through the device; a tree before the remaking is refused it; and
// a file made after the build, in a directory above a hidden path, shows
// when the remaking has happened.
func TestAttackDeviceMadeBeforeRemake(t *testing.T) {
	requireRootSandbox(t)
	if testing.Short() {
		t.Skip("600 sandboxed Starts")
	}
	ws, key, _ := sandboxWorkspace(t)
	const secret = "HIDDEN-ON-DISK-3f9a"
	_, loop := hiddenDiskLoop(t, key, secret)
	var st unix.Stat_t
	if err := unix.Stat(loop, &st); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)), agentproc.WithRedaction(false))
	runSandboxed(t, m, agentproc.Request{WorkDir: ws, Command: "true"}) // the policy built

	// A device made after the build: a node of the same loop device, as
	// losetup makes /dev/loop8 when loop0-7 are taken.
	dev := "/dev/agentproc-atk6-" + strconv.Itoa(os.Getpid())
	if err := unix.Mknod(dev, unix.S_IFBLK|0o600, int(st.Rdev)); err != nil {
		t.Skipf("mknod %s: %v", dev, err)
	}
	t.Cleanup(func() { _ = os.Remove(dev) })
	if b, err := os.ReadFile(dev); err != nil || !bytes.Contains(b, []byte(secret)) {
		t.Fatalf("control: the host read %d bytes of %s (err %v), want the secret in them", len(b), dev, err)
	}
	// A file made after the build, next to a hidden one: granted from the
	// remaking on, which it tells.
	later := filepath.Join(filepath.Dir(filepath.Dir(key)), "later")
	if err := os.WriteFile(later, []byte("REMADE\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := "cat " + shellQuote(later) + " 2>/dev/null; grep -a -o " + secret + " " + dev + " 2>/dev/null; true"
	if o := runSandboxed(t, m, agentproc.Request{WorkDir: ws, Command: cmd}); strings.Contains(o.Text, secret) || strings.Contains(o.Text, "REMADE") {
		t.Fatalf("control: before the remaking the tree read %q, want neither the later file nor the device", o.Text)
	}
	remade := false
	for i := 0; i < 600 && !remade; i++ {
		o := runSandboxed(t, m, agentproc.Request{WorkDir: ws, Command: cmd})
		remade = strings.Contains(o.Text, "REMADE")
		if strings.Contains(o.Text, secret) {
			t.Fatalf("Start %d: the tree read the disk through %s, a device made after the policy's build: output %q, want it refused", i+2, dev, o.Text)
		}
	}
	if !remade {
		t.Fatal("control: after 600 Starts the later file was still refused; want the ruleset made again (every 512 own-dir rules)")
	}
}

// TestAttackNAT64LocalPrefixLengths: the fifth review judged an address in
// the local-use NAT64 prefix 64:ff9b:1::/48 (RFC 8215) by its last 32
// bits, as in the well-known /96. But operators carve /48, /56 and /64
// prefixes out of it too, which carry the IPv4 address elsewhere (RFC
// 6052, 2.2): through a /64 gateway 64:ff9b:1:0:a:0:500:0 reaches
// 10.0.0.5, and the filter read 5.0.0.0, a public address, and dialled it
// for a name the list allows (an attacker's DNS answers it). Each place
// is judged now. The controls: the IPv4 addresses are refused as they
// are, and the /96 forms of the fifth review still are.
func TestAttackNAT64LocalPrefixLengths(t *testing.T) {
	own := netip.MustParseAddr("203.0.113.7")
	f := &egress.AddrFilter{LocalAddrs: func() ([]netip.Addr, error) { return []netip.Addr{own}, nil }}
	list, err := egress.ParseList([]string{"attacker.example"})
	if err != nil {
		t.Fatal(err)
	}
	// embed puts v4 into 64:ff9b:1::/48 as a gateway with prefix length n
	// reads it, leaving the bits 64–71 out and the suffix zero.
	embed := func(v4 string, n int) netip.Addr {
		b := netip.MustParseAddr("64:ff9b:1::").As16()
		v := netip.MustParseAddr(v4).As4()
		at := n / 8
		for _, x := range v {
			if at == 8 {
				at++
			}
			b[at] = x
			at++
		}
		return netip.AddrFrom16(b)
	}
	for _, v4 := range []string{"10.0.0.5", "192.168.1.1", "203.0.113.7", "172.16.9.9"} {
		if r := f.Check(netip.MustParseAddr(v4), list); r == "" {
			t.Fatalf("control: %s is dialled for a name the list allows; want it refused", v4)
		}
		for _, n := range []int{48, 56, 64, 96} {
			a := embed(v4, n)
			if r := f.Check(a, list); r == "" {
				t.Errorf("%s (%s through a /%d local-use NAT64 prefix) is dialled for a name the list allows; want it refused as %s is", a, v4, n, v4)
			}
		}
	}
	// A public address through the local-use /96 and /64 is still dialled.
	for _, n := range []int{64, 96} {
		if a := embed("8.8.8.8", n); f.Check(a, list) != "" {
			t.Errorf("%s (8.8.8.8 through /%d): refused (%s); want it dialled", a, n, f.Check(a, list))
		}
	}
}

// TestAttackRootUserManagerDoor: as root the doors of the Manager's own
// user session were covered under $XDG_RUNTIME_DIR only, which a root
// service, `sudo` (env_reset) and cron do not set; yet where root has a
// login session, /run/user/0 holds its user manager's sockets:
// systemd's private socket and the session bus take any uid-0 peer, and
// `systemd-run --user` then runs a command as root outside the sandbox
// (gpg-agent's sockets beside them sign with root's keys). Other users'
// runtime dirs are closed to a root tree by their mode (0700, and the
// tree has no CAP_DAC_OVERRIDE); root's own is not. Now the doors under
// /run/user/UID are covered whatever the environment says. The control:
// each socket is reached unconfined.
func TestAttackRootUserManagerDoor(t *testing.T) {
	requireRootSandbox(t)
	t.Setenv("XDG_RUNTIME_DIR", "")
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "")
	ws := t.TempDir()
	// before's first Start is made before the doors, after's after.
	before := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	runSandboxed(t, before, agentproc.Request{Command: "true", WorkDir: ws})
	run := "/run/user/" + strconv.Itoa(os.Getuid())
	socks := map[string][]string{}
	for _, p := range []string{run + "/systemd/private", run + "/bus", run + "/gnupg/S.gpg-agent"} {
		socks[p] = []string{"/run/user", run, filepath.Dir(p)}
	}
	made := makeDoors(t, socks, 0o700)
	after := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	probeDoors(t, ws, made, newManager(t), before, after)
}

// TestAttackDoorMadeWhileTreeWaits: as root a door (a root daemon's
// socket, hostDoors) that appears or is made again while a tree runs (the
// daemon started or its socket unit restarted after the Manager's first
// Start; /run/user/0 when root logs in) is covered by the live repair a
// moment after it appears. Landlock leaves a hidden file out below its
// cover, so a tree that waits for a file reads nothing in that moment
// (third attack review), but Landlock (to ABI 7) does not govern connect
// on a Unix socket: a tree that tries to connect in a loop reached the
// socket before its cover in 3 of 10 runs here, and keeps the connection
// after the cover lands. Not fixed: the cure is Landlock's RESOLVE_UNIX or
// a tree that runs as a user of its own (docs/sandbox-threats.md, sixth
// review). The control: the same socket, made before the Start, is
// refused (TestAttackRootDaemonDoors).
func TestAttackDoorMadeWhileTreeWaits(t *testing.T) {
	t.Skip("escape found by attack review, not fixed: a door socket made while a tree runs is reached before the live repair covers it")
	requireRootSandbox(t)
	const p = "/run/snapd.socket"
	if _, err := os.Lstat(p); err == nil {
		t.Skip("this host has " + p + ": left alone")
	}
	ws := t.TempDir()
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	py := "import socket, time\n" +
		"print('waiting', flush=True)\n" +
		"end = time.time() + 2\n" +
		"while time.time() < end:\n" +
		"  s = socket.socket(socket.AF_UNIX)\n" +
		"  try:\n" +
		"    s.connect('" + p + "'); print('reached', flush=True); break\n" +
		"  except OSError:\n" +
		"    s.close()\n"
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	reached := 0
	for range 10 {
		proc := mustStart(t, m, agentproc.Request{WorkDir: ws, Command: "python3 -c " + shellQuote(py)})
		waitForOutput(t, proc, regexp.MustCompile("waiting"))
		l, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		serveEach(t, l, func(net.Conn) string { return "" })
		mustWait(t, proc)
		_ = l.Close()
		_ = os.Remove(p)
		if strings.Contains(proc.Output().Text, "reached") {
			reached++
		}
	}
	if reached > 0 {
		t.Errorf("a tree connected to %s, made while it waited, in %d of 10 runs; want it refused", p, reached)
	}
}
