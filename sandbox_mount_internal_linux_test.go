package agentproc

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMountWatch checks what mountWatch reports, with inotify and without
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
			w := newMountWatch(mountSpec{hide: []string{deep, flat}})
			defer w.closeInotify()
			if !inotify {
				w.closeInotify()
			}
			if len(w.missing) != 2 {
				t.Fatalf("missing %q, want both paths", w.missing)
			}
			none := mountView{ns: -1, events: -1}
			if err := os.WriteFile(filepath.Join(dir, "other"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if w.changed(&none) {
				t.Fatalf("another name made in %s: changed, want unchanged", dir)
			}
			if err := os.MkdirAll(filepath.Dir(deep), 0o700); err != nil {
				t.Fatal(err)
			}
			got := w.changed(&none)
			if want := inotify; got != want { // a lookup sees only the path itself
				t.Fatalf("a directory above a missing path made: changed %v, want %v", got, want)
			}
			if err := os.WriteFile(deep, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if !w.changed(&none) {
				t.Fatalf("%s made: unchanged, want changed", deep)
			}
		})
	}
}
