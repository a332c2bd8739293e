package confine

import (
	"os"
	"path/filepath"
	"testing"
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
