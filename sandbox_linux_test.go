package agentproc_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/internal/testuser"
)

// probeEnv tells the "sandboxprobe" helper what to try: kind:argument.
const probeEnv = "AGENTPROC_TEST_PROBE"

func init() {
	// sandboxprobe tries one thing a confined model's command might (see
	// helperSandboxProbe) and prints "reached" and exits 0 when it worked,
	// "denied: ERR" and exits 1 when it did not.
	agentproc.RegisterHelper("sandboxprobe", helperSandboxProbe, false)
}

func helperSandboxProbe() int {
	kind, arg, _ := strings.Cut(os.Getenv(probeEnv), ":")
	err := sandboxProbe(kind, arg)
	if err != nil {
		fmt.Println("denied:", err)
		return 1
	}
	fmt.Println("reached")
	return 0
}

func sandboxProbe(kind, arg string) error {
	switch kind {
	case "tcp":
		c, err := net.DialTimeout("tcp", arg, 5*time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	case "mptcp":
		return rawConnect(unix.SOCK_STREAM, unix.IPPROTO_MPTCP, arg)
	case "udp":
		return rawConnect(unix.SOCK_DGRAM, 0, arg)
	case "abstract":
		c, err := net.DialTimeout("unix", "@"+arg, 5*time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	case "signal":
		pid, _ := strconv.Atoi(arg)
		return unix.Kill(pid, 0)
	case "setns":
		fd, err := unix.Open("/proc/"+arg+"/ns/net", unix.O_RDONLY, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Setns(fd, unix.CLONE_NEWNET)
	case "iouring":
		var params [120]byte
		fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params)), 0)
		if errno != 0 {
			return errno
		}
		return unix.Close(int(fd))
	case "socket":
		// socket:FAMILY/TYPE
		fam, typ, _ := strings.Cut(arg, "/")
		f, _ := strconv.Atoi(fam)
		ty, _ := strconv.Atoi(typ)
		fd, err := unix.Socket(f, ty|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		return unix.Close(fd)
	case "keyring":
		// Finds the key the host added to the user keyring under this
		// description and prints its payload.
		id, err := unix.KeyctlSearch(unix.KEY_SPEC_USER_KEYRING, "user", arg, 0)
		if err != nil {
			return fmt.Errorf("search: %w", err)
		}
		buf := make([]byte, 256)
		n, err := unix.KeyctlBuffer(unix.KEYCTL_READ, id, buf, 0)
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		fmt.Printf("key %q\n", buf[:min(n, len(buf))])
		return nil
	case "tiocsti":
		// Pushes a command into the terminal's input (the classic escape
		// on a shared terminal).
		for _, c := range []byte(arg) {
			if err := unix.IoctlSetPointerInt(0, unix.TIOCSTI, int(c)); err != nil {
				return err
			}
		}
		return nil
	case "listen":
		// listen(2) on an unbound TCP socket, which binds a port without
		// bind(2).
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("socket: %w", err)
		}
		defer unix.Close(fd)
		if err := unix.Listen(fd, 1); err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		sa, err := unix.Getsockname(fd)
		if err == nil {
			fmt.Println("listening on port", sa.(*unix.SockaddrInet4).Port)
		}
		return nil
	case "fastopen", "fastopenmsg", "fastopenconnect":
		return fastOpen(kind, arg)
	case "serve":
		// A server on the private loopback: answers "pong" to each
		// connection until killed.
		l, err := net.Listen("tcp", arg)
		if err != nil {
			return err
		}
		fmt.Println("listening")
		for {
			c, err := l.Accept()
			if err != nil {
				return err
			}
			_, _ = c.Write([]byte("pong\n"))
			_ = c.Close()
		}
	case "ping":
		c, err := net.DialTimeout("tcp", arg, 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return err
		}
		fmt.Print(line)
		return nil
	}
	return fmt.Errorf("unknown probe %q", kind)
}

// rawConnect makes an IPv4 socket of typ and proto and connects it to
// addr (and sends a byte, for UDP).
func rawConnect(typ, proto int, addr string) error {
	ap, err := net.ResolveTCPAddr("tcp4", addr)
	if err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_INET, typ, proto)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	sa := &unix.SockaddrInet4{Port: ap.Port}
	copy(sa.Addr[:], ap.IP.To4())
	if err := unix.Connect(fd, sa); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	if typ == unix.SOCK_DGRAM {
		if _, err := unix.Write(fd, []byte("x")); err != nil {
			return fmt.Errorf("send: %w", err)
		}
	}
	return nil
}

// fastOpen reaches addr by TCP Fast Open without connect(2): sendto or
// sendmsg with MSG_FASTOPEN, or connect after TCP_FASTOPEN_CONNECT (whose
// SYN leaves with the first write).
func fastOpen(kind, addr string) error {
	ap, err := net.ResolveTCPAddr("tcp4", addr)
	if err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	sa := &unix.SockaddrInet4{Port: ap.Port}
	copy(sa.Addr[:], ap.IP.To4())
	switch kind {
	case "fastopen":
		err = unix.Sendto(fd, []byte("x"), unix.MSG_FASTOPEN, sa)
	case "fastopenmsg":
		_, err = unix.SendmsgN(fd, []byte("x"), nil, sa, unix.MSG_FASTOPEN)
	default:
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_FASTOPEN_CONNECT, 1); err != nil {
			return fmt.Errorf("setsockopt: %w", err)
		}
		if err := unix.Connect(fd, sa); err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		_, err = unix.Write(fd, []byte("x"))
	}
	if err != nil {
		return fmt.Errorf("%s: %w", kind, err)
	}
	// The handshake is done when the send returns on a blocking socket.
	return nil
}

// probeRequest runs the probe helper with kind:arg in dir.
func probeRequest(t *testing.T, dir, kind, arg string) agentproc.Request {
	req := helperRequest(t, "sandboxprobe")
	req.Env[probeEnv] = kind + ":" + arg
	req.WorkDir = dir
	return req
}

// hostListeners are what the escape matrix tries to reach: a TCP and a UDP
// listener on the host's 127.0.0.1 and an abstract Unix socket. Each
// counts what reached it.
type hostListeners struct {
	tcp      net.Listener
	udp      net.PacketConn
	abstract net.Listener
	name     string
	reached  atomic.Int32
	wg       sync.WaitGroup
}

func listenHost(t *testing.T) *hostListeners {
	t.Helper()
	h := &hostListeners{name: "agentproc-test-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	var err error
	if h.tcp, err = net.Listen("tcp4", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if h.udp, err = net.ListenPacket("udp4", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if h.abstract, err = net.Listen("unix", "@"+h.name); err != nil {
		t.Fatal(err)
	}
	for _, l := range []net.Listener{h.tcp, h.abstract} {
		h.wg.Go(func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				h.reached.Add(1)
				_ = c.Close()
			}
		})
	}
	h.wg.Go(func() {
		buf := make([]byte, 16)
		for {
			if _, _, err := h.udp.ReadFrom(buf); err != nil {
				return
			}
			h.reached.Add(1)
		}
	})
	t.Cleanup(func() {
		_ = h.tcp.Close()
		_ = h.udp.Close()
		_ = h.abstract.Close()
		h.wg.Wait()
	})
	return h
}

// sandboxWorkspace makes a workspace with a .git/config and a home with a
// private key, points HOME at it, and puts a secret in the host's
// environment. It returns the workspace, the key's path and the secret.
func sandboxWorkspace(t *testing.T) (ws, key, secret string) {
	t.Helper()
	ws, home := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".git", "config"), []byte("[core]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	key = filepath.Join(home, ".ssh", "id_ed25519")
	if err := os.WriteFile(key, []byte("PRIVATE-KEY-MATERIAL\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	secret = "tok-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Setenv("AGENTPROC_TEST_API_TOKEN", secret)
	return ws, key, secret
}

func runSandboxed(t *testing.T, m *agentproc.Manager, req agentproc.Request) agentproc.Output {
	t.Helper()
	p := mustStart(t, m, req)
	mustWait(t, p)
	return p.Output()
}

// isRoot reports whether the sandbox has root's mechanisms here
// (namespaces, capabilities to drop).
func isRoot() bool { return hasNetwork(agentproc.NetworkLoopback) }

func hasNetwork(n agentproc.Network) bool {
	for _, have := range agentproc.SandboxSupport().Networks {
		if have == n {
			return true
		}
	}
	return false
}

func requireSandbox(t *testing.T) {
	t.Helper()
	if f := agentproc.SandboxSupport(); !f.Supported {
		t.Skipf("no sandbox here: %s", f)
	}
}

// TestSandboxEscapes is the escape matrix: each case is a command a model
// might run to reach beyond its workspace, and each must fail under
// WorkspaceSandbox, as root and not.
func TestSandboxEscapes(t *testing.T) {
	requireSandbox(t)
	ws, key, secret := sandboxWorkspace(t)
	outside := t.TempDir()
	host := listenHost(t)
	// Redaction off: a secret the sandbox let through must show, not be
	// masked by the output's redaction of the host's secret variables.
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)), agentproc.WithRedaction(false))
	hostPID := strconv.Itoa(os.Getpid())
	keyDesc, keyPayload := hostKey(t)
	shell := func(cmd string) agentproc.Request { return agentproc.Request{Command: cmd, WorkDir: ws} }
	prog := filepath.Join(outside, "prog") // TestSandboxMetadataOutsideWrite has the control
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}

	type escapeCase struct {
		name string
		req  agentproc.Request
		// leaked reports what got out, "" when nothing did.
		leaked func(out agentproc.Output) string
	}
	cases := []escapeCase{
		{"write outside the workspace", shell("echo x > " + shellQuote(filepath.Join(outside, "f"))), func(agentproc.Output) string {
			if _, err := os.Stat(filepath.Join(outside, "f")); err == nil {
				return "the file was written"
			}
			return ""
		}},
		{"read a hidden credential", shell("cat " + shellQuote(key)), containsLeak("PRIVATE-KEY-MATERIAL")},
		{"see a secret variable", shell("env; printenv AGENTPROC_TEST_API_TOKEN"), containsLeak(secret)},
		{"read the host's environ", shell("cat /proc/" + hostPID + "/environ"), containsLeak(secret)},
		{"read the host's maps", shell("head -c 200 /proc/" + hostPID + "/maps"), containsLeak(".test")},
		{"write .git/config", shell("echo '[core] fsmonitor = evil' >> .git/config"), func(agentproc.Output) string {
			b, _ := os.ReadFile(filepath.Join(ws, ".git", "config"))
			if strings.Contains(string(b), "evil") {
				return ".git/config changed"
			}
			return ""
		}},
		{"move out of the cgroup", shell("echo $$ > /sys/fs/cgroup/cgroup.procs"), nil},
		{"tcp to the host's loopback", probeRequest(t, ws, "tcp", host.tcp.Addr().String()), nil},
		{"mptcp to the host's loopback", probeRequest(t, ws, "mptcp", host.tcp.Addr().String()), nil},
		{"udp to the host's loopback", probeRequest(t, ws, "udp", host.udp.LocalAddr().String()), nil},
		{"abstract socket of the host", probeRequest(t, ws, "abstract", host.name), nil},
		{"signal the host", probeRequest(t, ws, "signal", hostPID), nil},
		{"setns into the host's network", probeRequest(t, ws, "setns", hostPID), nil},
		{"io_uring", probeRequest(t, ws, "iouring", ""), nil},
		{"chmod 4755 outside the workspace", fsProbeRequest(t, ws, "chmod-setuid", prog), func(agentproc.Output) string {
			if st, err := os.Stat(prog); err == nil && st.Mode()&os.ModeSetuid != 0 {
				return "the program outside became setuid"
			}
			return ""
		}},
		{"read the host's kernel keyring", probeRequest(t, ws, "keyring", keyDesc), containsLeak(keyPayload)},
		{"vsock socket", probeRequest(t, ws, "socket", familyArg(unix.AF_VSOCK, unix.SOCK_STREAM)), nil},
		{"smc socket", probeRequest(t, ws, "socket", familyArg(unix.AF_SMC, unix.SOCK_STREAM)), nil},
		{"netlink socket", probeRequest(t, ws, "socket", familyArg(unix.AF_NETLINK, unix.SOCK_RAW)), nil},
		{"packet socket", probeRequest(t, ws, "socket", familyArg(unix.AF_PACKET, unix.SOCK_DGRAM)), nil},
		{"push input into a terminal", tty(probeRequest(t, ws, "tiocsti", "id\n")), nil},
	}
	// The controls: each of these reaches what it tries without the
	// sandbox, so that its refusal below is the sandbox's doing. Those
	// marked false need what the kernel may not have (a family not built
	// in) or a privilege the user may lack (a packet socket needs
	// CAP_NET_RAW): not reaching unconfined is logged, not failed.
	controls := map[string]bool{
		"tcp to the host's loopback": true, "udp to the host's loopback": true,
		"read the host's kernel keyring": true, "netlink socket": true,
		"vsock socket": false, "smc socket": false, "packet socket": false,
		"push input into a terminal": false, // TIOCSTI needs CAP_SYS_ADMIN where dev.tty.legacy_tiocsti is 0
	}
	if keyDesc == "" {
		cases = slices.DeleteFunc(cases, func(c escapeCase) bool { return c.name == "read the host's kernel keyring" })
	}
	plain := newManager(t)
	for _, c := range cases {
		must, ok := controls[c.name]
		if !ok {
			continue
		}
		out := runSandboxed(t, plain, c.req)
		if reached := strings.Contains(out.Text, "reached"); !reached && must {
			t.Errorf("control %q without the sandbox: output %q, want reached", c.name, out.Text)
		} else if !reached {
			t.Logf("control %q without the sandbox does not reach here either: %q", c.name, out.Text)
		}
	}
	host.reached.Store(0) // the controls' connections
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := runSandboxed(t, m, c.req)
			t.Logf("exit %d: %q", exitCode(out.Info), out.Text)
			if c.name == "write .git/config" && !isRoot() {
				if !strings.Contains(strings.Join(out.Warnings, "\n"), "ReadOnly") {
					t.Errorf("without root, warnings %q do not say ReadOnly is not enforced", out.Warnings)
				}
				t.Skip("ReadOnly needs root (a mount namespace); without it the warning above is the contract")
			}
			if strings.HasPrefix(c.name, "chmod") && !isRoot() {
				t.Skip("metadata outside Write needs root (a read-only view); TestSandboxMetadataOutsideWrite checks the warning")
			}
			if exitCode(out.Info) == 0 {
				t.Errorf("exit code 0, want a failure; output %q", out.Text)
			}
			if strings.Contains(out.Text, "reached") {
				t.Errorf("output %q, want the probe denied", out.Text)
			}
			if c.leaked != nil {
				if what := c.leaked(out); what != "" {
					t.Errorf("escaped: %s (output %q)", what, out.Text)
				}
			}
		})
	}
	if n := host.reached.Load(); n != 0 {
		t.Errorf("the host's listeners were reached %d times, want 0", n)
	}
}

// familyArg is the "socket" probe's argument for a family and type.
func familyArg(family, typ int) string { return strconv.Itoa(family) + "/" + strconv.Itoa(typ) }

// tty gives req a terminal.
func tty(req agentproc.Request) agentproc.Request {
	req.TTY = &agentproc.TTYSize{Rows: 24, Cols: 80}
	return req
}

// hostKey adds a key to the user keyring of the test's user, as a host's
// tool might (a credential helper), and returns its description and
// payload; it is revoked at the end of the test.
func hostKey(t *testing.T) (desc, payload string) {
	t.Helper()
	stamp := strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	desc, payload = "agentproc-test-"+stamp, "KEY-MATERIAL-"+stamp
	id, err := unix.AddKey("user", desc, []byte(payload), unix.KEY_SPEC_USER_KEYRING)
	if err == unix.EPERM || err == unix.ENOSYS || err == unix.EACCES {
		// The host itself is refused the keyring (a container's seccomp
		// profile, a kernel without keys): nothing for a tree to read.
		t.Logf("the keyring case cannot be tried here: add_key: %v", err)
		return "", ""
	}
	if err != nil {
		t.Fatalf("add a key to the user keyring: %v", err)
	}
	t.Cleanup(func() {
		_, _ = unix.KeyctlInt(unix.KEYCTL_REVOKE, id, 0, 0, 0)
		_, _ = unix.KeyctlInt(unix.KEYCTL_UNLINK, id, unix.KEY_SPEC_USER_KEYRING, 0, 0)
	})
	return desc, payload
}

// TestSandboxRootHasNoCapabilities checks, as root, that the sandboxed
// shell (uid 0) holds no capability, has an empty bounding set (CapBnd),
// and gains none by running a program
// with file capabilities, which the kernel would otherwise grant: the
// program (a copy of cat given CAP_DAC_READ_SEARCH, CAP_SYS_PTRACE and
// CAP_SYS_ADMIN) either does not run or runs without them, and cannot
// read the host's /proc/PID/environ.
func TestSandboxRootHasNoCapabilities(t *testing.T) {
	requireSandbox(t)
	if !isRoot() {
		t.Skip("as root only: without root the shell has no capabilities to begin with, and file capabilities cannot be set")
	}
	ws, _, secret := sandboxWorkspace(t)
	cat, err := exec.LookPath("cat")
	if err != nil {
		t.Skip("no cat")
	}
	data, err := os.ReadFile(cat)
	if err != nil {
		t.Fatal(err)
	}
	capcat := filepath.Join(ws, "capcat")
	if err := os.WriteFile(capcat, data, 0o755); err != nil {
		t.Fatal(err)
	}
	// struct vfs_cap_data, revision 2, effective: permitted low and high
	// words, inheritable low and high words.
	const revision2, effective = 0x02000000, 0x1
	perm := uint64(1)<<unix.CAP_DAC_READ_SEARCH | 1<<unix.CAP_SYS_PTRACE | 1<<unix.CAP_SYS_ADMIN
	xattr := binary.LittleEndian.AppendUint32(nil, revision2|effective)
	xattr = binary.LittleEndian.AppendUint32(xattr, uint32(perm))
	xattr = binary.LittleEndian.AppendUint32(xattr, 0)
	xattr = binary.LittleEndian.AppendUint32(xattr, uint32(perm>>32))
	xattr = binary.LittleEndian.AppendUint32(xattr, 0)
	if err := unix.Setxattr(capcat, "security.capability", xattr, 0); err != nil {
		t.Skipf("cannot give %s file capabilities here: %v", capcat, err)
	}
	got := make([]byte, 64)
	if n, err := unix.Getxattr(capcat, "security.capability", got); err != nil || !bytes.Equal(got[:n], xattr) {
		t.Fatalf("file capabilities of %s: got %x (%v), want %x", capcat, got[:max(n, 0)], err, xattr)
	}
	// Redaction off: a secret the sandbox let through must show, not be
	// masked by the output's redaction of the host's secret variables.
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)), agentproc.WithRedaction(false))
	// The first two Starts of a policy confine a fresh thread; the next
	// one takes the spare thread made after the second, on which the
	// bounding set was emptied ahead (sandboxBuilt.start). Both must hold.
	checkNoCapabilities(t, m, ws, secret)
	// A spare whose goroutine landed on the main thread is not made
	// (makeReadyThread); the next Start makes another.
	for i := 0; ; i++ {
		checkNoCapabilities(t, m, ws, secret)
		if agentproc.SpareReady(m, 10*time.Second) {
			break
		}
		if i == 4 {
			t.Fatalf("no spare thread ready after %d sandboxed Starts in a row as root", i+2)
		}
	}
	before := agentproc.SpareStarts()
	checkNoCapabilities(t, m, ws, secret)
	if agentproc.SpareStarts() == before {
		t.Error("the third Start did not take the spare thread")
	}
}

// TestSandboxSpareConfinedAhead: after two Starts of a policy in a row the
// spare thread made for the next one is confined already (no_new_privs
// and the seccomp filter, besides the namespaces as root), so that the
// Start only forks; the tree it starts is as confined as one started on a
// fresh thread, and the spare's thread is gone after it. As root and
// without: without root too the spare now has steps to do ahead. Not
// parallel: it counts spare Starts process-wide.
func TestSandboxSpareConfinedAhead(t *testing.T) {
	requireSandbox(t)
	ws := t.TempDir()
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	req := agentproc.Request{Command: "grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status", WorkDir: ws}
	fresh := runSandboxed(t, m, req)
	// A spare whose goroutine landed on the main thread is not made
	// (makeReadyThread); the next Start makes another.
	for i := 0; ; i++ {
		runSandboxed(t, m, req)
		if agentproc.SpareReady(m, 10*time.Second) {
			break
		}
		if i == 4 {
			t.Fatalf("no spare thread ready after %d sandboxed Starts in a row", i+2)
		}
	}
	tid := agentproc.SpareThreadID(m)
	status := "/proc/self/task/" + strconv.Itoa(tid) + "/status"
	confined, err := threadConfined(t, status)
	if err != nil || confined != "NoNewPrivs: 1" {
		t.Errorf("spare thread %d before its Start: got %q (%v), want no_new_privs set ahead", tid, confined, err)
	}
	data, err := os.ReadFile(status)
	if err != nil {
		t.Fatal(err)
	}
	wantSeccomp := slices.Contains(fresh.Sandbox.Mechanisms, "seccomp")
	if got := strings.Contains(string(data), "Seccomp:\t2\n"); got != wantSeccomp {
		t.Errorf("spare thread %d has a seccomp filter: got %v, want %v (mechanisms %q)", tid, got, wantSeccomp, fresh.Sandbox.Mechanisms)
	}
	before := agentproc.SpareStarts()
	spared := runSandboxed(t, m, req)
	if agentproc.SpareStarts() == before {
		t.Error("the third Start did not take the spare thread")
	}
	if spared.Text != fresh.Text || exitCode(spared.Info) != 0 {
		t.Errorf("tree started from the spare thread: got %q (exit %d), want %q as from a fresh thread", spared.Text, exitCode(spared.Info), fresh.Text)
	}
	if !strings.Contains(fresh.Text, "NoNewPrivs:\t1") {
		t.Errorf("tree's status %q, want NoNewPrivs 1", fresh.Text)
	}
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(status); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("spare thread %d still there 10 s after its Start: a confined thread went back to the runtime", tid)
		}
		<-tick.C
	}
}

// TestSandboxSpareForkFilterInCgroup: the fork filter a spare thread
// installs ahead keeps clone3 for a Manager whose leaders are started in
// their cgroup v2 (CLONE_INTO_CGROUP), as the Start before was, so that
// the Start takes the spare and its leader is born in its cgroup. A
// spare made for the other case is not taken (sandboxBuilt.start). Not
// parallel: it counts spare Starts process-wide.
func TestSandboxSpareForkFilterInCgroup(t *testing.T) {
	requireSandbox(t)
	parent := cgroupParent(t)
	ws := t.TempDir()
	m := newManager(t, agentproc.WithCgroup(parent), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	req := agentproc.Request{Command: "cat /proc/self/cgroup", WorkDir: ws}
	runSandboxed(t, m, req)
	for i := 0; ; i++ {
		runSandboxed(t, m, req)
		if agentproc.SpareReady(m, 10*time.Second) {
			break
		}
		if i == 4 {
			t.Fatalf("no spare thread ready after %d sandboxed Starts in a row", i+2)
		}
	}
	before := agentproc.SpareStarts()
	out := runSandboxed(t, m, req)
	if agentproc.SpareStarts() == before {
		t.Error("a Start in its cgroup after two in theirs did not take the spare thread")
	}
	if exitCode(out.Info) != 0 || !strings.Contains(out.Text, "0::") {
		t.Errorf("tree started from the spare in its cgroup: exit %d, output %q, want 0 and its cgroup v2 line", exitCode(out.Info), out.Text)
	}
}

// TestSandboxSpareNotThrashed: Starts that take turns between two
// policies of one Manager each take a spare thread made for their policy
// (issue 38: NetworkNone and NetworkHosts from one Manager), from each
// policy's third Start on; Starts that cycle through more policies than
// the Manager keeps spares for throw none away unused. Not parallel: it
// counts spare threads made and taken process-wide.
func TestSandboxSpareNotThrashed(t *testing.T) {
	requireSandbox(t)
	a, b := t.TempDir(), t.TempDir()
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(a)))
	other := agentproc.WorkspaceSandbox(b)
	for i := range 4 {
		req := agentproc.Request{Command: "true", WorkDir: a}
		if i%2 == 1 {
			req = agentproc.Request{Command: "true", WorkDir: b, Sandbox: other}
		}
		runSandboxed(t, m, req)
	}
	// A spare whose goroutine landed on the main thread fails; the next
	// Start of its policy makes another.
	for i := 0; !sparesReady(m, 2, 10*time.Second); i++ {
		if i == 4 {
			t.Fatalf("spare threads ready after Starts that took turns between two policies: got %d, want 2", len(agentproc.SpareThreadIDs(m)))
		}
		runSandboxed(t, m, agentproc.Request{Command: "true", WorkDir: a})
		runSandboxed(t, m, agentproc.Request{Command: "true", WorkDir: b, Sandbox: other})
	}
	before := agentproc.SpareStarts()
	runSandboxed(t, m, agentproc.Request{Command: "true", WorkDir: a})
	runSandboxed(t, m, agentproc.Request{Command: "true", WorkDir: b, Sandbox: other})
	if n := agentproc.SpareStarts() - before; n != 2 {
		t.Errorf("Starts taking turns between two policies, each with its spare ready: got %d of 2 taking theirs, want 2", n)
	}

	// More policies in turn than spares are kept: every spare made is
	// taken or still waiting at the end, none thrown away unused.
	m2 := newManager(t)
	n := agentproc.MaxSpareThreads + 2
	sbs := make([]*agentproc.Sandbox, n)
	dirs := make([]string, n)
	for i := range sbs {
		dirs[i] = t.TempDir()
		sbs[i] = agentproc.WorkspaceSandbox(dirs[i])
	}
	made, taken := agentproc.SparesMade(), agentproc.SpareStarts()
	for range 4 {
		for i := range sbs {
			runSandboxed(t, m2, agentproc.Request{Command: "true", WorkDir: dirs[i], Sandbox: sbs[i]})
		}
	}
	// At most the kept ones, and one that landed on the main thread
	// (osthread.NewSpare fails it; the main thread is held after).
	wasted := (agentproc.SparesMade() - made) - (agentproc.SpareStarts() - taken)
	if wasted > int64(agentproc.MaxSpareThreads)+1 {
		t.Errorf("%d policies in turn, 4 rounds: spares made %d, taken %d: %d not taken, want at most the %d kept",
			n, agentproc.SparesMade()-made, agentproc.SpareStarts()-taken, wasted, agentproc.MaxSpareThreads)
	}
}

// sparesReady waits up to timeout until m has n spare threads ready, and
// reports whether it has.
func sparesReady(m *agentproc.Manager, n int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for len(agentproc.SpareThreadIDs(m)) < n {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}

// checkNoCapabilities runs the shell and ./capcat, a copy of cat with file
// capabilities in ws, under m's sandbox and checks that neither has any
// capability and that the host's environment stayed unread.
func checkNoCapabilities(t *testing.T, m *agentproc.Manager, ws, secret string) {
	t.Helper()
	out := runSandboxed(t, m, agentproc.Request{WorkDir: ws,
		Command: "grep ^Cap /proc/self/status; ./capcat /proc/self/status | grep ^Cap; ./capcat /proc/" + strconv.Itoa(os.Getpid()) + "/environ"})
	t.Logf("output %q", out.Text)
	if strings.Contains(out.Text, secret) {
		t.Errorf("the file-capability program read the host's environment")
	}
	n := 0
	for line := range strings.SplitSeq(out.Text, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(k, "Cap") {
			continue
		}
		n++
		if strings.Trim(v, "\t 0") != "" {
			t.Errorf("%s: got %s, want no capability", k, strings.TrimSpace(v))
		}
	}
	// The program's own sets when the kernel ran it; it may also refuse
	// to run it (EPERM: capabilities it cannot grant).
	if n != 10 && (n != 5 || !strings.Contains(out.Text, "capcat: Operation not permitted")) {
		t.Errorf("%d capability sets in the output, want the shell's and the program's, or the shell's and the program refused", n)
	}
}

func containsLeak(s string) func(agentproc.Output) string {
	return func(out agentproc.Output) string {
		if strings.Contains(out.Text, s) {
			return "output holds " + s
		}
		return ""
	}
}

// TestSandboxAllows checks what a confined command must still be able to
// do: work in its workspace, use its private TMPDIR (removed with the
// process), run git, and serve on the private loopback where WaitPort sees
// it and a second sandboxed process reaches it.
func TestSandboxAllows(t *testing.T) {
	requireSandbox(t)
	ws, _, _ := sandboxWorkspace(t)
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))

	out := runSandboxed(t, m, agentproc.Request{WorkDir: ws,
		Command: `echo hello > f && cat f && mkdir -p d && mv f d/g && cat d/g && rm -r d && echo "tmp=$TMPDIR" && echo build > "$TMPDIR/o" && cat "$TMPDIR/o" && echo x > /dev/null && echo done`})
	if exitCode(out.Info) != 0 || !strings.Contains(out.Text, "hello\nhello\n") || !strings.Contains(out.Text, "build\ndone") {
		t.Fatalf("exit %d, output %q; want the workspace and TMPDIR usable", exitCode(out.Info), out.Text)
	}
	if out.Sandbox == nil || out.Sandbox.TempDir == "" || !strings.Contains(out.Text, "tmp="+out.Sandbox.TempDir+"\n") {
		t.Fatalf("Info.Sandbox %+v, output %q: want TMPDIR to be the private temp dir", out.Sandbox, out.Text)
	}
	// Removed just after the exit is published; Close waits for that.
	defer func() {
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(out.Sandbox.TempDir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("temp dir after Close: stat error %v, want it removed", err)
		}
	}()
	if !strings.Contains(strings.Join(out.Sandbox.Mechanisms, ","), "landlock") {
		t.Errorf("mechanisms %q, want landlock among them", out.Sandbox.Mechanisms)
	}

	if _, err := exec.LookPath("git"); err == nil {
		if err := exec.Command("git", "-C", ws, "init", "-q").Run(); err != nil {
			t.Fatal(err)
		}
		out := runSandboxed(t, m, agentproc.Request{WorkDir: ws, Command: "git status --short && echo git-ok"})
		if exitCode(out.Info) != 0 || !strings.Contains(out.Text, "git-ok") {
			t.Errorf("git status: exit %d, output %q", exitCode(out.Info), out.Text)
		}
	} else {
		t.Log("git not installed: git status not tried")
	}

	t.Run("private loopback", func(t *testing.T) {
		lo := agentproc.WorkspaceSandbox(ws)
		lo.Network = agentproc.NetworkLoopback
		if !hasNetwork(agentproc.NetworkLoopback) {
			_, err := m.Start(testContext(t), agentproc.Request{Command: "true", WorkDir: ws, Sandbox: lo})
			if !errors.Is(err, agentproc.ErrUnsupported) || !strings.Contains(err.Error(), "Sandbox.Network") {
				t.Fatalf("NetworkLoopback without root: got %v, want ErrUnsupported naming Sandbox.Network", err)
			}
			t.Skip("NetworkLoopback needs root; refused as it must be")
		}
		port := freePort(t)
		addr := "127.0.0.1:" + strconv.Itoa(port)
		req := probeRequest(t, ws, "serve", addr)
		req.Sandbox = lo
		srv := mustStart(t, m, req)
		defer func() { _, _ = srv.Stop(testContext(t)) }()
		if _, err := srv.WaitPort(testContext(t), port); err != nil {
			t.Fatalf("WaitPort(%d) on the private loopback: %v", port, err)
		}
		ping := probeRequest(t, ws, "ping", addr)
		ping.Sandbox = lo
		out := runSandboxed(t, m, ping)
		if !strings.Contains(out.Text, "pong") {
			t.Errorf("second sandboxed process: output %q, want pong from the server", out.Text)
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = c.Close()
			// Something of the host's may hold the port; only fail when
			// it is not ours.
			t.Logf("the host reached %s: another listener there", addr)
		}
	})
}

// freePort returns a TCP port nothing on the host listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestSandboxFailClosed checks that a policy this host cannot enforce
// starts nothing and names the field, and that BestEffort runs it with
// the gap in Warnings.
func TestSandboxFailClosed(t *testing.T) {
	requireSandbox(t)
	ws := t.TempDir()
	marker := filepath.Join(ws, "ran")
	restore := agentproc.PretendSandboxHost(5, false, true) // no scopes, no root
	defer restore()
	m := newManager(t)
	sb := agentproc.WorkspaceSandbox(ws)
	_, err := m.Start(testContext(t), agentproc.Request{Command: "touch " + shellQuote(marker), WorkDir: ws, Sandbox: sb})
	if !errors.Is(err, agentproc.ErrUnsupported) || !strings.Contains(err.Error(), "Sandbox.Network") || !strings.Contains(err.Error(), "ABI 5") {
		t.Fatalf("Start on a host without Landlock scopes: got %v, want ErrUnsupported naming Sandbox.Network and ABI 5", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command ran although Start failed")
	}
	sb.BestEffort = true
	out := runSandboxed(t, m, agentproc.Request{Command: "touch " + shellQuote(marker), WorkDir: ws, Sandbox: sb})
	if exitCode(out.Info) != 0 {
		t.Fatalf("BestEffort: exit %d, output %q", exitCode(out.Info), out.Text)
	}
	if w := strings.Join(out.Warnings, "\n"); !strings.Contains(w, "Sandbox.Network") || !strings.Contains(w, "ReadOnly") {
		t.Errorf("BestEffort warnings %q, want the scopes and ReadOnly named", out.Warnings)
	}
	if out.Sandbox == nil || out.Sandbox.LandlockABI != 5 {
		t.Errorf("Info.Sandbox %+v, want Landlock ABI 5", out.Sandbox)
	}
}

// TestSandboxHostNeverConfined starts 1,000 sandboxed commands and then
// checks that no thread of the host carries no_new_privs or a seccomp
// filter, that its network namespace is the one it had, and that the
// throwaway threads did not pile up.
func TestSandboxHostNeverConfined(t *testing.T) {
	requireSandbox(t)
	ws := t.TempDir()
	nsBefore, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	threadsBefore := threadCount(t)
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	n := 1000
	if testing.Short() {
		n = 100
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	var failed atomic.Int32
	for range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			p, err := m.Start(testContext(t), agentproc.Request{Command: "true", WorkDir: ws})
			if err != nil {
				failed.Add(1)
				return
			}
			if info, err := p.Wait(testContext(t)); err != nil || exitCode(info) != 0 {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	if f := failed.Load(); f != 0 {
		t.Fatalf("%d of %d sandboxed starts failed", f, n)
	}
	tasks, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil {
		t.Fatal(err)
	}
	// A throwaway thread may still be on its way out when its Start has
	// returned (the goroutine hands back the result, then exits and the
	// runtime ends the thread): a confined thread must be gone within the
	// deadline.
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	spare := ""
	for _, status := range tasks {
		tid, _ := strconv.Atoi(filepath.Base(filepath.Dir(status)))
		for {
			confined, err := threadConfined(t, status)
			if err != nil || confined == "" {
				break // the thread exited, or is not confined
			}
			if tid == agentproc.SpareThreadID(m) {
				// The Manager's spare thread, confined ahead for the
				// next Start: it runs nothing else, and is thrown away
				// (checked below, after Close).
				spare = status
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s: %s, want 0: a host thread is confined", status, confined)
				break
			}
			<-tick.C
		}
	}
	if ns, _ := os.Readlink("/proc/self/ns/net"); ns != nsBefore {
		t.Errorf("network namespace %s after the starts, want %s", ns, nsBefore)
	}
	if spare != "" {
		// Close throws the spare thread away: its thread must go.
		if err := m.Close(); err != nil {
			t.Fatalf("Close: got %v, want nil", err)
		}
		for {
			if _, err := os.Stat(spare); err != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s: the confined spare thread outlived Close", spare)
				break
			}
			<-tick.C
		}
	}
	// The thread count too: exiting throwaway threads leave within the
	// same deadline (under make stress 20 of them were still leaving).
	for {
		after := threadCount(t)
		if after <= threadsBefore+16 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%d threads after %d starts, %d before: the throwaway threads were kept", after, n, threadsBefore)
			break
		}
		<-tick.C
	}
}

// threadConfined reads a thread's status file and names its NoNewPrivs or
// Seccomp field when one is not 0; an error means the thread is gone.
func threadConfined(t *testing.T, status string) (string, error) {
	t.Helper()
	b, err := os.ReadFile(status)
	if err != nil {
		return "", err
	}
	for _, field := range []string{"NoNewPrivs:\t", "Seccomp:\t"} {
		i := strings.Index(string(b), field)
		if i < 0 {
			t.Fatalf("%s has no %q", status, field)
		}
		if v := string(b[i+len(field)]); v != "0" {
			return strings.TrimSpace(field) + " " + v, nil
		}
	}
	return "", nil
}

func threadCount(t *testing.T) int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	return len(tasks)
}

// TestSandboxPorts checks NetworkPorts: TCP to an allowed port of the host
// works; TCP to another port, MPTCP to it (which Landlock's port rules do
// not see), UDP, a raw socket, TCP Fast Open (whose SYN leaves without
// connect(2), where Landlock's rule sits) and listen(2) on an unbound
// socket (which binds a port without bind(2)) do not. Each way is tried
// first without the sandbox, where it must reach (the controls).
func TestSandboxPorts(t *testing.T) {
	requireSandbox(t)
	if !hasNetwork(agentproc.NetworkPorts) {
		t.Skip("NetworkPorts needs Landlock ABI 4 and seccomp")
	}
	requireFastOpenClient(t)
	ws := t.TempDir()
	allowed, other, ctl := listenHost(t), listenHost(t), listenHost(t)
	sb := agentproc.WorkspaceSandbox(ws)
	sb.Network = agentproc.NetworkPorts
	sb.AllowPorts = []int{allowed.tcp.Addr().(*net.TCPAddr).Port}
	m := newManager(t, agentproc.WithSandbox(sb))
	plain := newManager(t)
	for _, kind := range []string{"tcp", "mptcp", "udp", "fastopen", "fastopenmsg", "fastopenconnect", "listen"} {
		addr := ctl.tcp.Addr().String()
		if kind == "udp" {
			addr = ctl.udp.LocalAddr().String()
		}
		before := ctl.reached.Load()
		out := runSandboxed(t, plain, probeRequest(t, ws, kind, addr))
		if !strings.Contains(out.Text, "reached") {
			t.Errorf("control: %s to %s without the sandbox: output %q, want reached", kind, addr, out.Text)
		}
		if kind == "fastopen" || kind == "fastopenmsg" {
			// Reached means the host accepted it; the counter may lag.
			waitFor(t, func() bool { return ctl.reached.Load() > before }, "the control's Fast Open connection to reach the host")
		}
	}
	for _, c := range []struct {
		kind, addr string
		reach      bool
	}{
		{"tcp", allowed.tcp.Addr().String(), true},
		// Names still resolve without netlink (Go reads /etc/hosts).
		{"tcp", "localhost:" + strconv.Itoa(allowed.tcp.Addr().(*net.TCPAddr).Port), true},
		{"tcp", other.tcp.Addr().String(), false},
		{"mptcp", other.tcp.Addr().String(), false},
		{"udp", other.udp.LocalAddr().String(), false},
		{"fastopen", other.tcp.Addr().String(), false},
		{"fastopenmsg", other.tcp.Addr().String(), false},
		{"fastopenconnect", other.tcp.Addr().String(), false},
		{"fastopen", allowed.tcp.Addr().String(), false}, // refused outright, not checked by port
		{"listen", "", false},
		{"socket", familyArg(unix.AF_INET, unix.SOCK_RAW), false},
		{"socket", familyArg(unix.AF_PACKET, unix.SOCK_DGRAM), false},
		{"socket", familyArg(unix.AF_VSOCK, unix.SOCK_STREAM), false},
		{"socket", familyArg(unix.AF_NETLINK, unix.SOCK_RAW), false},
	} {
		out := runSandboxed(t, m, probeRequest(t, ws, c.kind, c.addr))
		if got := strings.Contains(out.Text, "reached"); got != c.reach {
			t.Errorf("%s to %s: output %q, want reached=%v", c.kind, c.addr, out.Text, c.reach)
		}
	}
	// glibc's getaddrinfo, which asks netlink for the host's addresses
	// (AI_ADDRCONFIG) and assumes both families when it cannot.
	if _, err := exec.LookPath("getent"); err == nil {
		out := runSandboxed(t, m, agentproc.Request{Command: "getent ahosts localhost", WorkDir: ws})
		if exitCode(out.Info) != 0 || !strings.Contains(out.Text, "127.0.0.1") {
			t.Errorf("getent ahosts localhost: exit %d, output %q; want 127.0.0.1 resolved", exitCode(out.Info), out.Text)
		}
	}
	if n := other.reached.Load(); n != 0 {
		t.Errorf("the listeners on ports not allowed were reached %d times, want 0", n)
	}
}

// requireFastOpenClient makes sure the kernel lets clients use TCP Fast
// Open (bit 1 of net.ipv4.tcp_fastopen, on by default), so that the
// controls reach: as root it sets the bit for the test and restores the
// value after; without root and without the bit it skips.
func requireFastOpenClient(t *testing.T) {
	t.Helper()
	const knob = "/proc/sys/net/ipv4/tcp_fastopen"
	b, err := os.ReadFile(knob)
	if err != nil {
		t.Skipf("no %s: %v", knob, err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %q", knob, b)
	}
	if v&1 != 0 {
		return
	}
	if err := os.WriteFile(knob, []byte(strconv.Itoa(v|1)), 0); err != nil {
		t.Skipf("TCP Fast Open is off for clients here (%s is %d) and cannot be turned on: %v", knob, v, err)
	}
	t.Cleanup(func() { _ = os.WriteFile(knob, []byte(strconv.Itoa(v)), 0) })
}

// waitFor waits until cond holds, for 10 s at most.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
		<-tick.C
	}
}

// sandboxUser is the unprivileged user the sandbox tests run as a second
// time (.ci/install-test-deps.sh creates it).
const sandboxUser = testuser.Name

// TestSandboxUnprivileged runs the sandbox tests again as an unprivileged
// user, where the mechanisms differ (no namespaces, no capabilities to drop:
// seccomp refuses inet sockets, ReadOnly and NetworkLoopback are refused or
// warned about). It needs root, to switch user, and the user.
func TestSandboxUnprivileged(t *testing.T) {
	requireSandbox(t)
	out, err := runAsSandboxUser(t, 5*time.Minute, "-test.short",
		"-test.run=^(TestSandboxEscapes|TestSandboxMetadataOutsideWrite|TestSandboxAllows|TestSandboxPorts|TestSandboxFailClosed|TestSandboxHostNeverConfined|TestSandboxKeepsTreeFeatures|TestSandboxDetached|TestSandboxTempDirReused|TestSandboxTempDirsServeABurst|TestRecycleTempDir|TestSandboxLinksDoNotWiden|TestSandboxGrantAfterSwap|TestWorkDirDotDotAfterLink|TestSandboxHidesCredentials|TestMoreConfinedSandboxedPeer|TestSandboxInheritsNoDescriptors|TestAttackHeld|TestAttackTempDirOfAnotherTree|TestAttackTempDirOfAnotherTreeRead|TestAttackTempDirOfAnotherTreeWays|TestSandboxTempParentPlace|TestAttackTempDirFromNoDefaultWrite|TestAttackTempDirOfAnotherManager|TestAttackServeTokenFile|TestAttackLimitsOfAnotherProcess|TestAttackPOSIXMessageQueue|TestAttackDetachedRunnerEnvironment|TestAttackHostTerminal|TestSandboxSpareConfinedAhead|TestAttackUnixSocketInAnotherTreesTemp|TestAttackTempRootUnusable|TestAttackSocketInHiddenDir|TestAttackHostZombies|TestContainmentZombieLeaderKeepsMarker|TestAttackNonDumpableHidesMarker|TestAttackForkHopperOutlivesClose|TestAttackBrowserProfilesOutsideList|TestAttackPlatformTokensOutsideList|TestAttackSandboxEnvSetNotRedacted|TestSandboxNoCoreDump|TestAttackSecretsOutsideList|TestAttackTracedShellLeftZombie|TestAttackTracedThreadHangsWait|TestAttackTracedThreadHangsDetached|TestAttackTracedThreadShellRunsOn|TestAttackTracedThreadThenExec)$")
	if err != nil || !strings.Contains(out, "--- PASS: TestSandboxEscapes") {
		t.Fatalf("as %s: %v\n%s", sandboxUser, err, out)
	}
	for line := range strings.SplitSeq(out, "\n") {
		if strings.Contains(line, "--- SKIP") || strings.Contains(line, "skip") {
			t.Logf("as %s: %s", sandboxUser, strings.TrimSpace(line))
		}
	}
}

// runAsSandboxUser runs this test binary again as sandboxUser
// (internal/testuser), with AGENTPROC_STRESS passed on for make stress.
func runAsSandboxUser(t *testing.T, timeout time.Duration, args ...string) (string, error) {
	t.Helper()
	var env []string
	if v, ok := os.LookupEnv("AGENTPROC_STRESS"); ok {
		env = append(env, "AGENTPROC_STRESS="+v) // make stress
	}
	return testuser.Run(t, timeout, env, args...)
}

// rerunAsSandboxUser runs the named tests of this binary again as
// sandboxUser and fails t unless each passed (or, with skipOK, skipped).
func rerunAsSandboxUser(t *testing.T, tests []string, skipOK bool) {
	t.Helper()
	out, err := runAsSandboxUser(t, 5*time.Minute, "-test.run=^("+strings.Join(tests, "|")+")$")
	if err != nil {
		t.Fatalf("as %s: %v\n%s", sandboxUser, err, out)
	}
	for _, name := range tests {
		if !strings.Contains(out, "--- PASS: "+name+" ") && !(skipOK && strings.Contains(out, "--- SKIP: "+name+" ")) {
			t.Errorf("as %s: got no PASS line for %s, want one\n%s", sandboxUser, name, out)
		}
	}
}

// TestSandboxKeepsTreeFeatures checks that a sandboxed tree keeps what an
// unconfined one has: a terminal (TTY) that is its controlling terminal,
// the marker, its own session, and a cgroup it cannot leave.
func TestSandboxKeepsTreeFeatures(t *testing.T) {
	requireSandbox(t)
	ws := t.TempDir()
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	p := mustStart(t, m, agentproc.Request{WorkDir: ws, TTY: &agentproc.TTYSize{Rows: 24, Cols: 80},
		Command: `stty size; echo tty=$(tty); echo x > /dev/tty && echo marker=$` + agentproc.MarkerEnv + `; ps -o sid= -p $$ | tr -d ' '`})
	info := mustWait(t, p)
	out := p.Output().Text
	if exitCode(info) != 0 || !strings.Contains(out, "24 80") || !strings.Contains(out, "marker="+p.ID()) || !strings.Contains(out, strconv.Itoa(info.PID)) {
		t.Errorf("TTY under the sandbox: exit %d, output %q; want the size, the marker and its own session", exitCode(info), out)
	}

	t.Run("cgroup", func(t *testing.T) {
		parent := cgroupParent(t)
		m := newManager(t, agentproc.WithCgroup(parent), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
		p := mustStart(t, m, agentproc.Request{WorkDir: ws,
			Command: `cat /proc/self/cgroup; echo $$ > ` + shellQuote(filepath.Join(parent, "cgroup.procs")) + ` && echo moved`})
		mustWait(t, p)
		out := p.Output().Text
		// As root, where cgroup2 has nsdelegate, the tree has a cgroup namespace of its own, rooted at
		// its cgroup (TestAttackCgroupEscapeByClone3), which it sees as /.
		in := strings.Contains(out, filepath.Base(parent)) || (isRoot() && testCgroupNSDelegate() && strings.Contains("\n"+out, "\n0::/\n"))
		if strings.Contains(out, "moved") || !in {
			t.Errorf("output %q: want the tree in its cgroup under %s and unable to leave it", out, parent)
		}
	})
}
