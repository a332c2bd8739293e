package testuser

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Name is the unprivileged user the tests run as a second time.
const Name = "agentproc-sandbox"

// Run runs this test binary again, as Name, with -test.count=1 -test.v and
// args, for up to timeout, and returns its output and error. The copy it
// runs and the user's HOME live in a directory of their own (the test
// binary's own directory is private to root), removed at cleanup; the
// environment is PATH, HOME, TMPDIR and LANG, and env. It skips t where it
// cannot switch user: not root, or no such user.
func Run(t testing.TB, timeout time.Duration, env []string, args ...string) (string, error) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: the tests ran as such")
	}
	u, err := user.Lookup(Name)
	if err != nil {
		t.Skipf("no user %s (.ci/install-test-deps.sh creates it): %v", Name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "agentproc-unpriv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	home := filepath.Join(dir, "home")
	bin := CopyBinary(t, exe, dir)
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, home} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(home, uid, gid); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"-test.count=1", "-test.v"}, args...)...)
	cmd.Dir = home
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=" + os.TempDir(), "LANG=C"}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// CopyBinary copies the executable exe into dir as agentproc.test, mode
// 0755, and returns its path: a copy another user can run.
func CopyBinary(t testing.TB, exe, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "agentproc.test")
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}
