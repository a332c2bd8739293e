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
// both. A mount that shows only a part of a hidden path (its root inside
// a hidden directory: ~/.ssh/keys bound elsewhere) is such a name too, the
// whole mount hidden; so is the other mount of a file system mounted
// inside a hidden directory (thirteenth attack review,
// TestAttackHiddenPathPartMounted). Only file systems mounted more than
// once are looked at, and a name is taken only where it is the same
// inode, so a host without such mounts pays one read of mountinfo (about
// 64 µs here), once per policy: the Manager keeps the resolved policy
// (cachedPolicy), and a mount made after that is not seen while it does.
func hiddenMountAliases(hide []string) []string {
	data, err := procfs.ReadSelf("mountinfo")
	if err != nil {
		return nil
	}
	byDev := map[string][]procfs.Mount{}
	procfs.ParseMountinfo(data, func(mt procfs.Mount) { byDev[mt.Dev] = append(byDev[mt.Dev], mt) })
	// The mounts of the file systems mounted more than once: a path
	// neither inside nor above any of them has no other name, and costs
	// no stat.
	var shared []procfs.Mount
	for _, mounts := range byDev {
		if len(mounts) > 1 {
			shared = append(shared, mounts...)
		}
	}
	if len(shared) == 0 {
		return nil
	}
	var out []string
	for _, h := range hide {
		if !slices.ContainsFunc(shared, func(mt procfs.Mount) bool { return within(h, mt.Point) || within(mt.Point, h) }) {
			continue
		}
		// h itself, on its own file system; then each shared mount
		// whose point lies inside h, which shows a part of the hidden
		// directory that its other mounts show elsewhere.
		out = append(out, mountAliasesOf(h, byDev)...)
		for _, mt := range shared {
			if mt.Point != h && within(mt.Point, h) {
				out = append(out, mountAliasesOf(mt.Point, byDev)...)
			}
		}
	}
	return out
}

// mountAliasesOf returns the names that p, an existing path, has at the
// other mounts of its file system (byDev, from mountinfo): the same inode
// under a mount that shows p or a directory above it, and the point of
// each mount whose root lies inside p (that mount shows nothing but p's
// contents). A mount inside p itself is p's already.
func mountAliasesOf(p string, byDev map[string][]procfs.Mount) []string {
	var st unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_INO|unix.STATX_MNT_ID, &st) != nil {
		return nil // nothing there to have another name
	}
	mounts, own := ownMount(byDev, p, &st)
	if own < 0 || len(mounts) < 2 {
		return nil
	}
	rel := filepath.Join(mounts[own].Root, strings.TrimPrefix(p, mounts[own].Point))
	var out []string
	for i, mt := range mounts {
		if i == own || within(mt.Point, p) {
			continue
		}
		// alias is p's name under mt, or, where mt's root lies inside p,
		// mt's point, compared with the same place under p.
		var alias, same string
		switch {
		case within(rel, mt.Root):
			alias, same = filepath.Join(mt.Point, strings.TrimPrefix(rel, mt.Root)), p
		case within(mt.Root, rel):
			alias, same = mt.Point, filepath.Join(p, strings.TrimPrefix(mt.Root, rel))
		default:
			continue
		}
		var ast unix.Statx_t
		sst := st
		if alias != p && unix.Statx(unix.AT_FDCWD, alias, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_INO, &ast) == nil &&
			(same == p || unix.Statx(unix.AT_FDCWD, same, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_INO, &sst) == nil) &&
			ast.Dev_major == sst.Dev_major && ast.Dev_minor == sst.Dev_minor && ast.Ino == sst.Ino {
			out = append(out, alias)
		}
	}
	return out
}

// ownMount returns the mounts of p's file system (byDev, from mountinfo)
// and the index among them of the one p (whose statx is st) is seen
// through, or -1. The mount is found by its ID, not by the device st
// names: on btrfs each subvolume has a device number of its own, which
// mountinfo does not show (it names the file system's), so a hidden
// ~/.ssh in a home subvolume mounted a second time at the top level
// (Fedora's layout) had no mount found and its other name stayed readable
// (thirteenth attack review, TestAttackHiddenPathBtrfsSubvolume). Where
// statx gives no mount ID (before Linux 5.8) it is the deepest mount of
// st's device whose point holds p; of two at one point, the later (on
// top).
func ownMount(byDev map[string][]procfs.Mount, p string, st *unix.Statx_t) ([]procfs.Mount, int) {
	if st.Mask&unix.STATX_MNT_ID != 0 {
		id := strconv.FormatUint(st.Mnt_id, 10)
		for _, mounts := range byDev {
			if i := slices.IndexFunc(mounts, func(mt procfs.Mount) bool { return mt.ID == id }); i >= 0 {
				return mounts, i
			}
		}
		return nil, -1
	}
	mounts := byDev[strconv.FormatUint(uint64(st.Dev_major), 10)+":"+strconv.FormatUint(uint64(st.Dev_minor), 10)]
	own := -1
	for i, mt := range mounts {
		if within(p, mt.Point) && (own < 0 || len(mt.Point) >= len(mounts[own].Point)) {
			own = i
		}
	}
	return mounts, own
}
