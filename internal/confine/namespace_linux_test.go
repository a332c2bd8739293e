package confine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMountWatch checks what MountWatch reports, with inotify and without
// (its fallback, one lookup per missing path): nothing while nothing
// changes or only other names appear, and a change once a missing path
// appears, also below a directory that was itself missing.
func TestMountWatch(t *testing.T) {
	t.Parallel()
	for _, inotify := range []bool{true, false} {
		name := "inotify"
		if !inotify {
			name = "lookup"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			deep := filepath.Join(dir, "a", "b", "secret")
			flat := filepath.Join(dir, "flat")
			var dirs *DirWatcher
			if inotify {
				dirs = &DirWatcher{}
				defer dirs.Close()
			}
			w := NewMountWatch(MountSpec{Hide: []string{deep, flat}}, dirs)
			defer w.Close()
			if inotify && w.dirs == nil {
				t.Fatal("no inotify watch made")
			}
			if len(w.missing) != 2 {
				t.Fatalf("missing %q, want both paths", w.missing)
			}
			none := MountView{NS: -1, Events: -1, Live: -1}
			if err := os.WriteFile(filepath.Join(dir, "other"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if w.Changed(&none) {
				t.Fatalf("another name made in %s: changed, want unchanged", dir)
			}
			if err := os.MkdirAll(filepath.Dir(deep), 0o700); err != nil {
				t.Fatal(err)
			}
			got := w.Changed(&none)
			if want := inotify; got != want { // a lookup sees only the path itself
				t.Fatalf("a directory above a missing path made: changed %v, want %v", got, want)
			}
			if err := os.WriteFile(deep, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if !w.Changed(&none) {
				t.Fatalf("%s made: unchanged, want changed", deep)
			}
		})
	}

	t.Run("shared", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		p := filepath.Join(dir, "secret")
		dirs := &DirWatcher{}
		defer dirs.Close()
		a := NewMountWatch(MountSpec{Hide: []string{p}}, dirs)
		b := NewMountWatch(MountSpec{ReadOnly: []string{p}}, dirs)
		gone := NewMountWatch(MountSpec{Hide: []string{p}}, dirs)
		gone.Close()
		if len(a.regs) == 0 {
			t.Fatalf("no watch registered for %s (inotify instances used up? fs.inotify.max_user_instances is per user), want one", p)
		}
		if got := len(dirs.names[a.regs[0].wd]["secret"]); got != 2 {
			t.Fatalf("%d policies watch %s, want 2 (one was closed)", got, p)
		}
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		none := MountView{NS: -1, Events: -1, Live: -1}
		if !a.Changed(&none) || !b.Changed(&none) {
			t.Errorf("%s made: changed %v and %v, want both", p, a.Changed(&none), b.Changed(&none))
		}
		a.Close()
		b.Close()
	})
}

// TestMountWatchHideLinkRepointed: a hidden path that is a symbolic link
// is left alone, its target covered as the policy resolved it; the host
// pointing it elsewhere leaves the new target uncovered, so the watch
// reports a change, with inotify and without (seventeenth attack review,
// TestAttackLogSocketsMadeLater). Another name made beside it does not.
func TestMountWatchHideLinkRepointed(t *testing.T) {
	t.Parallel()
	for _, inotify := range []bool{true, false} {
		name := "inotify"
		if !inotify {
			name = "lookup"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			link := filepath.Join(dir, "log")
			if err := os.Symlink(filepath.Join(dir, "first"), link); err != nil {
				t.Fatal(err)
			}
			var dirs *DirWatcher
			if inotify {
				dirs = &DirWatcher{}
				defer dirs.Close()
			}
			w := NewMountWatch(MountSpec{Hide: []string{link}}, dirs)
			defer w.Close()
			if len(w.links) != 0 {
				t.Fatalf("ReadOnly links %q, want none (the link is Hide's)", w.links)
			}
			none := MountView{NS: -1, Events: -1, Live: -1}
			if err := os.WriteFile(filepath.Join(dir, "other"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if w.Changed(&none) {
				t.Fatal("another name made beside the link: changed, want unchanged")
			}
			if err := os.Remove(link); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(dir, "second"), link); err != nil {
				t.Fatal(err)
			}
			if !w.Changed(&none) {
				t.Fatalf("%s pointed elsewhere: unchanged, want changed", link)
			}
		})
	}
}

// TestMountWatchHideLinkChain: a hidden link whose target is reached
// through another link (/dev/log to a stable name, or into a directory
// through a stable link, that its log daemon points at its own). The
// policy covers the first name and the resolved target; a re-pointed link
// on the way went unseen, the first name unchanged (eighteenth attack
// review). TestMountWatchHideLinkRepointed is the control: the first link
// re-pointed is seen.
func TestMountWatchHideLinkChain(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		dir  bool // the middle link is a directory's, the socket below it
	}{{"file-inotify", false}, {"file-lookup", false}, {"dir-inotify", true}, {"dir-lookup", true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir, other := t.TempDir(), t.TempDir()
			link, middle := filepath.Join(dir, "log"), filepath.Join(other, "current")
			target := "../" + filepath.Base(other) + "/current" // relative
			for _, d := range []string{"first", "second"} {
				if err := os.Mkdir(filepath.Join(other, d), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			if c.dir {
				target += "/log"
			}
			if err := os.Symlink(filepath.Join(other, "first"), middle); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			var dirs *DirWatcher
			if strings.HasSuffix(c.name, "inotify") {
				dirs = &DirWatcher{}
				defer dirs.Close()
			}
			w := NewMountWatch(MountSpec{Hide: []string{link}}, dirs)
			defer w.Close()
			none := MountView{NS: -1, Events: -1, Live: -1}
			if err := os.WriteFile(filepath.Join(other, "beside"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if w.Changed(&none) {
				t.Fatal("another name made beside the middle link: changed, want unchanged")
			}
			if err := os.Remove(middle); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(other, "second"), middle); err != nil {
				t.Fatal(err)
			}
			if !w.Changed(&none) {
				t.Fatalf("%s (on the way from the link %s) pointed elsewhere: unchanged, want changed", middle, link)
			}
		})
	}
}

// TestDirWatcherInstanceRefusedOnce: a root tree shares uid 0's
// fs.inotify.max_user_instances (128) with the host and can hold them all
// while a Manager builds its first policy. The DirWatcher kept that
// refusal for the Manager's life: every later namespace went without live
// repair (a door socket made again while a tree runs, a restarted dockerd's,
// reachable) and each Start looked up every missing path, after the
// instances were let go. The refusal stands for the instances held (taking
// root's real ones would starve this machine's daemons); the control is
// that the first watch goes without an instance.
func TestDirWatcherInstanceRefusedOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "docker.sock")
	refused := true
	dirs := &DirWatcher{initInotify: func(flags int) (int, error) {
		if refused {
			return -1, unix.EMFILE
		}
		return unix.InotifyInit1(flags)
	}}
	defer dirs.Close()
	first := NewMountWatch(MountSpec{Hide: []string{p}}, dirs)
	defer first.Close()
	if first.dirs != nil {
		t.Fatal("control: the first watch has an instance, want none while the instances are held")
	}
	none := MountView{NS: -1, Events: -1, Live: -1}
	if !first.Changed(&none) {
		t.Error("the first watch, without an instance: unchanged, want changed (the next Start builds afresh and tries again)")
	}
	refused = false // the tree let its instances go
	next := NewMountWatch(MountSpec{Hide: []string{p}}, dirs)
	defer next.Close()
	if next.dirs == nil {
		t.Fatal("the next watch, the instances let go: no instance, want one (the refusal was kept)")
	}
	if next.Changed(&none) {
		t.Fatal("the next watch: changed with nothing made, want unchanged")
	}
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if !next.Changed(&none) {
		t.Fatalf("%s made: unchanged, want changed", p)
	}
}

// TestDirWatcherWatchRefusedOnce: as with the instance, a root tree
// shares uid 0's fs.inotify.max_user_watches with the host and can use it
// up while a Manager builds a policy. A namespace whose missing paths'
// directories could not be watched was kept without a DirWatcher, so
// without live repair (ErrNoLiveRepair) for every later tree of the
// Manager, after the watches were let go. The refusal stands for the
// watches used up (using up root's real ones fails every root process's
// watches on this shared machine); the control is that the first watch
// goes without a DirWatcher.
func TestDirWatcherWatchRefusedOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "docker.sock")
	refused := true
	dirs := &DirWatcher{addWatch: func(ino int, dir string, mask uint32) (int, error) {
		if refused {
			return -1, unix.ENOSPC
		}
		return unix.InotifyAddWatch(ino, dir, mask)
	}}
	defer dirs.Close()
	first := NewMountWatch(MountSpec{Hide: []string{p}}, dirs)
	defer first.Close()
	if first.dirs != nil {
		t.Fatal("control: the first watch has a DirWatcher, want none while the watches are used up")
	}
	none := MountView{NS: -1, Events: -1, Live: -1}
	if !first.Changed(&none) {
		t.Fatal("the first watch, its directory unwatched: unchanged, want changed (the next Start builds afresh and tries again)")
	}
	refused = false // the tree let its watches go
	next := NewMountWatch(MountSpec{Hide: []string{p}}, dirs)
	defer next.Close()
	if next.dirs == nil || next.Changed(&none) {
		t.Fatal("the next watch, the watches let go: want a DirWatcher and unchanged")
	}
}
