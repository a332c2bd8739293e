package agentproc

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentproc/agentproc/internal/procfs"
)

// BenchmarkOverlayAliases measures what the overlay search adds to a
// policy's resolve on a host with container overlays: n overlays of four
// layers each (linked, as Docker's overlay2 names its layers), against 200
// hidden paths none of which is in a layer. A host without overlays pays
// nothing (the search runs on the overlay lines alone).
func BenchmarkOverlayAliases(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("overlays=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			var overlays []procfs.Mount
			for i := range n {
				var layers []string
				for j := range 4 {
					d := filepath.Join(dir, fmt.Sprintf("layer-%d-%d", i, j))
					l := filepath.Join(dir, fmt.Sprintf("l%d-%d", i, j))
					if err := os.Mkdir(d, 0o755); err != nil {
						b.Fatal(err)
					}
					if err := os.Symlink(d, l); err != nil {
						b.Fatal(err)
					}
					layers = append(layers, l)
				}
				overlays = append(overlays, procfs.Mount{Point: filepath.Join(dir, fmt.Sprintf("merged-%d", i)), FSType: "overlay",
					Super: "rw,lowerdir=" + strings.Join(layers[1:], ":") + ",upperdir=" + layers[0] + ",workdir=/w"})
			}
			var hide []string
			for i := range 200 {
				hide = append(hide, fmt.Sprintf("/home/u/.hidden-%d", i))
			}
			b.ResetTimer()
			for b.Loop() {
				if got := overlayAliases(hide, overlays); len(got) != 0 {
					b.Fatalf("got %q, want no aliases", got)
				}
			}
		})
	}
}

// BenchmarkOverlayAliasesContainerRoot measures the search inside a
// container, whose root is an overlay naming the host's layer
// directories, absent here, with every hidden path on it: 20 layers, 200
// hidden paths.
func BenchmarkOverlayAliasesContainerRoot(b *testing.B) {
	var layers []string
	for i := range 20 {
		layers = append(layers, fmt.Sprintf("/var/lib/docker/overlay2/l/ABSENT%02d", i))
	}
	root := procfs.Mount{Point: "/", FSType: "overlay", Super: "rw,lowerdir=" + strings.Join(layers, ":") + ",upperdir=/var/lib/docker/overlay2/x/diff,workdir=/w"}
	var hide []string
	for i := range 200 {
		hide = append(hide, fmt.Sprintf("/home/u/.hidden-%d", i))
	}
	for b.Loop() {
		if got := overlayAliases(hide, []procfs.Mount{root}); len(got) != 0 {
			b.Fatalf("got %q, want no aliases", got)
		}
	}
}
