package confine

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
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
