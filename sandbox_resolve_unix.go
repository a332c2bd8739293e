//go:build unix

package agentproc

import (
	"os"
	"path/filepath"
	"strings"
)

// maxLinks is how many symbolic links resolvePath follows in one path
// before it stops (a loop), as the kernel's ELOOP limit does.
const maxLinks = 40

// resolvePath returns the absolute path p names, resolved the way the
// kernel resolves it at an open: every component that is a symbolic link
// replaced by its target, and "." and ".." applied to what is resolved so
// far (so that "ws/link/.." is the parent of the link's target, not ws,
// unlike filepath.Clean). From the first component that cannot be
// examined (it does not exist, is not a directory, or is not searchable)
// the rest is appended as written, cleaned: there is nothing there to
// follow yet, and the caller grants the string, never what a later link
// at that name would point to. A loop of links is left unresolved at the
// link: opening it fails, so it grants nothing.
//
// It is the one place paths are resolved for the sandbox: the checks
// (Sandbox.InWrite, Sandbox.Narrow) and the policy builder call it, so
// that what is granted is what was checked.
func resolvePath(p string) string {
	if !filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	done, rest, links := "/", p, 0
	for rest != "" {
		var name string
		name, rest, _ = strings.Cut(rest, "/")
		switch name {
		case "", ".":
			continue
		case "..":
			done = filepath.Dir(done)
			continue
		}
		next := filepath.Join(done, name)
		fi, err := os.Lstat(next)
		if err != nil {
			return filepath.Join(next, rest)
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			done = next
			continue
		}
		target, err := os.Readlink(next)
		if links++; err != nil || links > maxLinks {
			return filepath.Join(next, rest)
		}
		if filepath.IsAbs(target) {
			done = "/"
		}
		if rest != "" {
			target += "/" + rest
		}
		rest = target
	}
	return done
}
