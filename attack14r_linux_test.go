package agentproc_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// makeOverlayHome makes, as root, dir/home with a hidden ~/.ssh (a key at
// .ssh/id_ed25519 and another at .ssh/keys/id_rsa) and two overlays
// showing its files at other names: dir/merged, whose lower layers are
// "dir/extra layer" (a space, escaped \040 in mountinfo) and the home
// itself, with an upper layer; and dir/keyview, whose lower layers are
// ~/.ssh/keys (a layer inside a hidden directory) and an empty one. It
// returns the home and the secrets' names; Cleanup unmounts both.
func makeOverlayHome(t *testing.T) (home string, names []string) {
	t.Helper()
	dir := t.TempDir()
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
	requireRootSandbox(t)
	home, names := makeOverlayHome(t)
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
