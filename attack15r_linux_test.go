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

// requireHiddenFromRoot checks that an unconfined tree reads each file of
// secrets (path to content) and a tree of WorkspaceSandbox(ws) none, with
// the Manager made after the files (the policy is resolved at its first
// Start).
func requireHiddenFromRoot(t *testing.T, ws string, secrets map[string]string) {
	t.Helper()
	var probe strings.Builder
	for p := range secrets {
		probe.WriteString("cat " + shellQuote(p) + " 2>/dev/null; ")
	}
	probe.WriteString("true")
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
}

// TestAttackFstabCredentialForms: the credentials files of /etc/fstab
// that fstabCredentialFiles did not take: a name with fstab's octal
// escape for a space (\040, which mount undoes), ssh's option in another
// case (ssh's keywords are case-insensitive: sshfs's identityfile=),
// gocryptfs's passfile=, mount.ceph's secretfile=, eCryptfs's
// passphrase_passwd_file= inside key=, and rclone's config= (its remotes'
// tokens). Each is root's 0600, which a root tree owns and read. A name
// through a link held already (the target read by its own name is
// refused).
func TestAttackFstabCredentialForms(t *testing.T) {
	requireRootSandbox(t)
	ws, dir := t.TempDir(), t.TempDir()
	name := func(s string) string { return filepath.Join(dir, s) }
	secrets := map[string]string{name("smb creds"): "password=FSTAB-SPACE-SECRET\n",
		name("id_lower"): "FSTAB-LOWERCASE-SSH-KEY\n", name("gocryptfs.pass"): "FSTAB-GOCRYPTFS-SECRET\n",
		name("ceph.secret"): "FSTAB-CEPH-SECRET\n", name("ecryptfs.pass"): "passphrase_passwd=FSTAB-ECRYPTFS-SECRET\n",
		name("rclone.conf"): "[s3]\nsecret_access_key = FSTAB-RCLONE-SECRET\n"}
	for p, s := range secrets {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A name through a link (held before: a hidden path is resolved).
	secrets[name("linked-target")] = "password=FSTAB-LINKED-SECRET\n"
	if err := os.WriteFile(name("linked-target"), []byte(secrets[name("linked-target")]), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(name("linked-target"), name("creds-link")); err != nil {
		t.Fatal(err)
	}
	esc := strings.ReplaceAll(name("smb creds"), " ", `\040`)
	table := "UUID=0a1b / ext4 errors=remount-ro 0 1\n" +
		"//nas/share /mnt/nas cifs credentials=" + esc + ",uid=1000 0 0\n" +
		"//nas/linked /mnt/linked cifs credentials=" + name("creds-link") + " 0 0\n" +
		"svc@host:/srv /mnt/srv fuse.sshfs identityfile=" + name("id_lower") + ",allow_other 0 0\n" +
		"/srv/cipher /srv/plain fuse./usr/bin/gocryptfs nofail,allow_other,passfile=" + name("gocryptfs.pass") + " 0 0\n" +
		"mon1:6789:/ /mnt/ceph ceph name=admin,secretfile=" + name("ceph.secret") + ",_netdev 0 0\n" +
		"/srv/private /srv/private ecryptfs key=passphrase:passphrase_passwd_file=" + name("ecryptfs.pass") + ",ecryptfs_cipher=aes 0 0\n" +
		"s3:bucket /mnt/s3 rclone rw,noauto,_netdev,args2env,config=" + name("rclone.conf") + " 0 0\n"
	fstab := name("fstab")
	if err := os.WriteFile(fstab, []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	agentproc.SetFstabPath(t, fstab)
	requireHiddenFromRoot(t, ws, secrets)
}

// TestAttackDiskKeyFiles: the key files of encrypted disks. /etc/crypttab
// names each LUKS volume's key file (its third field: /root/keyfile,
// /etc/luks-keys/data.key, at the administrator's choice) and TrueCrypt's
// (tcrypt-keyfile=); systemd-cryptsetup looks for a volume without one in
// /etc/cryptsetup-keys.d and /run/cryptsetup-keys.d. Root's 0400 or 0600,
// which a root tree owns and read: a disk's key.
func TestAttackDiskKeyFiles(t *testing.T) {
	requireRootSandbox(t)
	ws, dir := t.TempDir(), t.TempDir()
	name := func(s string) string { return filepath.Join(dir, s) }
	secrets := map[string]string{name("data.key"): "CRYPTTAB-LUKS-KEY\n", name("tc.key"): "CRYPTTAB-TCRYPT-KEY\n"}
	for p, s := range secrets {
		if err := os.WriteFile(p, []byte(s), 0o400); err != nil {
			t.Fatal(err)
		}
	}
	table := "# <target> <source> <key file> <options>\n" +
		"cryptswap /dev/sda3 /dev/urandom swap,cipher=aes-xts-plain64\n" +
		"data UUID=0a1b " + name("data.key") + " luks,discard\n" +
		"home UUID=2c3d none luks\n" +
		"tc /dev/sdb1 - tcrypt,tcrypt-keyfile=" + name("tc.key") + "\n"
	crypttab := name("crypttab")
	if err := os.WriteFile(crypttab, []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	agentproc.SetCrypttabPath(t, crypttab)
	system := map[string]string{}
	for i, p := range []string{"/etc/cryptsetup-keys.d/backup.key", "/run/cryptsetup-keys.d/media.key"} {
		system[p] = fmt.Sprintf("CRYPTSETUP-KEYS-D-%d\n", i)
	}
	for _, p := range makeHostFiles(t, system) {
		secrets[p] = system[p]
	}
	requireHiddenFromRoot(t, ws, secrets)
}

// TestAttackRootRunnerDoors15: more daemons that run a root peer's
// command outside the sandbox: the Guix daemon (the Nix daemon's
// sibling: a fixed-output derivation's builder reaches the network, and
// a root client is its administrator), k0s's and MicroK8s's containerd
// (a privileged container with the host's disk), and supervisord's
// socket at its sample configuration's place, /tmp/supervisor.sock
// (the seventh review listed /run/supervisor.sock). Stand-ins where this
// host lacks them; the control reaches each unconfined.
func TestAttackRootRunnerDoors15(t *testing.T) {
	requireRootSandbox(t)
	ws := t.TempDir()
	requireDoorsShut(t, ws, map[string][]string{
		"/var/guix/daemon-socket/socket":                {"/var/guix", "/var/guix/daemon-socket"},
		"/run/k0s/containerd.sock":                      {"/run/k0s"},
		"/var/snap/microk8s/common/run/containerd.sock": {"/var/snap", "/var/snap/microk8s", "/var/snap/microk8s/common", "/var/snap/microk8s/common/run"},
		"/tmp/supervisor.sock":                          nil,
	})
}

// TestAttackRootClusterSecrets: the secrets of the Kubernetes
// distributions and package managers the earlier lists missed, root's
// 0600 (or the group's 0660), which a root tree owns and read:
// MicroK8s's credentials (an admin kubeconfig and token list) and its
// certificates' keys (the cluster CA's), k0s's state (its PKI and admin
// kubeconfig), Guix's store signing key (substitutes other hosts trust),
// and the Nix daemon's netrc (a binary cache's password).
func TestAttackRootClusterSecrets(t *testing.T) {
	requireRootSandbox(t)
	ws := t.TempDir()
	system := map[string]string{}
	for i, p := range []string{"/var/snap/microk8s/current/credentials/client.config",
		"/var/snap/microk8s/current/certs/ca.key", "/var/lib/k0s/pki/admin.conf",
		"/etc/guix/signing-key.sec", "/etc/nix/netrc"} {
		system[p] = fmt.Sprintf("ROOT-CLUSTER-SECRET-%d\n", i)
	}
	secrets := map[string]string{}
	for _, p := range makeHostFiles(t, system) {
		secrets[p] = system[p]
	}
	requireHiddenFromRoot(t, ws, secrets)
}

// chainHomeEnv and chainNamesEnv carry, for the unprivileged re-run, the
// home makeChainHome made and its key's names (a line each).
const (
	chainHomeEnv  = "AGENTPROC_ATK15R_CHAIN_HOME"
	chainNamesEnv = "AGENTPROC_ATK15R_CHAIN_NAMES"
)

// TestAttack15rUnprivileged re-runs TestAttackHiddenPathBindThenOverlay
// as the unprivileged user, Landlock and seccomp alone, with the mounts
// made by root.
func TestAttack15rUnprivileged(t *testing.T) {
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
	home, names := makeChainHome(t, uid, gid)
	const test = "TestAttackHiddenPathBindThenOverlay"
	out, err := testuser.Run(t, 2*time.Minute, []string{chainHomeEnv + "=" + home, chainNamesEnv + "=" + strings.Join(names, "\n")},
		"-test.run=^"+test+"$")
	if err != nil {
		t.Fatalf("as %s: %v\n%s", sandboxUser, err, out)
	}
	if !strings.Contains(out, "--- PASS: "+test+" ") {
		t.Errorf("as %s: got no PASS line for %s, want one\n%s", sandboxUser, test, out)
	}
}

// makeChainHome makes, as root, dir/home with a hidden key at
// .ssh/id_ed25519, uid's and gid's, and shows it at other names through
// chains of a bind and an overlay: the home bound at dir/bind and that
// bind an overlay's lower layer at dir/merged; an overlay of the home at
// dir/merged2, that point bound at dir/rebind, and the bind another
// overlay's lower layer at dir/merged3. It returns the home and
// the key's names; Cleanup unmounts them.
func makeChainHome(t *testing.T, uid, gid int) (home string, names []string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "agentproc-chain-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	name := func(s ...string) string { return filepath.Join(append([]string{dir}, s...)...) }
	home = name("home")
	for _, d := range []string{filepath.Join(home, ".ssh"), filepath.Join(home, "project"), name("bind"), name("upper"), name("work"),
		name("merged"), name("upper2"), name("work2"), name("merged2"), name("rebind"), name("upper3"), name("work3"), name("merged3")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	key := filepath.Join(home, ".ssh", "id_ed25519")
	if err := os.WriteFile(key, []byte("CHAIN-KEY\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{home, filepath.Join(home, ".ssh"), key, filepath.Join(home, "project")} {
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	mount := func(src, point, fstype string, flags uintptr, data string) {
		if err := syscall.Mount(src, point, fstype, flags, data); err != nil {
			t.Skipf("mount at %s: %v", point, err)
		}
		t.Cleanup(func() { _ = syscall.Unmount(point, syscall.MNT_DETACH) })
	}
	mount(home, name("bind"), "", syscall.MS_BIND, "")
	mount("overlay", name("merged"), "overlay", 0, "lowerdir="+name("bind")+",upperdir="+name("upper")+",workdir="+name("work"))
	mount("overlay", name("merged2"), "overlay", 0, "lowerdir="+home+",upperdir="+name("upper2")+",workdir="+name("work2"))
	mount(name("merged2"), name("rebind"), "", syscall.MS_BIND, "")
	mount("overlay", name("merged3"), "overlay", 0, "lowerdir="+name("rebind")+",upperdir="+name("upper3")+",workdir="+name("work3"))
	return home, []string{name("bind", ".ssh", "id_ed25519"), name("merged", ".ssh", "id_ed25519"),
		name("merged2", ".ssh", "id_ed25519"), name("rebind", ".ssh", "id_ed25519"), name("merged3", ".ssh", "id_ed25519")}
}

// TestAttackHiddenPathBindThenOverlay: a hidden path's other names were
// looked for one mechanism at a time: binds of its own file system
// (mountAliasesOf) and overlays with a layer on or in it
// (overlayAliases), each from the hidden paths as named. A chain of the
// two was not followed: the home bound elsewhere (a toolbox's or a
// chroot's /home) and that bind an overlay's lower layer showed ~/.ssh at
// the overlay's point; so did an overlay of the home, bound elsewhere and
// the bind another overlay's layer. The bind of an overlay itself held
// (one superblock's inodes at both points). The control reads each name
// unconfined. Runs as root and, through TestAttack15rUnprivileged, not.
func TestAttackHiddenPathBindThenOverlay(t *testing.T) {
	requireSandbox(t)
	home, names := os.Getenv(chainHomeEnv), strings.Split(os.Getenv(chainNamesEnv), "\n")
	if home == "" {
		if os.Geteuid() != 0 {
			t.Skip("the mounts need root: TestAttack15rUnprivileged makes them and runs this as " + sandboxUser)
		}
		home, names = makeChainHome(t, 0, 0)
	}
	t.Setenv("HOME", home)
	ws := filepath.Join(home, "project")
	cmd := ""
	for _, n := range names {
		cmd += "echo " + shellQuote(n) + ": $(cat " + shellQuote(n) + " 2>&1); "
	}
	req := agentproc.Request{Command: cmd, WorkDir: ws, Timeout: time.Minute}
	if ctl := runSandboxed(t, newManager(t, agentproc.WithRedaction(false)), req).Text; strings.Count(ctl, "CHAIN-KEY") != len(names) {
		t.Fatalf("control without the sandbox: got %q, want the key read at each of its %d names", ctl, len(names))
	}
	out := runSandboxed(t, newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws))), req).Text
	for line := range strings.Lines(out) {
		if strings.Contains(line, "CHAIN-KEY") {
			t.Errorf("a hidden key was read through a bind and an overlay: got %q, want it refused at every name", strings.TrimSpace(line))
		}
	}
}

// TestAttackMountUnitAndAutofsCredentials: the other tables that name a
// mount's credentials file as fstab does: systemd's .mount units
// (Options=credentials=...) and autofs maps (-fstype=cifs,credentials=...).
// Root's 0600, which a root tree owns and read.
func TestAttackMountUnitAndAutofsCredentials(t *testing.T) {
	requireRootSandbox(t)
	ws, dir := t.TempDir(), t.TempDir()
	name := func(s string) string { return filepath.Join(dir, s) }
	secrets := map[string]string{name("unit-creds"): "password=UNIT-CIFS-SECRET\n", name("unit-s3fs"): "bucket:UNIT-S3FS-SECRET\n",
		name("autofs-creds"): "password=AUTOFS-CIFS-SECRET\n"}
	for p, s := range secrets {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for p, s := range map[string]string{
		name("mnt-nas.mount"): "[Unit]\nDescription=NAS\n\n[Mount]\nWhat=//nas/share\nWhere=/mnt/nas\nType=cifs\nOptions=uid=1000,credentials=" + name("unit-creds") + "\n",
		name("mnt-s3.mount"):  "[Mount]\nWhat=bucket\nWhere=/mnt/s3\nType=fuse.s3fs\nOptions = _netdev,passwd_file=" + name("unit-s3fs") + "\n",
		name("auto.master"):   "/mnt/smb " + name("auto.smb") + " --timeout=60\n",
		name("auto.smb"):      "# key options location\nshare -fstype=cifs,rw,credentials=" + name("autofs-creds") + " ://nas/share\n",
	} {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	agentproc.SetMountTableGlobs(t, name("*.mount"), name("auto.*"))
	requireHiddenFromRoot(t, ws, secrets)
}

// TestAttackNixConfSecretFiles: the Nix daemon's configuration names its
// binary cache's signing keys (secret-key-files, a list) and its netrc
// (netrc-file) at the administrator's choice of place. A signing key
// signs store paths that every host trusting the cache substitutes and
// runs. Root's 0600, which a root tree owns and read.
func TestAttackNixConfSecretFiles(t *testing.T) {
	requireRootSandbox(t)
	ws, dir := t.TempDir(), t.TempDir()
	name := func(s string) string { return filepath.Join(dir, s) }
	secrets := map[string]string{name("cache-priv-key.pem"): "cache.example.org-1:NIX-SIGNING-KEY\n",
		name("old-key.sec"): "cache.example.org-0:NIX-OLD-SIGNING-KEY\n", name("netrc"): "machine cache password NIX-NETRC-SECRET\n"}
	for p, s := range secrets {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	conf := "# nix.conf\nexperimental-features = nix-command flakes\n" +
		"secret-key-files = " + name("cache-priv-key.pem") + " " + name("old-key.sec") + "\n" +
		"netrc-file=" + name("netrc") + "\n"
	if err := os.WriteFile(name("nix.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	agentproc.SetNixConfPath(t, name("nix.conf"))
	requireHiddenFromRoot(t, ws, secrets)
}
