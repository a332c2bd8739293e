package agentproc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSandboxCacheBounded checks that a Manager keeps at most its limit of
// built policies (each holds descriptors and maybe a mount namespace) and
// that Starts beyond it still run, each with a policy of its own that is
// released with it.
func TestSandboxCacheBounded(t *testing.T) {
	if f := SandboxSupport(); !f.Supported {
		t.Skipf("no sandbox here: %s", f)
	}
	// Not parallel: it counts this process's descriptors.
	m := New()
	m.sandbox.cache.limit = 2
	defer m.Close()
	fds := func() int {
		ents, _ := os.ReadDir("/proc/self/fd")
		return len(ents)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 5 {
		ws := t.TempDir()
		p, err := m.Start(ctx, Request{Command: "true", WorkDir: ws, Sandbox: WorkspaceSandbox(ws)})
		if err != nil {
			t.Fatal(err)
		}
		if info, err := p.Wait(ctx); err != nil || info.ExitCode == nil || *info.ExitCode != 0 {
			t.Fatalf("start %d: %v %+v", i, err, info)
		}
	}
	m.sandbox.cache.mu.Lock()
	n := len(m.sandbox.cache.built)
	m.sandbox.cache.mu.Unlock()
	if n > 2 {
		t.Errorf("%d policies kept, want at most the limit, 2", n)
	}
	before := fds()
	for range 3 {
		ws := t.TempDir()
		p, err := m.Start(ctx, Request{Command: "true", WorkDir: ws, Sandbox: WorkspaceSandbox(ws)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Close(); err != nil { // the uncached policies are released by the exits, which Close waits for
		t.Fatal(err)
	}
	if after := fds(); after > before+1 {
		t.Errorf("%d descriptors open after 3 uncached starts, %d before: the policies were not released", after, before)
	}
}

// TestRecycleTempDir checks what a finished process's temp dir must be to
// be reused: an empty directory of ours of mode 0700 without a default
// ACL, checked under the new name it is moved to; anything else is left
// for removal, and the old path is gone either way.
func TestRecycleTempDir(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, dir string)
		reuse bool
	}{
		{"empty", func(*testing.T, string) {}, true},
		{"a file left", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "f"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"a directory left", func(t *testing.T, dir string) {
			if err := os.Mkdir(filepath.Join(dir, "d"), 0o700); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"mode widened", func(t *testing.T, dir string) {
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"replaced by a link", func(t *testing.T, dir string) {
			if err := os.Remove(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(t.TempDir(), dir); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"default ACL", func(t *testing.T, dir string) {
			// user::rwx, group::---, other::rwx as a default ACL: what a
			// later tree created would be readable by all.
			acl := []byte{2, 0, 0, 0, 1, 0, 7, 0, 255, 255, 255, 255, 4, 0, 0, 0, 255, 255, 255, 255, 32, 0, 7, 0, 255, 255, 255, 255}
			if err := unix.Setxattr(dir, "system.posix_acl_default", acl, 0); err != nil {
				t.Skipf("no default ACL on this file system: %v", err)
			}
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			parent := t.TempDir()
			dir, err := os.MkdirTemp(parent, "t-")
			if err != nil {
				t.Fatal(err)
			}
			c.setup(t, dir)
			at, ok := recycleTempDir(dir)
			if ok != c.reuse {
				t.Errorf("reusable: got %v, want %v", ok, c.reuse)
			}
			if at == dir || filepath.Dir(at) != parent {
				t.Errorf("now at %q, want a new name in %q", at, parent)
			}
			if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("old path: lstat error %v, want it gone", err)
			}
		})
	}
}

// TestSandboxTempDirReused checks that a temp dir a process left empty
// serves a later Start under another name, and one it left files in is
// removed with them.
func TestSandboxTempDirReused(t *testing.T) {
	m, sb, ws := sandboxTestManager(t)
	prepare := func() *sandboxRun {
		t.Helper()
		r, err := m.prepareSandbox(sb, "", ws, true, false)
		if err != nil {
			t.Fatal(err)
		}
		// The spare made ahead when none was ready, so that what follows
		// counts only what finish hands back.
		m.sandbox.refills.Wait()
		return r
	}
	r := prepare()
	before := len(m.sandbox.emptyDirs)
	r.finish(m, true)
	if _, err := os.Lstat(r.tmpDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("finished temp dir: lstat error %v, want it gone", err)
	}
	if got := len(m.sandbox.emptyDirs); got != before+1 {
		t.Errorf("%d spare temp dirs after an empty one was finished, want %d", got, before+1)
	}

	r = prepare()
	before = len(m.sandbox.emptyDirs)
	if err := os.WriteFile(filepath.Join(r.tmpDir, "left"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.finish(m, true)
	if got := len(m.sandbox.emptyDirs); got != before {
		t.Errorf("%d spare temp dirs after one with a file was finished, want %d", got, before)
	}
	parent := filepath.Dir(r.tmpDir)
	ents, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if _, err := os.Lstat(filepath.Join(parent, e.Name(), "left")); err == nil {
			t.Errorf("%s still holds what the process left", e.Name())
		}
	}
}

// TestSandboxTempDirsServeABurst checks that the temp dirs of a burst of
// sandboxed Starts, left empty, serve the next burst of the same size: no
// directory is made or removed for it. A mkdir in a directory whose
// entries were just removed scans ext4's recently deleted inodes, which
// made the cost per Start grow with the burst (docs/measurements.md).
func TestSandboxTempDirsServeABurst(t *testing.T) {
	m, sb, ws := sandboxTestManager(t)
	const n = 32
	burst := func() []*sandboxRun {
		t.Helper()
		runs := make([]*sandboxRun, n)
		for i := range runs {
			r, err := m.prepareSandbox(sb, "", ws, true, false)
			if err != nil {
				t.Fatal(err)
			}
			runs[i] = r
		}
		m.sandbox.refills.Wait()
		return runs
	}
	for _, r := range burst() {
		r.finish(m, true)
	}
	parent, err := m.sandbox.tempParent()
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	waiting := map[string]bool{}
	for _, e := range ents {
		waiting[filepath.Join(parent, e.Name())] = true
	}
	if len(waiting) < n {
		t.Fatalf("%d empty temp dirs kept after a burst of %d finished, want at least %d", len(waiting), n, n)
	}
	made := 0
	for _, r := range burst() {
		if !waiting[r.tmpDir] {
			made++
		}
		r.finish(m, true)
	}
	if made != 0 {
		t.Errorf("the second burst of %d made %d new temp dirs, want every one taken from the first", n, made)
	}
}

// sandboxTestManager skips where the host has no sandbox, marks t
// parallel, and returns a Manager closed at the end of the test, a
// WorkspaceSandbox and its work dir.
func sandboxTestManager(t *testing.T) (*Manager, *Sandbox, string) {
	t.Helper()
	if f := SandboxSupport(); !f.Supported {
		t.Skipf("no sandbox here: %s", f)
	}
	t.Parallel()
	ws := t.TempDir()
	m := New()
	t.Cleanup(func() { m.Close() })
	return m, WorkspaceSandbox(ws), ws
}
