package agentproc

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc/internal/procfs"
)

// hiddenMountAliases returns the other names of the existing paths in hide
// (resolved): the same file or directory seen through another mount of
// its file system, such as a home bound at /home from /data/home, or a
// directory bound a second time beside its own. A hidden ~/.ssh stayed
// readable at its second name: Landlock's rules are on inodes, not names,
// so the grants without root (the siblings of each hidden path's
// ancestors) reach it through the other mount's parents, and where that
// mount is itself such a sibling, its grant is on the hidden directory's
// own ancestor, and ~/.ssh was read by its first name too; as root the
// cover is bound at the named path alone (twelfth attack review,
// TestAttackHiddenPathOtherMount). Hiding the other names as well closes
// both. Only file systems mounted more than once are looked at, and a
// name is taken only where it is the same inode, so a host without
// such mounts pays one read of mountinfo (about 64 µs here), once per
// policy: the Manager keeps the resolved policy (cachedPolicy), and a
// mount made after that is not seen while it does.
func hiddenMountAliases(hide []string) []string {
	data, err := procfs.ReadSelf("mountinfo")
	if err != nil {
		return nil
	}
	byDev := map[string][]procfs.Mount{}
	procfs.ParseMountinfo(data, func(mt procfs.Mount) { byDev[mt.Dev] = append(byDev[mt.Dev], mt) })
	// The points of the file systems mounted more than once: a path
	// outside all of them has no other name, and costs no stat.
	var points []string
	for _, mounts := range byDev {
		for _, mt := range mounts {
			if len(mounts) > 1 {
				points = append(points, mt.Point)
			}
		}
	}
	if len(points) == 0 {
		return nil
	}
	var out []string
	for _, h := range hide {
		var st unix.Stat_t
		if !slices.ContainsFunc(points, func(p string) bool { return within(h, p) }) || unix.Lstat(h, &st) != nil {
			continue // nothing there to have another name
		}
		mounts := byDev[strconv.FormatUint(uint64(unix.Major(st.Dev)), 10)+":"+strconv.FormatUint(uint64(unix.Minor(st.Dev)), 10)]
		if len(mounts) < 2 {
			continue
		}
		// h's own mount: the deepest whose point holds h; of two at one
		// point, the later (on top).
		own := -1
		for i, mt := range mounts {
			if within(h, mt.Point) && (own < 0 || len(mt.Point) >= len(mounts[own].Point)) {
				own = i
			}
		}
		if own < 0 {
			continue
		}
		rel := filepath.Join(mounts[own].Root, strings.TrimPrefix(h, mounts[own].Point))
		for i, mt := range mounts {
			if i == own || !within(rel, mt.Root) {
				continue
			}
			alias := filepath.Join(mt.Point, strings.TrimPrefix(rel, mt.Root))
			var ast unix.Stat_t
			if alias != h && unix.Lstat(alias, &ast) == nil && ast.Dev == st.Dev && ast.Ino == st.Ino {
				out = append(out, alias)
			}
		}
	}
	return out
}
