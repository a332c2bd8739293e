package agentproc_test

import (
	"os"
	"os/exec"
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

// Tests of the thirteenth attack review (unprivileged and the surfaces):
// docs/sandbox-threats.md, "Thirteenth attack review (unprivileged and
// the surfaces)".

// btrfsSubvolEnv names, for the unprivileged run of
// TestAttackHiddenPathBtrfsSubvolume, the directory that makeBtrfsSubvolHome
// made as root: the test itself cannot mount.
const btrfsSubvolEnv = "AGENTPROC_TEST_BTRFS_SUBVOL"

// makeBtrfsSubvolHome makes, as root, a btrfs file system in a file, with a
// subvolume "home" holding a key in .ssh and a project, owned by uid and
// gid; mounts its top level at dir/top and the subvolume at dir/home (the
// layout of Fedora's and openSUSE's default install, where / and /home
// are subvolumes of one file system, with the top level mounted for
// snapshots), and returns dir. It skips where btrfs or its tools are
// missing. Cleanup unmounts and removes them.
func makeBtrfsSubvolHome(t *testing.T, uid, gid int) string {
	t.Helper()
	if fs, err := os.ReadFile("/proc/filesystems"); err != nil || !strings.Contains(string(fs), "\tbtrfs\n") {
		t.Skip("the kernel has no btrfs")
	}
	for _, tool := range []string{"mkfs.btrfs", "btrfs"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s (btrfs-progs) is needed to make the file system: %v", tool, err)
		}
	}
	dir, err := os.MkdirTemp("", "agentproc-btrfs-")
	if err != nil {
		t.Fatal(err)
	}
	img, top, home := filepath.Join(dir, "img"), filepath.Join(dir, "top"), filepath.Join(dir, "home")
	t.Cleanup(func() {
		for _, p := range []string{home, top} {
			_ = syscall.Unmount(p, syscall.MNT_DETACH)
		}
		_ = os.RemoveAll(dir)
	})
	run := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Skipf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	for _, d := range []string{top, home} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A sparse file: mkfs writes a few MiB of it.
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 256<<20); err != nil {
		t.Fatal(err)
	}
	run("mkfs.btrfs", "-q", img)
	run("mount", "-o", "loop", img, top)
	run("btrfs", "-q", "subvolume", "create", filepath.Join(top, "home"))
	sub := filepath.Join(top, "home")
	for _, d := range []string{filepath.Join(sub, ".ssh"), filepath.Join(sub, "project")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	key := filepath.Join(sub, ".ssh", "id_ed25519")
	if err := os.WriteFile(key, []byte("BTRFS-HOME-KEY\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{sub, filepath.Join(sub, ".ssh"), key, filepath.Join(sub, "project")} {
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(sub, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	run("mount", "-o", "loop,subvol=home", img, home)
	return dir
}

// TestAttackHiddenPathBtrfsSubvolume: the twelfth review hid a hidden
// path's other names on a file system mounted twice
// (hiddenMountAliases), finding the path's mounts in mountinfo by the
// device its stat reports. On btrfs that is not the device mountinfo
// shows: each subvolume has a device number of its own (st_dev), and
// mountinfo names the file system's (0:39 in mountinfo, 0:40 for the top
// level's files and 0:41 for the subvolume's here), so no other name was
// found. With the top level mounted beside the home subvolume (Fedora's
// and openSUSE's layout, the top level mounted for snapshots), the key
// hidden at ~/.ssh was read at top/home/.ssh, as root and not. The
// control reads the key at both names without the sandbox. Runs as root
// and, through TestAttack13uUnprivileged, not (root makes the mounts).
func TestAttackHiddenPathBtrfsSubvolume(t *testing.T) {
	requireSandbox(t)
	dir := os.Getenv(btrfsSubvolEnv)
	if dir == "" {
		if os.Geteuid() != 0 {
			t.Skip("the mounts need root: TestAttack13uUnprivileged makes them and runs this as " + sandboxUser)
		}
		dir = makeBtrfsSubvolHome(t, 0, 0)
	}
	home := filepath.Join(dir, "home")
	t.Setenv("HOME", home)
	ws := filepath.Join(home, "project")
	names := []string{filepath.Join(home, ".ssh", "id_ed25519"), filepath.Join(dir, "top", "home", ".ssh", "id_ed25519")}
	cmd := ""
	for _, n := range names {
		cmd += "echo " + shellQuote(n) + ": $(cat " + shellQuote(n) + " 2>&1); "
	}
	plain := newManager(t, agentproc.WithRedaction(false))
	if ctl := runSandboxed(t, plain, agentproc.Request{Command: cmd, WorkDir: ws, Timeout: time.Minute}).Text; strings.Count(ctl, "BTRFS-HOME-KEY") != len(names) {
		t.Fatalf("control without the sandbox: got %q, want the key read at each of its %d names", ctl, len(names))
	}
	m := newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	out := runSandboxed(t, m, agentproc.Request{Command: cmd + "echo PROJECT $(ls -d " + shellQuote(filepath.Join(dir, "top", "home", "project")) + " && echo listed)", WorkDir: ws, Timeout: time.Minute}).Text
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "BTRFS-HOME-KEY") {
			t.Errorf("a hidden key read under the sandbox: %q", line)
		}
	}
	if !strings.Contains(out, "listed") {
		t.Errorf("the other mount's unhidden part: got %q, want it readable", out)
	}
}

// TestAttack13uUnprivileged runs this review's tests as the unprivileged
// user, with the mounts made here as root.
func TestAttack13uUnprivileged(t *testing.T) {
	requireSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the tests as " + sandboxUser)
	}
	tests := []string{"TestAttackHiddenPathBtrfsSubvolume", "TestAttackHiddenDirPartBoundElsewhere", "TestAttackMoreEngineKeys", "TestAttackMoreLoginFiles", "TestAttackHideWatchGrowsWithoutBound", "TestAttackHiddenFileSwappedForLink", "TestHideWatchHiddenFileRewritten"}
	u, err := user.Lookup(sandboxUser)
	if err != nil {
		t.Skipf("no user %s: %v", sandboxUser, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	env := []string{partBoundEnv + "=" + makePartBoundHome(t, uid, gid)}
	if _, err := exec.LookPath("mkfs.btrfs"); err == nil {
		env = append(env, btrfsSubvolEnv+"="+makeBtrfsSubvolHome(t, uid, gid))
	}
	out, err := testuser.Run(t, 2*time.Minute, env, "-test.run=^("+strings.Join(tests, "|")+")$")
	if err != nil {
		t.Fatalf("as %s: %v\n%s", sandboxUser, err, out)
	}
	for _, name := range tests {
		if !strings.Contains(out, "--- PASS: "+name+" ") {
			t.Errorf("as %s: got no PASS line for %s, want one\n%s", sandboxUser, name, out)
		}
	}
}

// partBoundEnv names, for the unprivileged run of
// TestAttackHiddenDirPartBoundElsewhere, the directory that
// makePartBoundHome made as root.
const partBoundEnv = "AGENTPROC_TEST_PART_BOUND"

// makePartBoundHome makes, as root, dir/home with a key in
// home/.gnupg/private-keys-v1.d and a project, owned by uid and gid, binds
// home/.gnupg/private-keys-v1.d a second time at dir/keys, and returns
// dir. Cleanup unmounts and removes them.
func makePartBoundHome(t *testing.T, uid, gid int) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "agentproc-partbound-")
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	keys := filepath.Join(home, ".gnupg", "private-keys-v1.d")
	alt := filepath.Join(dir, "keys")
	t.Cleanup(func() {
		_ = syscall.Unmount(alt, syscall.MNT_DETACH)
		_ = os.RemoveAll(dir)
	})
	for _, d := range []string{keys, filepath.Join(home, "project"), alt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	key := filepath.Join(keys, "A1B2.key")
	if err := os.WriteFile(key, []byte("PART-BOUND-KEY\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{home, filepath.Join(home, ".gnupg"), keys, key, filepath.Join(home, "project")} {
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{filepath.Join(home, ".gnupg"), keys} {
		if err := os.Chmod(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mount(keys, alt, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("bind mount %s: %v", alt, err)
	}
	return dir
}

// TestAttackHiddenDirPartBoundElsewhere: the twelfth review hid a hidden
// path's other names through a second mount of its file system, looking
// only at mounts whose root holds the hidden path (a home bound twice). A
// mount of a directory inside a hidden one (~/.gnupg/private-keys-v1.d
// bound at dir/keys, as a backup, a chroot or a container's volume set
// up by hand does) is another name of part of it, and was missed:
// without root dir/keys, an entry of a directory above the hidden path,
// was granted whole, and the grant, on the bound directory's inode, also
// opened it at its first name; as root the cover is bound at ~/.gnupg
// alone. The key was read at both names. The root review found the same
// (TestAttackHiddenPathPartMounted, ~/.ssh/keys) and its fix closes this
// one too. The control reads it at both without the sandbox. Runs as root and, through TestAttack13uUnprivileged,
// not (root makes the mount).
func TestAttackHiddenDirPartBoundElsewhere(t *testing.T) {
	requireSandbox(t)
	dir := os.Getenv(partBoundEnv)
	if dir == "" {
		if os.Geteuid() != 0 {
			t.Skip("the bind mount needs root: TestAttack13uUnprivileged makes it and runs this as " + sandboxUser)
		}
		dir = makePartBoundHome(t, 0, 0)
	}
	home := filepath.Join(dir, "home")
	t.Setenv("HOME", home)
	ws := filepath.Join(home, "project")
	names := []string{filepath.Join(home, ".gnupg", "private-keys-v1.d", "A1B2.key"), filepath.Join(dir, "keys", "A1B2.key")}
	cmd := ""
	for _, n := range names {
		cmd += "echo " + shellQuote(n) + ": $(cat " + shellQuote(n) + " 2>&1); "
	}
	plain := newManager(t, agentproc.WithRedaction(false))
	if ctl := runSandboxed(t, plain, agentproc.Request{Command: cmd, WorkDir: ws, Timeout: time.Minute}).Text; strings.Count(ctl, "PART-BOUND-KEY") != len(names) {
		t.Fatalf("control without the sandbox: got %q, want the key read at each of its %d names", ctl, len(names))
	}
	m := newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	out := runSandboxed(t, m, agentproc.Request{Command: cmd + "echo PROJECT $(ls -d " + shellQuote(ws) + " && echo listed)", WorkDir: ws, Timeout: time.Minute}).Text
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "PART-BOUND-KEY") {
			t.Errorf("a hidden key read under the sandbox: %q", line)
		}
	}
	if !strings.Contains(out, "listed") {
		t.Errorf("the work dir: got %q, want it readable", out)
	}
}

// TestAttackMoreEngineKeys: the eleventh review hid the container engines'
// VMs that a user runs from the home (Docker Desktop's, Colima's, Lima's
// ~/.lima). Others keep the same keys elsewhere: Rancher Desktop on Linux
// runs Lima with its home at ~/.local/share/rancher-desktop/lima (the VM's
// ssh key _config/user; the VM mounts the home), podman machine keeps one
// ssh key for all its VMs at ~/.local/share/containers/podman/machine/machine
// (its connections log in as core and as root), and a Docker context for a
// remote engine keeps the TLS client key the CLI copied in at
// ~/.docker/contexts/tls/HASH/docker/key.pem (a remote dockerd is root on
// its host). A tree read each. The control reads them without the
// sandbox. Runs as root and, through TestAttack13uUnprivileged, not.
func TestAttackMoreEngineKeys(t *testing.T) {
	attackHomeFiles(t, []string{
		".local/share/rancher-desktop/lima/_config/user",
		".local/share/containers/podman/machine/machine",
		".docker/contexts/tls/5f2e3b1c/docker/key.pem",
	})
}

// TestAttackMoreLoginFiles: logins kept in the home by tools the list did
// not name: Teleport's tsh (~/.tsh: the user's private key and the
// certificates that reach every node, cluster and database the role
// allows), MySQL's login paths (~/.mylogin.cnf, `mysql_config_editor`'s
// passwords, obfuscated with a key kept in the same file; ~/.my.cnf was
// listed), uv's credential store (`uv auth login`, plaintext), Poetry's
// (auth.toml, where no keyring runs) and Argo CD's CLI token (either of its
// config paths). A tree read each. The control reads them without the
// sandbox. Runs as root and, through TestAttack13uUnprivileged, not.
func TestAttackMoreLoginFiles(t *testing.T) {
	attackHomeFiles(t, []string{
		".tsh/keys/teleport.example.com/alice",
		".mylogin.cnf",
		".local/share/uv/credentials/credentials.toml",
		".config/pypoetry/auth.toml",
		".config/argocd/config",
		".argocd/config",
	})
}

// inotifyWatches counts the watches of this process's largest inotify
// instance, from /proc/self/fdinfo: the Manager's hide watch, which
// maxHideWatches bounds. Its mount watch is another instance, with a
// watch for the nearest directory above each missing path its policies
// cover (sixteenth reviews: the log sockets' and the password database's
// home added one, which made the sum of both 257 against a bound of 256).
func inotifyWatches(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fdinfo")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		b, err := os.ReadFile(filepath.Join("/proc/self/fdinfo", fd.Name()))
		if err == nil {
			n = max(n, strings.Count(string(b), "inotify wd:"))
		}
	}
	return n
}

// TestAttackHideWatchGrowsWithoutBound: hideWatch (fourth mend) watches
// each directory the hidden-link walk reads, for every policy a Manager
// resolves, and never let a watch go: not when the policy cache started
// over, nor for a policy it did not keep (a Start refused, or one that
// could not be watched). An httpapi client names the hidden paths
// (Sandbox.Hide, up to 1,024, each walked to 256 entries): each request
// with new directories (a tree can make 260,000 in its work dir) left the
// host holding up to 262,000 more watches, each pinning its inode in
// kernel memory, until the user's fs.inotify.max_user_watches (8,192 to
// about a million, by the machine's memory) was spent: then every other
// program of the user (an editor's or a build's file watcher, a tree's
// `npm run dev`) failed to watch (ENOSPC) for as long as the server ran.
// The control: the requests run, and the first adds watches. Runs as root
// and, through TestAttack13uUnprivileged, not. Not parallel: it lowers the
// bound for every Manager of the binary.
func TestAttackHideWatchGrowsWithoutBound(t *testing.T) {
	requireSandbox(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	ws := filepath.Join(home, "project")
	// The bound is lowered to 256 for the test (the library's is 4,096):
	// three requests of 4 hidden directories of 50 each pass it.
	const groups, perGroup, subdirs, bound = 3, 4, 50, 256
	defer agentproc.SetMaxHideWatches(bound)()
	for g := range groups {
		for i := range perGroup {
			for j := range subdirs {
				if err := os.MkdirAll(filepath.Join(home, "data", strconv.Itoa(g), strconv.Itoa(i), strconv.Itoa(j)), 0o700); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	base := agentproc.WorkspaceSandbox(ws)
	m := newManager(t, agentproc.WithSandbox(base))
	before := inotifyWatches(t)
	var after []int
	for g := range groups {
		var hide []string
		for i := range perGroup {
			hide = append(hide, filepath.Join(home, "data", strconv.Itoa(g), strconv.Itoa(i)))
		}
		sb, err := base.Narrow(&agentproc.Sandbox{Hide: hide})
		if err != nil {
			t.Fatal(err)
		}
		if out := runSandboxed(t, m, agentproc.Request{Command: "echo ran", WorkDir: ws, Sandbox: sb, Timeout: time.Minute}).Text; !strings.Contains(out, "ran") {
			t.Fatalf("request %d: got %q, want it run", g, out)
		}
		after = append(after, inotifyWatches(t)-before)
	}
	if after[0] < perGroup*subdirs {
		t.Fatalf("control: got %d watches after the first request, want at least the %d directories it hid", after[0], perGroup*subdirs)
	}
	t.Logf("watches held after each request: %v", after)
	for i, n := range after {
		if n > bound {
			t.Errorf("watches held after request %d of %d: got %d (%v), want at most %d", i+1, groups, n, after, bound)
		}
	}
}

// TestAttackHiddenFileSwappedForLink: the fourth mend has a Manager
// resolve a policy again when a link or a directory is made in a hidden
// directory, or a hidden directory is moved or removed, after the policy
// was resolved (a dotfile manager run while an agent works). A hidden
// path that is a file had no watch at all: a dotfile manager adopting it
// (`mv ~/.docker/config.json ~/dotfiles/docker/` and a link back, as
// `stow --adopt` or `chezmoi add --follow` leave it) moved the secret to
// a place the policy did not hide, and the link at the hidden name kept
// nothing from the next tree: it read the file at its new place, through
// the Manager's kept policy, until the server restarted. The control: the
// first tree cannot read the file at its hidden name, and an unconfined
// tree reads it at the new place. Runs as root and, through
// TestAttack13uUnprivileged, not.
func TestAttackHiddenFileSwappedForLink(t *testing.T) {
	requireSandbox(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	ws := filepath.Join(home, "project")
	dot := filepath.Join(home, "dotfiles", "docker")
	hidden := filepath.Join(home, ".docker", "config.json")
	moved := filepath.Join(dot, "config.json")
	for _, d := range []string{ws, filepath.Dir(hidden), dot} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(hidden, []byte("SWAPPED-DOCKER-AUTH\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	req := agentproc.Request{Command: "cat " + shellQuote(hidden) + " " + shellQuote(moved) + "; true", WorkDir: ws, Timeout: time.Minute}
	m := newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	if out := runSandboxed(t, m, req).Text; strings.Contains(out, "SWAPPED-DOCKER-AUTH") {
		t.Fatalf("control: the first tree read the hidden file: %q", out)
	}
	// The dotfile manager adopts the file, after the first Start.
	if err := os.Rename(hidden, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(moved, hidden); err != nil {
		t.Fatal(err)
	}
	plain := newManager(t, agentproc.WithRedaction(false))
	if out := runSandboxed(t, plain, req).Text; strings.Count(out, "SWAPPED-DOCKER-AUTH") != 2 {
		t.Fatalf("control: unconfined, got %q, want the file read at both names", out)
	}
	if out := runSandboxed(t, m, req).Text; strings.Contains(out, "SWAPPED-DOCKER-AUTH") {
		t.Errorf("the next tree read the hidden file, moved and linked back after the first Start: %q", out)
	}
}
