package agentproc_test

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/internal/testuser"
)

// partMountEnv and btrfsHomeEnv name, for the unprivileged re-run, the
// directories root made with makePartMounts and makeBtrfsHome.
const (
	partMountEnv = "AGENTPROC_ATK13R_PART_MOUNTS"
	btrfsHomeEnv = "AGENTPROC_ATK13R_BTRFS_HOME"
)

// makePartMounts makes, as root, dir/home with a hidden ~/.ssh holding a
// key in a subdirectory (keys/id_ed25519) and a ~/.netrc, owned by uid and
// gid, and binds a part of each elsewhere: ~/.ssh/keys at dir/keys and
// ~/.netrc at dir/netrc, mounts whose root is inside a hidden path rather
// than one showing the whole of it; and binds dir/vault (a token) into
// ~/.ssh/vault, a mount inside a hidden directory whose file system shows
// the same files elsewhere. Cleanup unmounts and removes them.
func makePartMounts(t *testing.T, uid, gid int) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "agentproc-part-")
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	binds := [][2]string{{filepath.Join(home, ".ssh", "keys"), filepath.Join(dir, "keys")}, {filepath.Join(home, ".netrc"), filepath.Join(dir, "netrc")},
		{filepath.Join(dir, "vault"), filepath.Join(home, ".ssh", "vault")}}
	t.Cleanup(func() {
		for _, b := range binds {
			_ = syscall.Unmount(b[1], syscall.MNT_DETACH)
		}
		_ = os.RemoveAll(dir)
	})
	for _, d := range []string{filepath.Join(home, ".ssh", "keys"), filepath.Join(home, ".ssh", "vault"), filepath.Join(home, "project"), filepath.Join(dir, "keys"), filepath.Join(dir, "vault")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		filepath.Join(home, ".ssh", "keys", "id_ed25519"): "PART-MOUNT-KEY\n",
		filepath.Join(home, ".netrc"):                     "machine example.com password PART-MOUNT-NETRC\n",
		filepath.Join(dir, "netrc"):                       "",
		filepath.Join(dir, "vault", "token"):              "PART-MOUNT-VAULT\n",
	}
	for p, s := range files {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{home, filepath.Join(home, ".ssh"), filepath.Join(home, ".ssh", "keys"), filepath.Join(home, ".ssh", "keys", "id_ed25519"), filepath.Join(home, ".netrc"), filepath.Join(home, "project"), filepath.Join(dir, "vault"), filepath.Join(dir, "vault", "token")} {
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, b := range binds {
		if err := syscall.Mount(b[0], b[1], "", syscall.MS_BIND, ""); err != nil {
			t.Skipf("bind mount %s: %v", b[1], err)
		}
	}
	return dir
}

// TestAttackHiddenPathPartMounted: the twelfth review hid a hidden path's
// other names where its file system is mounted twice, but only at mounts
// that show the whole hidden path (a mount whose root is the hidden path
// or above it). A mount whose root lies inside a hidden directory, or is a
// hidden file (a bind of ~/.ssh/keys or of ~/.netrc elsewhere: a
// container's or a backup job's view, an fstab bind of one directory),
// shows part of it under another name, and a tree read the key and the
// password there: as root the cover is bound at the hidden name alone,
// and without root the other mount's point is a granted sibling. The
// control reads both without the sandbox. Runs as root and, through
// TestAttack13rUnprivileged, not.
func TestAttackHiddenPathPartMounted(t *testing.T) {
	requireSandbox(t)
	dir := os.Getenv(partMountEnv)
	if dir == "" {
		if os.Geteuid() != 0 {
			t.Skip("the bind mounts need root: TestAttack13rUnprivileged makes them and runs this as " + sandboxUser)
		}
		dir = makePartMounts(t, 0, 0)
	}
	home := filepath.Join(dir, "home")
	t.Setenv("HOME", home)
	ws := filepath.Join(home, "project")
	names := []string{filepath.Join(home, ".ssh", "keys", "id_ed25519"), filepath.Join(dir, "keys", "id_ed25519"), filepath.Join(home, ".netrc"), filepath.Join(dir, "netrc"),
		filepath.Join(home, ".ssh", "vault", "token"), filepath.Join(dir, "vault", "token")}
	cmd := ""
	for _, n := range names {
		cmd += "echo " + shellQuote(n) + ": $(cat " + shellQuote(n) + " 2>&1); "
	}
	req := agentproc.Request{Command: cmd + "echo HOME $(ls " + shellQuote(dir) + " && echo listed)", WorkDir: ws, Timeout: time.Minute}
	plain := newManager(t, agentproc.WithRedaction(false))
	if ctl := runSandboxed(t, plain, req).Text; strings.Count(ctl, "PART-MOUNT-") != len(names) {
		t.Fatalf("control without the sandbox: got %q, want the secrets read at each of their %d names", ctl, len(names))
	}
	m := newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	out := runSandboxed(t, m, req).Text
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "PART-MOUNT-") {
			t.Errorf("a hidden secret read under the sandbox: %q", line)
		}
	}
	if !strings.Contains(out, "listed") {
		t.Errorf("the directory above the mounts: got %q, want it listable", out)
	}
}

// TestAttack13rUnprivileged re-runs this review's tests that need mounts
// made by root as the unprivileged user, Landlock and seccomp alone.
func TestAttack13rUnprivileged(t *testing.T) {
	requireSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to make the mounts and switch users")
	}
	tests := []string{"TestAttackHiddenPathPartMounted", "TestAttackHiddenPathBtrfsTopLevel", "TestAttackServerMailAndBackupSecrets"}
	u, err := user.Lookup(sandboxUser)
	if err != nil {
		t.Skipf("no user %s: %v", sandboxUser, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir := makePartMounts(t, uid, gid)
	btrfs := makeBtrfsHome(t, uid, gid)
	out, err := testuser.Run(t, 2*time.Minute, []string{partMountEnv + "=" + dir, btrfsHomeEnv + "=" + btrfs}, "-test.run=^("+strings.Join(tests, "|")+")$")
	if err != nil {
		t.Fatalf("as %s: %v\n%s", sandboxUser, err, out)
	}
	for _, name := range tests {
		if !strings.Contains(out, "--- PASS: "+name+" ") {
			t.Errorf("as %s: got no PASS line for %s, want one\n%s", sandboxUser, name, out)
		}
	}
}

// TestAttackSystemdVarlinkDoors: the door list covers D-Bus, systemd's
// private socket and the varlink sockets directly in /run/systemd
// (io.systemd.*), not those systemd's services keep in directories of
// their own. systemd-machined's /run/systemd/machine/io.systemd.Machine
// (socket-activated where systemd-container is installed) serves a root
// peer without polkit: io.systemd.Machine.Open opens a shell or runs a
// command in a machine, the host (".host") among them, outside every
// sandbox, and io.systemd.MachineImage clones and removes images.
// systemd-resolved's /run/systemd/resolve/io.systemd.Resolve (mode 0666)
// resolves any name the tree sends, a channel off the host for a
// NetworkNone tree (nscd's socket is covered for that reason), and its
// io.systemd.Resolve.Monitor streams every name the host looks up to a
// root peer. The control reaches each unconfined; each is now covered
// (hostDoors).
func TestAttackSystemdVarlinkDoors(t *testing.T) {
	requireRootSandbox(t)
	ws := t.TempDir()
	socks := map[string][]string{
		"/run/systemd/machine/io.systemd.Machine":         {"/run/systemd/machine"},
		"/run/systemd/machine/io.systemd.MachineImage":    {"/run/systemd/machine"},
		"/run/systemd/resolve/io.systemd.Resolve":         {"/run/systemd/resolve"},
		"/run/systemd/resolve/io.systemd.Resolve.Monitor": {"/run/systemd/resolve"},
	}
	requireDoorsShut(t, ws, socks)
}

// makeHostFiles writes each file of files (path: contents, mode 0600,
// or 0644 where the name ends in passwd) that this host lacks, making the
// directories above it where missing; the files and directories it made
// are removed at cleanup, a file this host has is left alone. It returns
// the files it made.
func makeHostFiles(t *testing.T, files map[string]string) []string {
	t.Helper()
	var made []string
	for p, s := range files {
		if _, err := os.Lstat(p); err == nil {
			continue // this host's own: left alone
		}
		top := ""
		for d := filepath.Dir(p); d != "/"; d = filepath.Dir(d) {
			if _, err := os.Lstat(d); err == nil {
				break
			}
			top = d
		}
		if top != "" {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.RemoveAll(top) })
		}
		mode := os.FileMode(0o600)
		if strings.HasSuffix(p, "passwd") {
			mode = 0o644
		}
		if err := os.WriteFile(p, []byte(s), mode); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Remove(p) })
		made = append(made, p)
	}
	return made
}

// TestAttackKerberosDaemonsAndSSSD: WorkspaceSandbox hides root's
// Kerberos keytab and ticket caches in files, and SSSD's configuration,
// not the daemons that hold the same credentials, nor SSSD's state. As
// root a tree reached sssd-kcm's socket (/run/.heim_org.h5l.kcm-socket,
// the default ticket cache, KCM:, of Fedora and RHEL, which answers each
// peer with its uid's tickets: root's), gssproxy's (which initiates
// Kerberos contexts for a uid-0 peer with the machine's keytab,
// /etc/krb5.keytab, itself hidden) and read, as their owner, SSSD's
// caches (/var/lib/sss/db: a domain user's cached password hash where
// cache_credentials is on, the same class as /etc/shadow), KCM's
// database and the master key that opens it (/var/lib/sss/secrets: every
// user's tickets) and gssproxy's per-uid ticket caches
// (/var/lib/gssproxy/clients). The control reaches and reads each
// unconfined; SSSD's public name cache (/var/lib/sss/mc) stays readable
// under the sandbox, which the tree's own user lookups need.
func TestAttackKerberosDaemonsAndSSSD(t *testing.T) {
	requireRootSandbox(t)
	ws := t.TempDir()
	files := makeHostFiles(t, map[string]string{
		"/var/lib/sss/db/cache_example.com.ldb": "SSSD-CACHED-HASH\n",
		"/var/lib/sss/secrets/.secrets.mkey":    "SSSD-KCM-MKEY\n",
		"/var/lib/sss/secrets/secrets.ldb":      "SSSD-KCM-TICKETS\n",
		"/var/lib/gssproxy/clients/krb5cc_0":    "GSSPROXY-TICKET\n",
		"/var/lib/sss/mc/passwd":                "SSSD-PUBLIC-NAMES\n",
	})
	socks := map[string][]string{
		"/run/.heim_org.h5l.kcm-socket":  nil,
		"/run/gssproxy.sock":             nil,
		"/var/lib/gssproxy/default.sock": {"/var/lib/gssproxy"},
	}
	requireDoorsShut(t, ws, socks)
	var probe strings.Builder
	for _, p := range files {
		probe.WriteString("cat " + shellQuote(p) + " 2>/dev/null; ")
	}
	probe.WriteString("true")
	req := agentproc.Request{Command: probe.String(), WorkDir: ws, Timeout: time.Minute}
	control := runSandboxed(t, newManager(t, agentproc.WithRedaction(false)), req).Text
	out := runSandboxed(t, newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws))), req).Text
	for _, p := range files {
		want, _ := os.ReadFile(p)
		if !strings.Contains(control, string(want)) {
			t.Errorf("control: %s not read without the sandbox (output %q)", p, control)
		}
		public := strings.HasPrefix(p, "/var/lib/sss/mc/")
		if got := strings.Contains(out, string(want)); got != public {
			t.Errorf("%s under the sandbox: read %v, want %v", p, got, public)
		}
	}
}

// TestAttackAnsibleControlSockets: Ansible runs ssh with ControlMaster=auto
// and ControlPersist=60s by default, its masters' sockets in
// ~/.ansible/cp; the seventh review covered ssh's /tmp/ssh-* control
// paths, not these. For a minute after each playbook (for as long as one
// runs) a peer of the user's uid that connects to one runs a command on
// the managed host as Ansible's remote user (`ssh -S SOCKET host cmd`),
// no key needed: as root a tree reached it. The control reaches it
// unconfined; it is now in the credential list, covered as root.
func TestAttackAnsibleControlSockets(t *testing.T) {
	requireRootSandbox(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	ws := filepath.Join(home, "project")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(home, ".ansible", "cp")
	socks := map[string][]string{filepath.Join(cp, "8a1d3c5e7f"): {filepath.Join(home, ".ansible"), cp}}
	requireDoorsShut(t, ws, socks)
}

// makeBtrfsHome makes, as root, a btrfs file system in a file, with the
// home in a subvolume (@home, as openSUSE, Fedora and Ubuntu's btrfs
// installs lay it out) mounted at dir/home and the top level mounted at
// dir/top, a key in the home's .ssh and a project, owned by uid and gid;
// it returns dir. A subvolume's files report a device number of their
// own, not the one mountinfo gives both mounts. Cleanup unmounts and
// removes them; it skips where btrfs cannot be made.
func makeBtrfsHome(t *testing.T, uid, gid int) string {
	t.Helper()
	for _, tool := range []string{"mkfs.btrfs", "btrfs", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
	dir, err := os.MkdirTemp("", "agentproc-btrfs-")
	if err != nil {
		t.Fatal(err)
	}
	img, home, top := filepath.Join(dir, "img"), filepath.Join(dir, "home"), filepath.Join(dir, "top")
	run := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Skipf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	t.Cleanup(func() {
		for _, p := range []string{home, top} {
			_ = exec.Command("umount", p).Run()
		}
		_ = os.RemoveAll(dir)
	})
	for _, d := range []string{home, top} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 160<<20); err != nil {
		t.Fatal(err)
	}
	run("mkfs.btrfs", "-q", "-f", img)
	run("mount", "-o", "loop", img, top)
	run("btrfs", "-q", "subvolume", "create", filepath.Join(top, "@home"))
	run("mount", "-o", "loop,subvol=@home", img, home)
	for _, d := range []string{filepath.Join(home, ".ssh"), filepath.Join(home, "project")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	key := filepath.Join(home, ".ssh", "id_ed25519")
	if err := os.WriteFile(key, []byte("BTRFS-HOME-KEY\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{home, filepath.Join(home, ".ssh"), key, filepath.Join(home, "project")} {
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(top, "@home"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestAttackHiddenPathBtrfsTopLevel: a btrfs home kept in a subvolume
// (@home) with the file system's top level mounted elsewhere as well (a
// snapshot tool's or an administrator's mount of subvolid=5) shows the
// home's files at a second name, top/@home/.ssh. hiddenMountAliases
// grouped mounts by the device number a hidden path's stat reports, and
// a btrfs subvolume reports one of its own, not the file system's that
// mountinfo gives both mounts: no other name was found, and the tree read
// the key at top/@home (as root the cover is at the first name alone;
// without root the top's grant reaches it). docs/sandbox.md listed this as
// not tried. The control reads it at both names without the sandbox.
// Runs as root and, through TestAttack13rUnprivileged, not.
func TestAttackHiddenPathBtrfsTopLevel(t *testing.T) {
	requireSandbox(t)
	dir := os.Getenv(btrfsHomeEnv)
	if dir == "" {
		if os.Geteuid() != 0 {
			t.Skip("the mounts need root: TestAttack13rUnprivileged makes them and runs this as " + sandboxUser)
		}
		dir = makeBtrfsHome(t, 0, 0)
	}
	home := filepath.Join(dir, "home")
	t.Setenv("HOME", home)
	ws := filepath.Join(home, "project")
	names := []string{filepath.Join(home, ".ssh", "id_ed25519"), filepath.Join(dir, "top", "@home", ".ssh", "id_ed25519")}
	cmd := ""
	for _, n := range names {
		cmd += "echo " + shellQuote(n) + ": $(cat " + shellQuote(n) + " 2>&1); "
	}
	req := agentproc.Request{Command: cmd + "echo TOP $(ls " + shellQuote(filepath.Join(dir, "top", "@home", "project")) + " && echo listed)", WorkDir: ws, Timeout: time.Minute}
	plain := newManager(t, agentproc.WithRedaction(false))
	if ctl := runSandboxed(t, plain, req).Text; strings.Count(ctl, "BTRFS-HOME-KEY") != len(names) {
		t.Fatalf("control without the sandbox: got %q, want the key read at each of its %d names", ctl, len(names))
	}
	m := newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	out := runSandboxed(t, m, req).Text
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "BTRFS-HOME-KEY") {
			t.Errorf("a hidden key read under the sandbox: %q", line)
		}
	}
	if !strings.Contains(out, "listed") {
		t.Errorf("the top level's unhidden part: got %q, want it readable", out)
	}
}

// TestAttackSystemSnapshots: the eleventh review hid the copies the
// system keeps of the password files (/etc/shadow-, Debian's
// /var/backups), not the file system snapshots that keep every file of
// the root file system: snapper's /.snapshots/N/snapshot (openSUSE's
// default on btrfs, taken at each package change) and Timeshift's
// /timeshift/snapshots/DATE/localhost (Linux Mint's default, where the
// system disk holds them) each hold /etc/shadow, the host's ssh keys and
// the rest of systemSecretPaths, root's 0600 or 0640, which a root tree
// owns: it read them. The control reads them without the sandbox.
func TestAttackSystemSnapshots(t *testing.T) {
	requireRootSandbox(t)
	files := makeHostFiles(t, map[string]string{
		"/.snapshots/1/snapshot/etc/shadow":                             "SNAPPER-SHADOW\n",
		"/timeshift/snapshots/2026-11-28_07-00-00/localhost/etc/shadow": "TIMESHIFT-SHADOW\n",
	})
	if len(files) == 0 {
		t.Skip("this host has its own snapshots at both paths: left alone")
	}
	var probe strings.Builder
	for _, p := range files {
		probe.WriteString("cat " + shellQuote(p) + " 2>/dev/null; ")
	}
	probe.WriteString("true")
	ws := t.TempDir()
	req := agentproc.Request{Command: probe.String(), WorkDir: ws, Timeout: time.Minute}
	control := runSandboxed(t, newManager(t, agentproc.WithRedaction(false)), req).Text
	out := runSandboxed(t, newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws))), req).Text
	for _, p := range files {
		want, _ := os.ReadFile(p)
		if !strings.Contains(control, string(want)) {
			t.Errorf("control: %s not read without the sandbox (output %q)", p, control)
		}
		if strings.Contains(out, string(want)) {
			t.Errorf("a tree sandboxed as root read %s, want it hidden", p)
		}
	}
}

// TestAttackSystemdCredentials: systemd passes services their secrets as
// credentials (LoadCredential=, SetCredentialEncrypted=), files readable
// by the unit's user "and the superuser": a root tree is the owner of a
// root service's /run/credentials/UNIT (every running service's
// passwords and keys, in the clear) and of the system's own
// (/run/credentials/@system: what a VM or container manager passed in,
// root's password and authorized keys among them), of the credential
// stores (/etc/credstore, /run/credstore and their .encrypted twins) and
// of the host key that decrypts the encrypted ones where no TPM binds
// them (/var/lib/systemd/credential.secret): it read them. The control
// reads them without the sandbox.
func TestAttackSystemdCredentials(t *testing.T) {
	requireRootSandbox(t)
	files := makeHostFiles(t, map[string]string{
		"/run/credentials/agentproc-atk13r.service/db-password":   "CRED-SERVICE\n",
		"/run/credentials/@system/passwd.plaintext-password.root": "CRED-SYSTEM\n",
		"/etc/credstore/agentproc-atk13r-token":                   "CRED-STORE\n",
		"/run/credstore/agentproc-atk13r-token":                   "CRED-RUNSTORE\n",
		"/etc/credstore.encrypted/agentproc-atk13r-token":         "CRED-ENCRYPTED\n",
		"/var/lib/systemd/credential.secret":                      "CRED-HOST-KEY\n",
	})
	if len(files) == 0 {
		t.Skip("this host has its own credentials at each path: left alone")
	}
	var probe strings.Builder
	for _, p := range files {
		probe.WriteString("cat " + shellQuote(p) + " 2>/dev/null; ")
	}
	probe.WriteString("true")
	ws := t.TempDir()
	req := agentproc.Request{Command: probe.String(), WorkDir: ws, Timeout: time.Minute}
	control := runSandboxed(t, newManager(t, agentproc.WithRedaction(false)), req).Text
	out := runSandboxed(t, newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws))), req).Text
	for _, p := range files {
		want, _ := os.ReadFile(p)
		if !strings.Contains(control, string(want)) {
			t.Errorf("control: %s not read without the sandbox (output %q)", p, control)
		}
		if strings.Contains(out, string(want)) {
			t.Errorf("a tree sandboxed as root read %s, want it hidden", p)
		}
	}
}

// TestAttackServerMailAndBackupSecrets: secrets a server's root keeps
// that neither list named. In the home: acme.sh's (installed as root by
// its own script, ~/.acme.sh/account.conf holds the DNS provider's API
// token that proves any of the account's names, with the ACME account
// key), msmtp's and fetchmail's mail passwords. In the system (as root,
// the owner): Postfix's relay password map (/etc/postfix/sasl_passwd, and
// the .db or .lmdb it is compiled to: a SendGrid or Gmail app password),
// msmtp's and sSMTP's system configs, ddclient's DNS password, Samba's
// private store (secrets.tdb: a winbind member's machine account
// password; passdb.tdb: users' NT hashes), a Kerberos KDC's stash and
// database (every principal's keys), and borgmatic's configs (the
// backup repository's passphrase). A tree read each. The control reads
// them without the sandbox. The home part re-runs as agentproc-sandbox
// (TestAttack13rUnprivileged).
func TestAttackServerMailAndBackupSecrets(t *testing.T) {
	requireSandbox(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	ws := filepath.Join(home, "project")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{}
	for i, rel := range []string{".acme.sh/account.conf", ".msmtprc", ".fetchmailrc"} {
		secrets[filepath.Join(home, rel)] = fmt.Sprintf("SERVER-SECRET-HOME-%d\n", i)
	}
	for p, s := range secrets {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	files := slices.Collect(maps.Keys(secrets))
	if os.Geteuid() == 0 {
		system := map[string]string{}
		for i, p := range []string{"/etc/postfix/sasl_passwd", "/etc/postfix/sasl_passwd.db", "/etc/postfix/sasl_passwd.lmdb",
			"/etc/msmtprc", "/etc/ssmtp/ssmtp.conf", "/etc/ddclient.conf", "/etc/ddclient/ddclient.conf",
			"/var/lib/samba/private/secrets.tdb", "/etc/krb5kdc/stash", "/var/kerberos/krb5kdc/principal",
			"/var/lib/krb5kdc/principal", "/etc/borgmatic/config.yaml", "/etc/borgmatic.d/home.yaml"} {
			system[p] = fmt.Sprintf("SERVER-SECRET-SYSTEM-%d\n", i)
		}
		files = append(files, makeHostFiles(t, system)...)
	}
	var probe strings.Builder
	for _, p := range files {
		probe.WriteString("cat " + shellQuote(p) + " 2>/dev/null; ")
	}
	probe.WriteString("true")
	req := agentproc.Request{Command: probe.String(), WorkDir: ws, Timeout: time.Minute}
	control := runSandboxed(t, newManager(t, agentproc.WithRedaction(false)), req).Text
	out := runSandboxed(t, newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws))), req).Text
	for _, p := range files {
		want, _ := os.ReadFile(p)
		if !strings.Contains(control, string(want)) {
			t.Errorf("control: %s not read without the sandbox (output %q)", p, control)
		}
		if strings.Contains(out, string(want)) {
			t.Errorf("%s: got it read under the sandbox, want it hidden", p)
		}
	}
}

// TestAttackDoorOtherMount: the doors (hostDoors) join the mount spec
// when the namespace is built, after hiddenMountAliases has looked for the
// hidden paths' other names, so a door's directory mounted a second time
// (fail2ban's /run/fail2ban bound elsewhere; a /var/run that is a bind of
// /run rather than a link; a container given the host's /run at a second
// path) was reachable at the other name: fail2ban runs a command a client
// sets as a jail's action, as root. The control reaches the socket at
// both names unconfined; the sandboxed tree at neither.
func TestAttackDoorOtherMount(t *testing.T) {
	requireRootSandbox(t)
	ws := t.TempDir()
	sock := "/run/fail2ban/fail2ban.sock"
	made := makeDoors(t, map[string][]string{sock: {"/run/fail2ban"}}, 0o755)
	if len(made) == 0 {
		t.Skip("this host runs fail2ban: its socket is left alone")
	}
	alt := filepath.Join(t.TempDir(), "alt")
	if err := os.Mkdir(alt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("/run/fail2ban", alt, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("bind mount: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(alt, syscall.MNT_DETACH) })
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	probeDoors(t, ws, []string{sock, filepath.Join(alt, "fail2ban.sock")}, newManager(t), m)
}
