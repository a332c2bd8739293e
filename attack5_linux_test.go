package agentproc_test

import (
	"bytes"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/internal/egress"
)

// Tests of the fifth attack review: docs/sandbox-threats.md, "Fifth attack
// review".

// TestAttackRawBlockDevice: as root the tree is uid 0, the owner of every
// device node in /dev, and the policy's Landlock ruleset granted reading
// the whole of /dev but the terminals its mount covers named: a tree read
// the disk under a hidden file through its block device (grep -a on
// /dev/loopN printed a key the Hide list kept from cat), which on a host
// with /dev/sda is every hidden credential; and it opened the host's other
// terminals and screens (/dev/tty1, /dev/ttyS0: the keystrokes typed at a
// console; /dev/vcsa1: the text on one). Now the ruleset leaves out every
// block device and every character device other users may neither read
// nor write (confine.HostDevices), and /dev is granted entry by entry, so
// a device made later (a loop device losetup adds) has no rule either.
// The controls: the hidden file is refused by path, the host reads the
// loop device, and it opens the terminals.
func TestAttackRawBlockDevice(t *testing.T) {
	requireRootSandbox(t)
	ws, key, _ := sandboxWorkspace(t)
	const secret = "HIDDEN-ON-DISK-7c1e"
	img, loop := hiddenDiskLoop(t, key, secret)
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)), agentproc.WithRedaction(false))
	// Control: the file itself is hidden.
	if o := runSandboxed(t, m, agentproc.Request{WorkDir: ws, Command: "cat " + shellQuote(img)}); strings.Contains(o.Text, secret) {
		t.Fatalf("control: the tree read the hidden %s by its path: %q; want it hidden", img, o.Text)
	}
	o := runSandboxed(t, m, agentproc.Request{WorkDir: ws, Command: "grep -a -o " + secret + " " + loop})
	if strings.Contains(o.Text, secret) {
		t.Errorf("the tree read a hidden file's disk through %s: output %q, want the device refused", loop, o.Text)
	}
	for _, d := range []string{"/dev/tty1", "/dev/ttyS0", "/dev/vcsa1", "/dev/vcs1"} {
		f, err := os.OpenFile(d, os.O_RDONLY|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
		if err != nil {
			continue // not on this host: nothing to control
		}
		_ = f.Close()
		o := runSandboxed(t, m, agentproc.Request{WorkDir: ws,
			Command: "exec 3<" + d + " && echo opened " + d})
		if strings.Contains(o.Text, "opened") {
			t.Errorf("the tree opened the host's %s for reading: output %q, want it refused", d, o.Text)
		}
	}
}

// hiddenDiskLoop writes a 1 MiB disk image holding secret next to the
// hidden file key, attaches it read-only to a loop device, detached at the
// test's end, and returns the image's path and the device's; it skips
// without losetup or a free loop device. The control: the host reads the
// secret through the device.
func hiddenDiskLoop(t *testing.T, key, secret string) (img, loop string) {
	t.Helper()
	if _, err := exec.LookPath("losetup"); err != nil {
		t.Skip("no losetup")
	}
	img = filepath.Join(filepath.Dir(key), "disk.img")
	data := make([]byte, 1<<20)
	copy(data[4096:], secret)
	if err := os.WriteFile(img, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "-f", "--show", "-r", img).CombinedOutput()
	if err != nil {
		t.Skipf("losetup: %v: %s", err, out)
	}
	loop = strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", loop).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v: %s", loop, err, out)
		}
	})
	if dev, err := os.ReadFile(loop); err != nil || !bytes.Contains(dev, []byte(secret)) {
		t.Fatalf("control: the host read %d bytes of %s (err %v), want the secret in them", len(dev), loop, err)
	}
	return img, loop
}

// TestAttackNAT64PrivateAddress: the proxy refuses a private-range
// address unless AllowHosts names it, and the host's own addresses
// always, but judged an address inside the NAT64 prefix (64:ff9b::/96,
// RFC 6052, and the local-use 64:ff9b:1::/48 of RFC 8215) by the IPv6
// address alone: a listed name whose DNS answers 64:ff9b::a00:5 (an
// attacker's domain, or DNS64 on an IPv6-only network such as AWS's,
// which also routes the prefix) was dialled, and the NAT64 gateway then
// connects to 10.0.0.5 or to the host's own IPv4 address. Only loopback
// and the other ranges refused whatever the list says were looked for
// inside the well-known prefix. The filter now judges the IPv4 address a
// NAT64 address carries as that address. The control: the same IPv4
// addresses are refused as they are.
func TestAttackNAT64PrivateAddress(t *testing.T) {
	own := netip.MustParseAddr("203.0.113.7")
	f := &egress.AddrFilter{LocalAddrs: func() ([]netip.Addr, error) { return []netip.Addr{own}, nil }}
	list, err := egress.ParseList([]string{"attacker.example"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ v4, v6 string }{
		{"10.0.0.5", "64:ff9b::a00:5"},
		{"192.168.1.1", "64:ff9b::c0a8:101"},
		{"203.0.113.7", "64:ff9b::cb00:7107"},
		{"10.0.0.5", "64:ff9b:1::a00:5"},
		{"127.0.0.1", "64:ff9b:1::7f00:1"},
	} {
		if r := f.Check(netip.MustParseAddr(c.v4), list); r == "" {
			t.Fatalf("control: %s is dialled for a name the list allows; want it refused", c.v4)
		}
		if r := f.Check(netip.MustParseAddr(c.v6), list); r == "" {
			t.Errorf("%s (NAT64 of %s) is dialled for a name the list allows; want it refused as %s is", c.v6, c.v4, c.v4)
		}
	}
	// A private range the list names is reached through NAT64 too.
	named, err := egress.ParseList([]string{"attacker.example", "10.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	if r := f.Check(netip.MustParseAddr("64:ff9b::a00:5"), named); r != "" {
		t.Errorf("64:ff9b::a00:5 with 10.0.0.0/8 listed: refused (%s), want it dialled", r)
	}
}

// TestAttackSandboxEnvSetNotRedacted: a secret-looking variable given to
// the tree through its sandbox's Env.Set (an operator's registry token,
// or httpapi's sandbox.env_set) reached the model's view when the tree
// printed its environment: redaction took the secret-looking values of
// the host's environment and of Request.Env, not of Env.Set. Now the
// values of the Env.Set the request runs under (its Sandbox's, else the
// Manager's default) are redacted too. The control: without redaction
// the tree prints the value, so it had it.
func TestAttackSandboxEnvSetNotRedacted(t *testing.T) {
	requireSandbox(t)
	ws := t.TempDir()
	const token = "npm_EnvSetToken0123456789abcdef"
	sb := agentproc.WorkspaceSandbox(ws)
	sb.Env.Set = map[string]string{"NPM_TOKEN": token}
	ctl := runSandboxed(t, newManager(t, agentproc.WithSandbox(sb), agentproc.WithRedaction(false)),
		agentproc.Request{WorkDir: ws, Command: `echo "$NPM_TOKEN"`})
	if !strings.Contains(ctl.Text, token) {
		t.Fatalf("control: without redaction the tree printed %q, want the token", ctl.Text)
	}
	for name, m := range map[string]*agentproc.Manager{
		"the Manager's default": newManager(t, agentproc.WithSandbox(sb)),
		"the request's own":     newManager(t),
	} {
		req := agentproc.Request{WorkDir: ws, Command: `echo "$NPM_TOKEN"; env`}
		if name == "the request's own" {
			req.Sandbox = sb
		}
		out := runSandboxed(t, m, req)
		if strings.Contains(out.Text, token) {
			t.Errorf("%s sandbox's Env.Set: the tree printed the token: %q; want it redacted", name, out.Text)
		}
		if !strings.Contains(out.Text, "[redacted:NPM_TOKEN]") {
			t.Errorf("%s sandbox's Env.Set: output %q, want [redacted:NPM_TOKEN]", name, out.Text)
		}
	}
}

// TestAttackEnvHookSecretNotRedacted: a secret-looking variable that the
// host's WithEnv hook adds to every process's environment (a token it
// fetches at run time rather than keeps in its own environment) was
// printed by `env` in an unsandboxed tree straight into the output the
// model reads: redaction took the host's own environment, read once by
// New, and Request.Env, not what the hook made. Now with a hook the
// secret-looking variables of the environment a process starts with are
// redacted too. The control: with redaction off the tree prints the token.
func TestAttackEnvHookSecretNotRedacted(t *testing.T) {
	const token = "ghp_FromTheEnvHook0123456789abcd"
	hook := agentproc.WithEnv(func(base []string) ([]string, error) {
		return append(base, "GITHUB_TOKEN="+token), nil
	})
	req := agentproc.Request{Command: `echo "tok=$GITHUB_TOKEN"`}
	if ctl := runSandboxed(t, newManager(t, hook, agentproc.WithRedaction(false)), req); !strings.Contains(ctl.Text, token) {
		t.Fatalf("control: without redaction the tree printed %q, want the token", ctl.Text)
	}
	out := runSandboxed(t, newManager(t, hook), req)
	if strings.Contains(out.Text, token) || !strings.Contains(out.Text, "[redacted:GITHUB_TOKEN]") {
		t.Errorf("the hook's token: output %q, want tok=[redacted:GITHUB_TOKEN]", out.Text)
	}
}

// TestAttackRootDaemonDoors: as root the mount namespace covered a list of
// the host's doors (D-Bus, systemd, Docker, containerd, Podman, tmux…),
// and a socket it did not name stayed reachable; among those, daemons
// that take any uid-0 peer for their administrator and run what it asks
// outside the sandbox: snapd (a snap's hooks run as root; sideloading
// needs nothing but the socket), LXD and Incus (a privileged container
// with the host's / mounted), libvirt (a VM on the host's disk),
// tailscaled (a local port served to the tailnet or the Internet), udevd's
// control socket, nscd (names resolved for a NetworkNone tree: data out
// by DNS). Each is now covered (hostDoors), whether it exists yet or not.
// The test makes a listener at each path this host lacks (and removes it
// after); the control reaches it unconfined.
func TestAttackRootDaemonDoors(t *testing.T) {
	requireRootSandbox(t)
	ws := t.TempDir()
	// before's first Start is made before the doors, after's after.
	before := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	runSandboxed(t, before, agentproc.Request{Command: "true", WorkDir: ws})
	socks := map[string][]string{}
	for _, p := range []string{"/run/snapd.socket", "/run/tailscale/tailscaled.sock", "/run/libvirt/libvirt-sock",
		"/run/udev/control", "/run/nscd/socket", "/run/containerd/containerd.sock.ttrpc"} {
		socks[p] = []string{filepath.Dir(p)}
	}
	made := makeDoors(t, socks, 0o755)
	after := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	probeDoors(t, ws, made, newManager(t), before, after)
}

// TestAttackBrowserProfilesOutsideList: WorkspaceSandbox hid ~/.mozilla
// and Chrome's and Chromium's profiles in ~/.config, but Ubuntu's Firefox
// and Chromium are snaps that keep them under ~/snap, Flatpak's under
// ~/.var/app, and Brave, Edge, Vivaldi, Opera and Thunderbird elsewhere:
// a tree read their cookies (every web session of the user) and saved
// passwords, and the history where `agentproc serve --listen`'s page URL
// keeps its token (`#token=`), which lets a tree with the network drive
// serve unconfined. The control reads each unconfined.
func TestAttackBrowserProfilesOutsideList(t *testing.T) {
	requireSandbox(t)
	home, ws := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	profiles := []string{
		"snap/firefox/common/.mozilla/firefox/x.default/cookies.sqlite",
		"snap/chromium/common/chromium/Default/Cookies",
		".var/app/org.mozilla.firefox/.mozilla/firefox/x.default/places.sqlite",
		".var/app/com.google.Chrome/config/google-chrome/Default/History",
		".config/BraveSoftware/Brave-Browser/Default/Login Data",
		".config/microsoft-edge/Default/Cookies",
		".thunderbird/x.default/logins.json",
	}
	requireHomeFilesHidden(t, home, ws, profiles, "SESSION-OF-")
}

// TestAttackPlatformTokensOutsideList: the command lines of GitLab,
// Cloudflare, Fly.io, Netlify, Firebase, Databricks, Snowflake, dbt,
// Hetzner, ngrok, Sentry, Terraform Cloud, Stripe and JFrog keep their
// tokens (or passwords) in files WorkspaceSandbox did not hide: a tree read
// each. They are in the credential list now. The control reads each
// unconfined.
func TestAttackPlatformTokensOutsideList(t *testing.T) {
	requireSandbox(t)
	home, ws := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	files := []string{
		".config/glab-cli/config.yml", ".wrangler/config/default.toml", ".fly/config.yml",
		".config/netlify/config.json", ".config/configstore/firebase-tools.json", ".databrickscfg",
		".snowsql/config", ".dbt/profiles.yml", ".config/hcloud/cli.toml", ".config/ngrok/ngrok.yml",
		".cloudflared/cert.pem", ".sentryclirc", ".terraformrc", ".config/stripe/config.toml",
		".jfrog/jfrog-cli.conf.v6",
	}
	requireHomeFilesHidden(t, home, ws, files, "TOKEN-OF-")
}

// requireHomeFilesHidden writes each of files (relative to home, 0600)
// with its tag and name, and has a tree read them all: unconfined (the
// control) each is read, inside WorkspaceSandbox(ws) none.
func requireHomeFilesHidden(t *testing.T, home, ws string, files []string, tag string) {
	t.Helper()
	cmd := "for f in"
	for _, p := range files {
		f := filepath.Join(home, p)
		if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(tag+p+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd += " " + shellQuote(f)
	}
	cmd += `; do cat "$f"; done; true`
	m := newManager(t, agentproc.WithRedaction(false))
	ctl := runSandboxed(t, m, agentproc.Request{Command: cmd, WorkDir: ws})
	out := runSandboxed(t, m, agentproc.Request{Command: cmd, WorkDir: ws, Sandbox: agentproc.WorkspaceSandbox(ws)})
	for _, p := range files {
		if !strings.Contains(ctl.Text, tag+p) {
			t.Errorf("control: ~/%s not read unconfined (output %q)", p, ctl.Text)
		}
		if strings.Contains(out.Text, tag+p) {
			t.Errorf("~/%s was read inside WorkspaceSandbox, want it hidden", p)
		}
	}
}

// listenDoor listens on the Unix socket p, accepting every connection,
// after making the directories of dirs that are missing (with mode);
// the socket and the directories made are removed at cleanup.
func listenDoor(t *testing.T, p string, dirs []string, mode os.FileMode) {
	t.Helper()
	for _, dir := range dirs {
		if _, err := os.Lstat(dir); err == nil {
			continue
		}
		if err := os.Mkdir(dir, mode); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Remove(dir) })
	}
	l, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(); _ = os.Remove(p) })
	serveEach(t, l, func(net.Conn) string { return "" })
}
