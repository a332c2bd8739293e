package confine

import (
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// OpenGrant opens p, a path the policy resolved, as the
// O_PATH descriptor a Landlock rule is made from, following no symbolic
// link in any component. The policy was checked on the resolved path; a
// component the tree turned into a link since then (a directory inside
// its Write swapped for a link to /usr/local/bin between the check and the
// build) makes the open fail with ELOOP, and the path is not granted,
// instead of the link's target being granted.
func OpenGrant(p string) (int, error) {
	if !noOpenat2.Load() {
		fd, err := unix.Openat2(unix.AT_FDCWD, p, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_CLOEXEC, // no O_NOFOLLOW: with O_PATH it opens a trailing link
			Resolve: unix.RESOLVE_NO_SYMLINKS,
		})
		if err != unix.ENOSYS && err != unix.EPERM {
			return fd, err
		}
		noOpenat2.Store(true)
	}
	return openGrantByName(p)
}

// openGrantByName is OpenGrant where the kernel has no openat2: one
// component at a time, none followed (O_NOFOLLOW; an O_PATH open of a link
// opens the link, which is refused here).
func openGrantByName(p string) (int, error) {
	fd, err := unix.Open("/", unix.O_PATH|unix.O_CLOEXEC|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, err
	}
	for name := range strings.SplitSeq(p, "/") {
		if name == "" {
			continue
		}
		next, err := openComponent(fd, name)
		_ = unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT == unix.S_IFLNK {
			_ = unix.Close(fd)
			if err == nil {
				err = unix.ELOOP
			}
			return -1, err
		}
	}
	return fd, nil
}

// noOpenat2 is set once openat2 is found missing (ENOSYS) or refused
// (EPERM, a seccomp filter of the host's).
var noOpenat2 atomic.Bool

// openComponent opens name, one component of a path (not . or ..), in
// dirfd as an O_PATH descriptor without following it if it is a link.
func openComponent(dirfd int, name string) (int, error) {
	if name == "." || name == ".." {
		return -1, xerrors.Errorf("%q is not a file name", name)
	}
	for {
		fd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}
