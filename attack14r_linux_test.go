package agentproc_test

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/internal/testuser"
)

// overlayHomeEnv and overlayNamesEnv carry, for the unprivileged re-run,
// the home makeOverlayHome made and its secrets' names (a line each).
const (
	overlayHomeEnv      = "AGENTPROC_ATK14R_OVERLAY_HOME"
	overlayNamesEnv     = "AGENTPROC_ATK14R_OVERLAY_NAMES"
	overlayRootEnv      = "AGENTPROC_ATK14R_OVERLAY_ROOT"
	overlayRootNamesEnv = "AGENTPROC_ATK14R_OVERLAY_ROOT_NAMES"
)

// TestAttack14rUnprivileged re-runs the overlay tests as the unprivileged
// user, Landlock and seccomp alone, with the mounts made by root.
func TestAttack14rUnprivileged(t *testing.T) {
	requireSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to make the mounts and switch users")
	}
	u, err := user.Lookup(sandboxUser)
	if err != nil {
		t.Skipf("no user %s: %v", sandboxUser, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	home, names := makeOverlayHome(t, uid, gid)
	root, rootNames := makeOverlayRoot(t, uid, gid)
	tests := []string{"TestAttackHiddenPathOverlayLayer", "TestAttackHiddenPathOverlayLayerName"}
	out, err := testuser.Run(t, 2*time.Minute, []string{overlayHomeEnv + "=" + home, overlayNamesEnv + "=" + strings.Join(names, "\n"),
		overlayRootEnv + "=" + root, overlayRootNamesEnv + "=" + strings.Join(rootNames, "\n")}, "-test.run=^("+strings.Join(tests, "|")+")$")
	if err != nil {
		t.Fatalf("as %s: %v\n%s", sandboxUser, err, out)
	}
	for _, name := range tests {
		if !strings.Contains(out, "--- PASS: "+name+" ") {
			t.Errorf("as %s: got no PASS line for %s, want one\n%s", sandboxUser, name, out)
		}
	}
}

// makeOverlayHome makes, as root, dir/home with a hidden ~/.ssh (a key at
// .ssh/id_ed25519 and another at .ssh/keys/id_rsa) and two overlays
// showing its files at other names: dir/merged, whose lower layers are
// "dir/extra layer" (a space, escaped \040 in mountinfo) and the home
// itself, with an upper layer; and dir/keyview, whose lower layers are
// ~/.ssh/keys (a layer inside a hidden directory) and an empty one. It
// returns the home and the secrets' names; Cleanup unmounts both. The
// home and its files are uid's and gid's.
func makeOverlayHome(t *testing.T, uid, gid int) (home string, names []string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "agentproc-overlay-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	home = filepath.Join(dir, "home")
	extra := filepath.Join(dir, "extra layer")
	merged, keyview := filepath.Join(dir, "merged"), filepath.Join(dir, "keyview")
	for _, d := range []string{filepath.Join(home, ".ssh", "keys"), filepath.Join(home, "project"), extra, filepath.Join(dir, "empty"), filepath.Join(dir, "upper"), filepath.Join(dir, "work"), merged, keyview} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, s := range map[string]string{filepath.Join(home, ".ssh", "id_ed25519"): "OVERLAY-KEY\n", filepath.Join(home, ".ssh", "keys", "id_rsa"): "OVERLAY-LAYER-KEY\n"} {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{home, filepath.Join(home, ".ssh"), filepath.Join(home, ".ssh", "keys"), filepath.Join(home, ".ssh", "id_ed25519"),
		filepath.Join(home, ".ssh", "keys", "id_rsa"), filepath.Join(home, "project")} {
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	mounts := [][2]string{
		{merged, "lowerdir=" + extra + ":" + home + ",upperdir=" + filepath.Join(dir, "upper") + ",workdir=" + filepath.Join(dir, "work")},
		{keyview, "lowerdir=" + filepath.Join(home, ".ssh", "keys") + ":" + filepath.Join(dir, "empty")},
	}
	for _, mt := range mounts {
		if err := syscall.Mount("overlay", mt[0], "overlay", 0, mt[1]); err != nil {
			t.Skipf("overlay mount at %s: %v", mt[0], err)
		}
		t.Cleanup(func() { _ = syscall.Unmount(mt[0], syscall.MNT_DETACH) })
	}
	return home, []string{filepath.Join(home, ".ssh", "id_ed25519"), filepath.Join(merged, ".ssh", "id_ed25519"),
		filepath.Join(home, ".ssh", "keys", "id_rsa"), filepath.Join(merged, ".ssh", "keys", "id_rsa"), filepath.Join(keyview, "id_rsa")}
}

// TestAttackHiddenPathOverlayLayer: an overlay mount shows its layers'
// files merged at its point as inodes of the overlay's own file system.
// hiddenMountAliases looked for a hidden path's other names among the
// mounts of the hidden path's own device, which an overlay is not, so a
// home used as an overlay's lower layer (a toolbox's or a build's merged
// view of it) showed ~/.ssh at the merged name, and a tree read the key
// there as root; so did an overlay whose layer is a directory inside
// ~/.ssh. The control reads each name unconfined.
func TestAttackHiddenPathOverlayLayer(t *testing.T) {
	requireSandbox(t)
	home, names := os.Getenv(overlayHomeEnv), strings.Split(os.Getenv(overlayNamesEnv), "\n")
	if home == "" {
		if os.Geteuid() != 0 {
			t.Skip("the overlay mounts need root: TestAttack14rUnprivileged makes them and runs this as " + sandboxUser)
		}
		home, names = makeOverlayHome(t, 0, 0)
	}
	t.Setenv("HOME", home)
	ws := filepath.Join(home, "project")
	cmd := ""
	for _, n := range names {
		cmd += "echo " + shellQuote(n) + ": $(cat " + shellQuote(n) + " 2>&1); "
	}
	req := agentproc.Request{Command: cmd, WorkDir: ws, Timeout: time.Minute}
	if ctl := runSandboxed(t, newManager(t, agentproc.WithRedaction(false)), req).Text; strings.Count(ctl, "OVERLAY-") != len(names) {
		t.Fatalf("control without the sandbox: got %q, want the keys read at each of their %d names", ctl, len(names))
	}
	m := newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	out := runSandboxed(t, m, req).Text
	for line := range strings.Lines(out) {
		if strings.Contains(line, "OVERLAY-") {
			t.Errorf("a hidden key was read through an overlay: got %q, want it refused at every name", strings.TrimSpace(line))
		}
	}
}

// TestAttackRootRunnerDoors: daemons that run what a root peer asks,
// whose sockets hostDoors did not list, so a root tree connected: the Nix
// daemon (root is a trusted user by default, and a trusted client's
// options, post-build-hook among them, run its command as root outside
// the build sandbox), Salt's master and minion IPC sockets (a job
// published there runs cmd.run on the minions, the host among them),
// NGINX Unit's control socket (an application started as the user its
// configuration names) and root's PM2 daemon (its RPC socket starts any
// command), and Dovecot's doveadm server (every user's mail, for a root
// peer). The sockets are stand-ins made where this host lacks them;
// the control reaches each unconfined.
func TestAttackRootRunnerDoors(t *testing.T) {
	requireRootSandbox(t)
	ws := t.TempDir()
	home := t.TempDir()
	t.Setenv("HOME", home)
	pm2 := filepath.Join(home, ".pm2")
	requireDoorsShut(t, ws, map[string][]string{
		"/nix/var/nix/daemon-socket/socket": {"/nix", "/nix/var", "/nix/var/nix", "/nix/var/nix/daemon-socket"},
		"/run/salt/master/publish_pull.ipc": {"/run/salt", "/run/salt/master"},
		"/run/salt/minion/minion_event.ipc": {"/run/salt", "/run/salt/minion"},
		"/run/control.unit.sock":            nil,
		"/run/dovecot/doveadm-server":       {"/run/dovecot"},
		filepath.Join(pm2, "rpc.sock"):      {pm2},
		filepath.Join(pm2, "pub.sock"):      {pm2},
	})
}

// TestAttackRootDaemonSecrets: the state root's daemons and agents keep
// in root's 0600 files, at places systemSecretPaths did not list, which a
// root tree owns and read: APT's repository passwords and Ubuntu Pro's
// token, snapd's state and device key, cloud-init's unredacted instance
// data, Azure's and AWS SSM's agents' secrets, Salt's, Puppet's and
// Chef's keys, NixOS's decrypted secrets and sops-nix's key, root's
// podman logins and storage, libvirt's secrets, CUPS's printer URIs and
// key, LDAP bind passwords, davfs2's and rsyncd's passwords, Proxmox's
// private keys. Stand-ins are made where this host lacks them; the
// control reads each unconfined.
func TestAttackRootDaemonSecrets(t *testing.T) {
	requireRootSandbox(t)
	ws := t.TempDir()
	system := map[string]string{}
	for i, p := range []string{"/etc/apt/auth.conf", "/etc/apt/auth.conf.d/90ubuntu-advantage", "/var/lib/ubuntu-advantage/private/machine-token.json",
		"/var/lib/snapd/state.json", "/var/lib/snapd/device/private-keys-v1/key", "/run/cloud-init/instance-data-sensitive.json",
		"/run/cloud-init/combined-cloud-config.json", "/var/lib/waagent/ovf-env.xml", "/var/lib/amazon/ssm/Vault/Store/RegistrationKey",
		"/etc/salt/pki/minion/minion.pem", "/etc/puppetlabs/puppet/ssl/private_keys/host.pem", "/var/lib/puppet/ssl/private_keys/host.pem",
		"/etc/chef/client.pem", "/run/agenix/token", "/run/agenix.d/1/token", "/run/keys/deploy", "/var/lib/sops-nix/key.txt",
		"/etc/containers/auth.json", "/run/containers/0/auth.json", "/var/lib/containers/storage/overlay-containers/c/userdata/config.json",
		"/etc/libvirt/secrets/0a81f5b2.base64", "/etc/cups/printers.conf", "/etc/cups/ssl/server.key", "/etc/ldap.secret",
		"/etc/libnss-ldap.secret", "/etc/pam_ldap.secret", "/etc/davfs2/secrets", "/etc/rsyncd.secrets", "/etc/pve/priv/authkey.key"} {
		system[p] = fmt.Sprintf("ROOT-DAEMON-SECRET-%d\n", i)
	}
	files := makeHostFiles(t, system)
	var probe strings.Builder
	for _, p := range files {
		probe.WriteString("cat " + shellQuote(p) + " 2>/dev/null; ")
	}
	probe.WriteString("true")
	req := agentproc.Request{Command: probe.String(), WorkDir: ws, Timeout: time.Minute}
	control := runSandboxed(t, newManager(t, agentproc.WithRedaction(false)), req).Text
	out := runSandboxed(t, newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws))), req).Text
	for _, p := range files {
		want := system[p]
		if !strings.Contains(control, want) {
			t.Errorf("control: %s not read without the sandbox (output %q)", p, control)
		}
		if strings.Contains(out, want) {
			t.Errorf("%s: got it read under the sandbox, want it hidden", p)
		}
	}
}

// makeOverlayRoot makes, as root, an overlay at dir/root of a read-only
// lower layer dir/ro holding home/.ssh/id_ed25519 and home/project, with
// an upper layer dir/rw/upper, and writes a second key, home/.ssh/id_rsa,
// through the overlay (so into the upper layer); the home's files are
// uid's and gid's. It returns the home on the overlay and the keys' names,
// each at the overlay and in its layer; Cleanup unmounts it.
func makeOverlayRoot(t *testing.T, uid, gid int) (home string, names []string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "agentproc-overlayroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	lower, upper, root := filepath.Join(dir, "ro"), filepath.Join(dir, "rw", "upper"), filepath.Join(dir, "root")
	for _, d := range []string{filepath.Join(lower, "home", ".ssh"), filepath.Join(lower, "home", "project"), upper, filepath.Join(dir, "rw", "work"), root} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(lower, "home", ".ssh", "id_ed25519"), []byte("OVERLAY-LOWER-KEY\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(lower, "home"), filepath.Join(lower, "home", ".ssh"), filepath.Join(lower, "home", ".ssh", "id_ed25519"), filepath.Join(lower, "home", "project")} {
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mount("overlay", root, "overlay", 0, "lowerdir="+lower+",upperdir="+upper+",workdir="+filepath.Join(dir, "rw", "work")); err != nil {
		t.Skipf("overlay mount: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(root, syscall.MNT_DETACH) })
	home = filepath.Join(root, "home")
	// A key written since the overlay was mounted lands in the upper layer.
	key := filepath.Join(home, ".ssh", "id_rsa")
	if err := os.WriteFile(key, []byte("OVERLAY-UPPER-KEY\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(key, uid, gid); err != nil {
		t.Fatal(err)
	}
	return home, []string{filepath.Join(home, ".ssh", "id_ed25519"), filepath.Join(lower, "home", ".ssh", "id_ed25519"),
		filepath.Join(home, ".ssh", "id_rsa"), filepath.Join(upper, "home", ".ssh", "id_rsa")}
}

// TestAttackHiddenPathOverlayLayerName: the reverse of
// TestAttackHiddenPathOverlayLayer. Where the home itself is on an
// overlay (Ubuntu's overlayroot and live systems, Raspberry Pi OS's
// overlay file system: the root an overlay of a read-only disk mounted
// at /media/root-ro or /rofs), a hidden path's files are also at their
// place in the layers: the lower disk's copy, and the upper layer's for
// a file written since. A root tree read both there. The control reads
// each unconfined.
func TestAttackHiddenPathOverlayLayerName(t *testing.T) {
	requireSandbox(t)
	home, names := os.Getenv(overlayRootEnv), strings.Split(os.Getenv(overlayRootNamesEnv), "\n")
	if home == "" {
		if os.Geteuid() != 0 {
			t.Skip("the overlay mount needs root: TestAttack14rUnprivileged makes it and runs this as " + sandboxUser)
		}
		home, names = makeOverlayRoot(t, 0, 0)
	}
	t.Setenv("HOME", home)
	ws := filepath.Join(home, "project")
	cmd := ""
	for _, n := range names {
		cmd += "echo " + shellQuote(n) + ": $(cat " + shellQuote(n) + " 2>&1); "
	}
	req := agentproc.Request{Command: cmd, WorkDir: ws, Timeout: time.Minute}
	if ctl := runSandboxed(t, newManager(t, agentproc.WithRedaction(false)), req).Text; strings.Count(ctl, "OVERLAY-") != len(names) {
		t.Fatalf("control without the sandbox: got %q, want the keys read at each of their %d names", ctl, len(names))
	}
	m := newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	out := runSandboxed(t, m, req).Text
	for line := range strings.Lines(out) {
		if strings.Contains(line, "OVERLAY-") {
			t.Errorf("a hidden key was read in an overlay's layer: got %q, want it refused at every name", strings.TrimSpace(line))
		}
	}
}

// TestAttackFstabCredentialsFile: mount.cifs keeps an fstab share's
// password in a credentials file the fstab line names (credentials=), at
// a place of the administrator's choosing (/root/.smbcredentials,
// /etc/cifs-creds), root's 0600; so do s3fs (passwd_file=) and sshfs
// (IdentityFile=). No list names such places, and a root tree, their
// owner, read them. The table here is a stand-in naming files in a temp
// dir; the control reads each unconfined.
func TestAttackFstabCredentialsFile(t *testing.T) {
	requireRootSandbox(t)
	ws, dir := t.TempDir(), t.TempDir()
	secrets := map[string]string{filepath.Join(dir, "smbcredentials"): "username=svc\npassword=FSTAB-CIFS-SECRET\n",
		filepath.Join(dir, "cifs-short"): "password=FSTAB-CRED-SECRET\n", filepath.Join(dir, "passwd-s3fs"): "bucket:FSTAB-S3FS-SECRET\n",
		filepath.Join(dir, "id_sshfs"): "FSTAB-SSHFS-KEY\n"}
	for p, s := range secrets {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	fstab := filepath.Join(dir, "fstab")
	table := "# <file system> <mount point> <type> <options> <dump> <pass>\n" +
		"UUID=0a1b / ext4 errors=remount-ro 0 1\n" +
		"//nas/share /mnt/nas cifs credentials=" + filepath.Join(dir, "smbcredentials") + ",uid=1000,iocharset=utf8 0 0\n" +
		"//nas/other /mnt/other cifs uid=1000,cred=" + filepath.Join(dir, "cifs-short") + " 0 0\n" +
		"s3fs#bucket /mnt/s3 fuse _netdev,passwd_file=" + filepath.Join(dir, "passwd-s3fs") + " 0 0\n" +
		"svc@host:/srv /mnt/srv fuse.sshfs IdentityFile=" + filepath.Join(dir, "id_sshfs") + ",allow_other 0 0\n"
	if err := os.WriteFile(fstab, []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	agentproc.SetFstabPath(t, fstab)
	var probe strings.Builder
	for p := range secrets {
		probe.WriteString("cat " + shellQuote(p) + " 2>/dev/null; ")
	}
	probe.WriteString("cat " + shellQuote(fstab) + " >/dev/null && echo TABLE-READ")
	req := agentproc.Request{Command: probe.String(), WorkDir: ws, Timeout: time.Minute}
	control := runSandboxed(t, newManager(t, agentproc.WithRedaction(false)), req).Text
	out := runSandboxed(t, newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws))), req).Text
	for p, s := range secrets {
		if !strings.Contains(control, s) {
			t.Errorf("control: %s not read without the sandbox (output %q)", p, control)
		}
		if strings.Contains(out, s) {
			t.Errorf("%s: got it read under the sandbox, want it hidden", p)
		}
	}
	if !strings.Contains(out, "TABLE-READ") {
		t.Errorf("the table itself: got %q, want it readable (mount and findmnt read it)", out)
	}
}
