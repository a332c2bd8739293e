package confine

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc/internal/pathset"
)

// TestOpenGrantFollowsNoLink checks that the descriptor a Landlock rule is
// made from is opened through no link, in any component, with openat2 and
// without it.
func TestOpenGrantFollowsNoLink(t *testing.T) {
	t.Parallel()
	ws, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(outside, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, open := range map[string]func(string) (int, error){"OpenGrant": OpenGrant, "openGrantByName": openGrantByName} {
		fd, err := open(ws)
		if err != nil {
			t.Errorf("%s(%q): %v, want it opened", name, ws, err)
		} else {
			_ = unix.Close(fd)
		}
		for _, p := range []string{filepath.Join(ws, "link"), filepath.Join(ws, "link", "sub")} {
			fd, err := open(p)
			if err == nil {
				_ = unix.Close(fd)
			}
			if !errors.Is(err, unix.ELOOP) && !errors.Is(err, unix.ENOTDIR) {
				t.Errorf("%s(%q): got %v, want ELOOP (a link is not followed)", name, p, err)
			}
		}
	}
}

// TestLandlockSkipsOthersEntriesOfSharedDir: a hidden path below a
// directory every user writes (/var/tmp, where an unprivileged Manager's
// temp parent lies and each tree's layer hides the others') is left out by
// a rule per entry of that directory. Each was granted, whoever made it: a
// local user who made 20,000 empty files in /var/tmp made every sandboxed
// Start of another user fail with EMFILE (third attack review). Only this
// user's and root's entries are granted now. As root (the entries of
// another user are made with chown).
func TestLandlockSkipsOthersEntriesOfSharedDir(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make another user's entries (CI runs it as root)")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"mine", "theirs", "hidden"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(filepath.Join(dir, "theirs"), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	// A link another user made to one of root's files (fs.protected_hardlinks 0).
	root := filepath.Join(t.TempDir(), "roots")
	if err := os.WriteFile(root, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(root, filepath.Join(dir, "linked")); err != nil {
		t.Fatal(err)
	}
	grants := landlockGrants(Rules{Read: []string{dir}, Hide: []string{filepath.Join(dir, "hidden")}}, LandlockMaxABI)
	for name, want := range map[string]bool{"mine": true, "theirs": false, "linked": false, "hidden": false} {
		if _, got := grants[filepath.Join(dir, name)]; got != want {
			t.Errorf("rule on %s in a sticky directory every user writes: got %v, want %v", name, got, want)
		}
	}
	// The same entries in a directory only its owner writes are all granted.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	grants = landlockGrants(Rules{Read: []string{dir}, Hide: []string{filepath.Join(dir, "hidden")}}, LandlockMaxABI)
	if _, ok := grants[filepath.Join(dir, "theirs")]; !ok {
		t.Errorf("rule on another user's entry of a private directory: got none, want one")
	}
}

// TestLandlockSharedGrantsOwnDirMadeAfter: a policy's shared ruleset,
// made before a tree's temp dir, grants that dir once Ruleset adds it, and
// a dir never added is refused; after landlockSharedOwnMax own-dir rules
// the ruleset is made again, in the background, without the earlier
// trees' dirs. Each check runs on a thread of its own, which is
// restricted and then ends.
func TestLandlockSharedGrantsOwnDirMadeAfter(t *testing.T) {
	t.Parallel()
	abi := min(LandlockABI(), LandlockMaxABI)
	if abi == 0 {
		t.Skip("no Landlock here")
	}
	parent := t.TempDir()
	s, err := NewLandlockShared(Rules{Write: []string{parent}}, abi, parent)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dirs := map[string]string{}
	for _, name := range []string{"first", "second", "never"} {
		dirs[name] = filepath.Join(parent, name)
		if err := os.Mkdir(dirs[name], 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// canWrite restricts a thread of its own by rs and reports whether it
	// may make a file in each of dirs.
	canWrite := func(rs int, names ...string) map[string]bool {
		defer unix.Close(rs)
		got := map[string]bool{}
		done := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // not unlocked: the thread ends with the goroutine
			if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
				done <- err
				return
			}
			if err := LandlockRestrict(rs); err != nil {
				done <- err
				return
			}
			for _, n := range names {
				fd, err := unix.Open(filepath.Join(dirs[n], "f"), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
				if err == nil {
					_ = unix.Close(fd)
				}
				got[n] = err == nil
			}
			done <- nil
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the restricted thread did not finish in 10s")
		}
		return got
	}
	rs, err := s.Ruleset(dirs["first"])
	if err != nil {
		t.Fatal(err)
	}
	got := canWrite(rs, "first", "never")
	if !got["first"] || got["never"] {
		t.Errorf("write in the dir added (made after the ruleset), in a dir never added: got %v, %v, want true, false", got["first"], got["never"])
	}
	for range landlockSharedOwnMax {
		rs, err := s.Ruleset(dirs["second"])
		if err != nil {
			t.Fatal(err)
		}
		_ = unix.Close(rs)
	}
	s.waitRemade()
	if rs, err = s.Ruleset(dirs["second"]); err != nil {
		t.Fatal(err)
	}
	got = canWrite(rs, "first", "second")
	if got["first"] || !got["second"] {
		t.Errorf("after %d own-dir rules, write in the first dir added, in the last: got %v, %v, want false, true (the ruleset made again)",
			landlockSharedOwnMax, got["first"], got["second"])
	}
}

// TestLandlockGrantsLinear bounds, by counting, what a long Hide list
// costs the grants: each entry visited around the hidden paths is looked
// up by its depth, not compared with every hidden path. A directory of
// 1,024 entries, 64 or 512 of them hidden: the lookups are the same for
// both lists (the entries visited are the same), and a few per entry. A
// scan of the list at each entry, as before, made them grow with the list
// (8 times here).
func TestLandlockGrantsLinear(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var hidden []string
	for i := range 512 {
		h := filepath.Join(dir, "h"+strconv.Itoa(i))
		if err := os.Mkdir(h, 0o700); err != nil {
			t.Fatal(err)
		}
		hidden = append(hidden, h)
		if err := os.WriteFile(filepath.Join(dir, "f"+strconv.Itoa(i)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	probes := func(n int) (int, int) {
		set := pathset.New(hidden[:n])
		grants := landlockExpand(map[string]uint64{dir: llReadRights}, set)
		return set.Probes(), len(grants)
	}
	small, smallGrants := probes(64)
	large, largeGrants := probes(512)
	depth := strings.Count(dir, "/") + 1
	if bound := 1024 * (depth + 2); small > bound || large > bound {
		t.Errorf("lookups for 1,024 entries: got %d (64 hidden) and %d (512 hidden), want at most %d each (the depth, %d, and two)", small, large, bound, depth)
	}
	if large > small+small/8 {
		t.Errorf("lookups: got %d with 512 hidden paths against %d with 64, want about the same", large, small)
	}
	if smallGrants != 1+1024-64 || largeGrants != 1+1024-512 {
		t.Errorf("grants: got %d and %d, want the directory and each entry but the hidden (%d and %d)", smallGrants, largeGrants, 1+1024-64, 1+1024-512)
	}
}
