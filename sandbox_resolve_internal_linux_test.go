package agentproc

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentproc/agentproc/internal/pathset"
)

// TestHiddenLinkWalkLinear bounds, by counting, what the hidden-link walk
// costs a long Hide list: each link's target is looked up by its depth,
// not compared with every hidden path. 64 and then 256 hidden
// directories, each with a link to a file of its own outside them: the
// lookups grow with the links (4 times), not with links times paths (16
// times), and stay within the depth of each target.
func TestHiddenLinkWalkLinear(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	var hide []string
	for i := range 256 {
		d := filepath.Join(base, "h", "d"+strconv.Itoa(i))
		target := filepath.Join(base, "t", "f"+strconv.Itoa(i))
		for _, dir := range []string{d, filepath.Dir(target)} {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(target, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(d, "link")); err != nil {
			t.Fatal(err)
		}
		hide = append(hide, d)
	}
	probes := func(n int) (int, int) {
		set := pathset.New(hide[:n])
		walk := hiddenLinkTargetsIn(set, hide[:n], nil)
		return set.Probes(), len(walk.links)
	}
	small, smallLinks := probes(64)
	large, largeLinks := probes(256)
	if smallLinks != 64 || largeLinks != 256 {
		t.Fatalf("links found: got %d and %d, want 64 and 256", smallLinks, largeLinks)
	}
	depth := strings.Count(base, "/") + 3 // base/t/fN and the root
	if small > 64*depth || large > 256*depth {
		t.Errorf("lookups: got %d for 64 links and %d for 256, want at most %d a link (the target's depth)", small, large, depth)
	}
}
