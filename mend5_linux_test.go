package agentproc_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
)

// Tests of the fifth mend: docs/sandbox-threats.md, "Fifth mend".

// TestHiddenFileHardLinkWarned: a hidden file with a second hard link
// outside the hidden path (`ln ~/.ssh/id_ed25519 ~/backup/`, a backup tool
// that links unchanged files across snapshots) is read through the other
// name, as root (the cover is bound at the hidden name) and not (Landlock's
// rules are on inodes, and the other name's directory is granted). The
// other name cannot be found cheaply, but the file's link count says it
// exists: each Start of the policy now names the hidden file in its
// warnings, a hidden path itself (~/.netrc) and a file in a hidden
// directory alike, and no file with one link. The control: the tree reads
// the key through the backup's name, so the warning names a real gap.
// Runs as root and, through TestMend5Unprivileged, not.
func TestHiddenFileHardLinkWarned(t *testing.T) {
	requireSandbox(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	ws := filepath.Join(home, "project")
	ssh := filepath.Join(home, ".ssh")
	backup := filepath.Join(home, "backup")
	for _, d := range []string{ws, ssh, backup} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	key, netrc, config := filepath.Join(ssh, "id_ed25519"), filepath.Join(home, ".netrc"), filepath.Join(ssh, "config")
	for p, s := range map[string]string{key: "LINKED-SSH-KEY", netrc: "LINKED-NETRC", config: "Host *"} {
		if err := os.WriteFile(p, []byte(s+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{key, netrc} {
		if err := os.Link(p, filepath.Join(backup, filepath.Base(p))); err != nil {
			t.Fatal(err)
		}
	}
	m := newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	req := agentproc.Request{Command: "cat " + shellQuote(filepath.Join(backup, "id_ed25519")) + "; cat " + shellQuote(key) + "; true",
		WorkDir: ws, Timeout: time.Minute}
	for i := range 2 { // the policy resolved, then kept: each Start warns
		p := mustStart(t, m, req)
		info := mustWait(t, p)
		w := strings.Join(info.Warnings, "\n")
		for _, f := range []string{key, netrc} {
			if n := strings.Count(w, "the file "+`"`+f+`"`+" has other hard links"); n != 1 {
				t.Errorf("Start %d: got %d warnings naming %s, want 1 (warnings %q)", i, n, f, w)
			}
		}
		if strings.Contains(w, config) || strings.Contains(w, backup) {
			t.Errorf("Start %d: warnings %q name a file with one link or the other name, want neither", i, w)
		}
		if i == 0 && strings.Count(p.Output().Text, "LINKED-SSH-KEY") != 1 {
			t.Errorf("control: got %q, want the key read through the backup's name only", p.Output().Text)
		}
	}
}

// TestMend5Unprivileged re-runs the fifth mend's tests as the
// unprivileged test user.
func TestMend5Unprivileged(t *testing.T) {
	rerunAsSandboxUser(t, []string{"TestHiddenFileHardLinkWarned", "TestForkingThreadLingerHeld"}, false)
}

// TestHiddenDirLinkToUsrSrc: /usr/src counted as a system tree (kernel
// headers are put there by packages), but container images keep their
// application there (`WORKDIR /usr/src/app`, as the official Node.js and
// Python images' documentation shows), root's files and world-readable:
// a hidden directory's link into such an application's config passed the
// system-file rule and was read at its target. /usr/src is now filled by
// hand (handTrees), like /usr/local (TestAttackHiddenDirLinkToUsrLocal).
func TestHiddenDirLinkToUsrSrc(t *testing.T) {
	requireRootSandbox(t)
	wantRootDotfileLinkHidden(t, "/usr/src")
}

// wantRootDotfileLinkHidden checks that a root-owned, world-readable file
// in a new directory under parent (a dotfile repository cloned as root
// where no package puts files), linked from ~/.aws, is hidden from a
// WorkspaceSandbox tree as root: the control reads it without the
// sandbox.
func wantRootDotfileLinkHidden(t *testing.T, parent string) {
	t.Helper()
	if st, err := os.Stat(parent); err != nil || !st.IsDir() {
		t.Skipf("no %s here", parent)
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	ws := filepath.Join(home, "project")
	repo, err := os.MkdirTemp(parent, "dotfiles")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(repo) })
	target := filepath.Join(repo, "aws", "credentials")
	for _, d := range []string{ws, filepath.Join(home, ".aws"), filepath.Dir(target)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{repo, filepath.Dir(target)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(target, []byte("aws_secret_access_key = HAND-TREE-DOTFILE-SECRET\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(home, ".aws", "credentials")); err != nil {
		t.Fatal(err)
	}
	cmd := "cat " + shellQuote(target) + "; true"
	plain := newManager(t, agentproc.WithRedaction(false))
	if ctl := runSandboxed(t, plain, agentproc.Request{Command: cmd, WorkDir: ws, Timeout: time.Minute}); !strings.Contains(ctl.Text, "HAND-TREE-DOTFILE-SECRET") {
		t.Fatalf("control without the sandbox: got %q, want the credentials read", ctl.Text)
	}
	m := newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	if out := runSandboxed(t, m, agentproc.Request{Command: cmd, WorkDir: ws, Timeout: time.Minute}); strings.Contains(out.Text, "HAND-TREE-DOTFILE-SECRET") {
		t.Errorf("the target of ~/.aws/credentials, a root-owned 0644 file under %s: got %q, want it hidden", parent, out.Text)
	}
}

// systemSecretCopies are the copies the system keeps of the password
// files, which WorkspaceSandbox hides (TestAttackSystemSecretCopies).
var systemSecretCopies = []string{"/etc/shadow-", "/etc/gshadow-", "/var/backups/shadow.bak", "/var/backups/gshadow.bak",
	"/etc/security/opasswd", "/var/log/btmp"}

// secretCopiesFixtureEnv tells TestAttackSystemSecretCopies that it runs
// in a mount namespace of its own, to make the copies the host lacks.
const secretCopiesFixtureEnv = "AGENTPROC_TEST_SECRET_COPIES_FIXTURE"

// TestSystemSecretCopiesFixture: TestAttackSystemSecretCopies skipped
// where the host keeps none of the password files' copies, and checked
// only those it keeps: the rule that hides the others was proved nowhere
// (the last session's read). It runs here again in a mount namespace of
// its own, where each copy the host lacks is made (an overlay on its
// nearest directory) and each one it keeps empty is covered by a file
// with content (a bind), root's and 0600, so that every copy is read by
// the unconfined control and none by the sandboxed tree; the copies the
// host keeps with content are its real files, checked as before. The
// host's file systems are not changed: the namespace's mounts are private
// and end with it.
func TestSystemSecretCopiesFixture(t *testing.T) {
	requireRootSandbox(t)
	if os.Getenv(secretCopiesFixtureEnv) != "" {
		t.Skip("inside the fixture's namespace: TestAttackSystemSecretCopies runs")
	}
	rerun(t, syscall.CLONE_NEWNS, "^TestAttackSystemSecretCopies$", []string{"TestAttackSystemSecretCopies"}, secretCopiesFixtureEnv+"=1")
}

// makeSecretCopyFixtures makes, in this process's own mount namespace
// (private from here on), each of paths that is missing or empty: missing
// ones in an overlay of their nearest existing directory, whose upper
// layer is a tmpfs, empty ones covered by a bind of a file there. The
// overlays come first: one made after a bind above it would hide it.
func makeSecretCopyFixtures(t *testing.T, paths []string) {
	t.Helper()
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		t.Fatalf("making the namespace's mounts private: %v", err)
	}
	scratch, err := os.MkdirTemp("", "secret-copies-")
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", scratch, "tmpfs", 0, "mode=0700"); err != nil {
		t.Fatal(err)
	}
	var mounted []string
	t.Cleanup(func() {
		for _, m := range slices.Backward(mounted) {
			_ = unix.Unmount(m, unix.MNT_DETACH)
		}
		_ = unix.Unmount(scratch, unix.MNT_DETACH)
		_ = os.Remove(scratch)
	})
	content := []byte("fixture:$6$not-a-real-hash:19000:0:99999:7:::\n")
	var empty []string
	for i, p := range paths {
		st, err := os.Stat(p)
		if err == nil {
			if st.Mode().IsRegular() && st.Size() == 0 {
				empty = append(empty, p)
			}
			continue
		}
		dir := filepath.Dir(p)
		for _, err := os.Stat(dir); err != nil; _, err = os.Stat(dir) {
			dir = filepath.Dir(dir)
		}
		up, work := filepath.Join(scratch, "up"+strconv.Itoa(i)), filepath.Join(scratch, "work"+strconv.Itoa(i))
		for _, d := range []string{up, work} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := unix.Mount("overlay", dir, "overlay", 0, "lowerdir="+dir+",upperdir="+up+",workdir="+work); err != nil {
			t.Fatalf("an overlay on %s for %s: %v", dir, p, err)
		}
		mounted = append(mounted, dir)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range empty {
		f := filepath.Join(scratch, "file"+strconv.Itoa(i))
		if err := os.WriteFile(f, content, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount(f, p, "", unix.MS_BIND, ""); err != nil {
			t.Fatalf("a bind on %s: %v", p, err)
		}
		mounted = append(mounted, p)
	}
}

// forkerLingerTime is how long TestForkingThreadLingerHeld's forking
// threads live on after they let their tree go: a tree's shell and the
// static probe start in a few milliseconds, and the probe's rounds take
// microseconds, so the window is open for the whole probe.
const forkerLingerTime = 200 * time.Millisecond

// TestForkingThreadLingerHeld: the forking-thread tests
// (TestAttackForkingThreadSIGIO, TestAttackForkingThreadSignalled) sample
// a race of microseconds, the thread's exit after the tree is let go, over
// 40 or 60 Starts, and could pass with the hold broken where the machine
// happened to be fast (the last session's read). Here each forking thread
// lingers 200 ms before it ends (a test hook), so that one Start decides:
// two Starts, the first on a throwaway thread and the second on a ready
// one. The control: with no hold (the pidfd refused as on a kernel before
// 6.9), the first Start's tree ends its host with SIGKILL, sent for a pipe
// it made the lingering thread own; held, both probes finish and the host
// lives. As root (where the fallback uid switch stands without the hold)
// and, through TestMend5Unprivileged, not.
func TestForkingThreadLingerHeld(t *testing.T) {
	requireSandbox(t)
	probe, ws := staticProbe(t, sigioProbe)
	linger := sigioLingerEnv + "=" + forkerLingerTime.String()
	if out, err := runSigioHost(t, probe, ws, 1, true, linger, sigioNoHoldEnv+"=1"); !killedBySIGKILL(err) {
		t.Fatalf("control, sandboxed without the hold: got %v (%q), want the host killed by SIGKILL", err, out)
	}
	out, err := runSigioHost(t, probe, ws, 2, true, linger)
	if killedBySIGKILL(err) {
		t.Fatalf("a held tree ended its host with SIGKILL while its forking thread lingered: %q", out)
	}
	if want := "host: 2 of 2 probes done"; err != nil || !strings.Contains(out, want) {
		t.Fatalf("sandboxed host: got %v, %q, want %q", err, out, want)
	}
}

// wantLingeringThreadMissed runs threadProbe (TestAttackForkingThreadSignalled)
// once more with each forking thread lingering after it lets its tree go
// (forkerLingerTime), so that one Start decides what 40 sampled: the
// probe must miss it. The control, without root: with no hold (the pidfd
// refused as on a kernel before 6.9) the probe signals the lingering
// thread. As root the fallback uid switch refuses tgkill without the
// hold, so the control there is TestForkingThreadLingerHeld's.
func wantLingeringThreadMissed(t *testing.T, probe, ws string) {
	t.Helper()
	defer agentproc.LingerForkingThread(forkerLingerTime)()
	req := agentproc.Request{Command: "exec " + probe, WorkDir: ws, Timeout: time.Minute}
	if !isRoot() {
		unheld := agentproc.FailThreadPidfd(syscall.EINVAL)
		ctl := runSandboxed(t, newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws))), req)
		unheld()
		if !strings.HasPrefix(ctl.Text, "HIT") {
			t.Fatalf("control, sandboxed without the hold, the thread lingering: got %q, want HIT", ctl.Text)
		}
	}
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	for i := range 2 { // a throwaway thread, then a ready one
		if out := runSandboxed(t, m, req); !strings.HasPrefix(out.Text, "MISS") {
			t.Errorf("Start %d, the forking thread lingering %v: got %q, want MISS", i, forkerLingerTime, out.Text)
		}
	}
}

// staticProbe compiles the C program src, static, into a directory every
// user may search, and returns it with a work dir beside it: a probe a
// tree of either user runs as its leader.
func staticProbe(t *testing.T, src string) (probe, ws string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	compileC(t, dir, "probe", src, "-O2", "-static")
	ws = filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "probe"), ws
}
