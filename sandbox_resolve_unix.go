//go:build unix

package agentproc

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc/internal/pathset"
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

// hiddenWalkEntries bounds how many directory entries hiddenLinkTargets
// reads below one hidden path, and hiddenWalkDepth how deep it goes: the
// walk runs where a policy is resolved (once per policy, cachedPolicy),
// and a browser profile holds tens of thousands of files. A dotfile manager's
// links sit at the top of the directory they fill (~/.ssh/id_ed25519) or
// one level down, which the walk reaches first.
const (
	hiddenWalkEntries = 256
	hiddenWalkDepth   = 4
)

// systemTrees are the directories a distribution's packages install
// into, where systemPublic finds system files: /bin, /sbin and /lib* are
// links into /usr where /usr is merged (resolvePath has followed them),
// directories of their own where not; Nix's and Guix's stores and snaps
// are read-only trees of packages. /etc and /opt are left out: a dotfile
// repository or a secret may be put there by hand. So are /usr/local
// (handTrees), the administrator's own tree under /usr, where
// /usr/local/src holds what they clone (twelfth attack review,
// TestAttackHiddenDirLinkToUsrLocal), and /usr/src, where container
// images keep their application (`WORKDIR /usr/src/app`) and its config
// (fifth mend, TestHiddenDirLinkToUsrSrc).
var systemTrees = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/nix/store", "/gnu/store", "/snap"}

// handTrees are the directories inside systemTrees that are filled by
// hand, not by packages: no file there counts as a system file. /usr/src
// also holds kernel headers, put by packages; a hidden directory's link
// to them is hidden, which costs a tree little.
var handTrees = []string{"/usr/local", "/usr/src"}

// hiddenLinkTargets returns the symbolic links found below the hidden
// paths hide (directories; files are skipped), each target resolved
// (resolvePath) and mapped to its link, where the target lies outside
// every one of hide. A dotfile manager (GNU stow into a directory that
// exists, chezmoi's or yadm's link modes) leaves ~/.ssh a real directory
// of links into ~/dotfiles: hiding the directory hid the links' names
// only, and the files were read at their targets, or, without root,
// through the links themselves, as Landlock judges the file a path
// resolves to (ninth attack review, TestAttackHiddenDirLinksOut). The
// walk reads directories breadth first, opens none through a link (a
// directory swapped for one is not followed) and never a file, so a FIFO
// cannot hold it. A target that is a system file any local user reads
// (systemPublic) is left out: a virtualenv in a hidden directory
// (gcloud's ~/.config/gcloud/virtenv) links bin/python3 to the system's,
// and hiding that took the interpreter from every tree (tenth attack
// review, TestAttackHiddenDirLinkToSystemFile). watch, if not nil, is
// called with each directory before it is read (and each hidden path, the
// top of a walk), so that a link made there after the read is seen
// (hideWatch); watched is false where one could not be watched. It also
// lists the hidden regular files, the hidden paths themselves and the
// files the walk reads, that have other hard links (hardLinked), for the
// Start's warnings.
func hiddenLinkTargets(hide []string, watch func(dir string) bool) hiddenWalk {
	return hiddenLinkTargetsIn(pathset.New(hide), hide, watch)
}

// hiddenLinkTargetsIn is hiddenLinkTargets with hide's set made by the
// caller: a link's target is looked up in it by the target's depth, not
// compared with every hidden path (quadratic in a long Hide list of
// directories full of links; fifth mend, TestHiddenLinkWalkLinear).
func hiddenLinkTargetsIn(hidden *pathset.Set, hide []string, watch func(dir string) bool) hiddenWalk {
	out := map[string]string{}
	ok := true
	var linked []string
	for _, h := range hide {
		if hardLinked(h) {
			linked = append(linked, h)
		}
		budget := hiddenWalkEntries
		level := []string{h}
		for depth := 0; depth < hiddenWalkDepth && len(level) > 0 && budget > 0; depth++ {
			var next []string
			for _, dir := range level {
				if watch != nil && !watch(dir) {
					ok = false
				}
				for _, e := range readDirNoFollow(dir, &budget) {
					p := filepath.Join(dir, e.Name())
					switch {
					case e.Type()&os.ModeSymlink != 0:
						if t := resolvePath(p); !hidden.Covers(t) && !systemPublic(t) {
							out[t] = p
						}
					case e.IsDir():
						next = append(next, p)
					case e.Type().IsRegular() && hardLinked(p):
						linked = append(linked, p)
					}
				}
			}
			level = next
		}
	}
	slices.Sort(linked)
	return hiddenWalk{links: out, linked: slices.Compact(linked), watched: ok}
}

// hardLinked reports whether p is a regular file with more than one hard
// link (not followed through a link): its other names, made outside the
// hidden path by the host's user or a backup tool (rsnapshot and
// rsync --link-dest link unchanged files across snapshots), are not
// hidden, as a hidden path is hidden by name (a cover mount as root) and
// by the grants around it (Landlock, whose rules are on inodes), and the
// kernel says how many names a file has, not where they are.
func hardLinked(p string) bool {
	var st unix.Stat_t
	return unix.Lstat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Nlink > 1
}

// readDirNoFollow returns up to *budget entries of the directory dir,
// opened without following a link, and takes them from *budget; none
// where dir is not a directory.
func readDirNoFollow(dir string, budget *int) []os.DirEntry {
	if *budget <= 0 {
		return nil
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	entries, _ := f.ReadDir(*budget)
	*budget -= len(entries)
	return entries
}

// systemPublic reports whether p is a system file: under one of the
// system's own trees (systemTrees), root's and readable by every local
// user: p readable (a directory also searchable) by others, and every
// directory above it searchable by others. No secret of the user's is
// root's, and one of root's that anyone reads is kept from no one; a
// dotfile repository under /root (0700) is not public. The trees matter
// where the host runs as root, whose own files are all root's: a dotfile
// repository cloned as root to /opt/dotfiles (files 0644, directories
// 0755) and linked from /root/.aws is readable by every user and still
// the host's secret (eleventh attack review,
// TestAttackHiddenDirLinkToPublicDotfiles).
func systemPublic(p string) bool {
	under := func(d string) bool { return within(p, d) }
	if !slices.ContainsFunc(systemTrees, under) || slices.ContainsFunc(handTrees, under) {
		return false
	}
	var st unix.Stat_t
	if unix.Stat(p, &st) != nil || st.Uid != 0 {
		return false
	}
	want := uint32(unix.S_IROTH)
	if uint32(st.Mode)&unix.S_IFMT == unix.S_IFDIR {
		want |= unix.S_IXOTH
	}
	if uint32(st.Mode)&want != want {
		return false
	}
	for d := filepath.Dir(p); ; d = filepath.Dir(d) {
		if unix.Stat(d, &st) != nil || uint32(st.Mode)&unix.S_IXOTH == 0 {
			return false
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}
