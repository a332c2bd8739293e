package agentproc

import (
	"errors"
	"io"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// The state dir's file-system part of the OS contract (listed in
// platform.go). The dir and everything in it may have been made by another
// hand, so nothing in it is reached by a path: the dir is opened once and
// checked (owned by the effective user, not writable by group or others,
// as ssh checks ~/.ssh), and every file and subdirectory inside is opened
// relative to a checked descriptor, one name at a time, never following a
// symlink (openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, or openat with
// O_NOFOLLOW where the kernel has no openat2). Removals are unlinkat
// relative to those descriptors.
//
//	openPrivateDir(path)            mkdir -p, open and check the dir
//	openPrivateSubdir(fd, path, n)  mkdirat and open and check fd/n
//	openAt(fd, name, flags, perm)   a regular file of ours in fd
//	unlinkAt, renameAt, listAt      on names in fd
//	removeAllAt(fd, name)           name in fd and, if a dir, what it holds
//	closeFD(fd)

// noOpenat2 is set once openat2 failed with ENOSYS (Linux before 5.6) or
// EPERM (a seccomp profile that denies it); openat with O_NOFOLLOW is used
// from then on, which is as safe here since every name is one component.
var noOpenat2 atomic.Bool

// validName refuses names that are not a single path component.
func validName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return xerrors.Errorf("agentproc: %q is not a file name", name)
	}
	return nil
}

// openBeneath opens name in dirfd without following any symlink.
func openBeneath(dirfd int, name string, flags int, perm uint32) (int, error) {
	if err := validName(name); err != nil {
		return -1, err
	}
	flags |= unix.O_CLOEXEC | unix.O_NOFOLLOW
	if !noOpenat2.Load() {
		fd, err := unix.Openat2(dirfd, name, &unix.OpenHow{
			Flags:   uint64(flags),
			Mode:    uint64(perm),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS,
		})
		if err == nil {
			return fd, nil
		}
		if err != unix.ENOSYS && err != unix.EPERM {
			return -1, err
		}
		noOpenat2.Store(true)
	}
	for {
		fd, err := unix.Openat(dirfd, name, flags, perm)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// checkPrivate refuses a directory that is not owned by the effective user
// or that group or others may write to: someone else could then plant
// files or symlinks in it.
func checkPrivate(fd int, path string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return xerrors.Errorf("stat %q: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return xerrors.Errorf("%q is not a directory", path)
	}
	euid := os.Geteuid()
	if int(st.Uid) != euid || st.Mode&0o022 != 0 {
		return xerrors.Errorf("%q is owned by %s with mode %04o; want a private dir, owned by %s and not writable by group or others",
			path, userName(int(st.Uid)), st.Mode&0o7777, userName(euid))
	}
	return nil
}

// userName is "uid N (name)", or "uid N" when the name is unknown.
func userName(uid int) string {
	s := "uid " + strconv.Itoa(uid)
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		s += " (" + u.Username + ")"
	}
	return s
}

func openPrivateDir(path string) (int, error) {
	if err := os.MkdirAll(path, 0o700); err != nil {
		return -1, xerrors.Errorf("cannot be created: %w", err)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if err == unix.ELOOP || err == unix.ENOTDIR {
			return -1, xerrors.Errorf("is not a directory (a symlink?): %w", err)
		}
		return -1, xerrors.Errorf("cannot be opened: %w", err)
	}
	if err := checkPrivate(fd, path); err != nil {
		_ = unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func openPrivateSubdir(dirfd int, parent, name string) (int, error) {
	if err := validName(name); err != nil {
		return -1, err
	}
	if err := unix.Mkdirat(dirfd, name, 0o700); err != nil && err != unix.EEXIST {
		return -1, xerrors.Errorf("create %s/%s: %w", parent, name, err)
	}
	fd, err := openBeneath(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, xerrors.Errorf("open %s/%s: %w", parent, name, err)
	}
	if err := checkPrivate(fd, parent+"/"+name); err != nil {
		_ = unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// openAt opens name in dirfd (flags and perm as for os.OpenFile) and makes
// sure it is a regular file owned by the effective user: O_NONBLOCK keeps a
// planted FIFO from blocking the open, and the check refuses it.
func openAt(dirfd int, name string, flags int, perm uint32) (*os.File, error) {
	fd, err := openBeneath(dirfd, name, flags|unix.O_NONBLOCK, perm)
	if err != nil {
		return nil, &os.PathError{Op: "openat", Path: name, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return nil, &os.PathError{Op: "fstat", Path: name, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != os.Geteuid() {
		_ = unix.Close(fd)
		return nil, &os.PathError{Op: "openat", Path: name, Err: errors.New("not a regular file of this user")}
	}
	// Regular files ignore O_NONBLOCK; it is cleared all the same so that
	// the os.File does not put it in the poller.
	if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil {
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// readAt reads at most limit bytes of the regular file name in dirfd.
func readAt(dirfd int, name string, limit int64) ([]byte, error) {
	f, err := openAt(dirfd, name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, xerrors.Errorf("%s is larger than %d bytes", name, limit)
	}
	return data, nil
}

func unlinkAt(dirfd int, name string) error {
	if err := validName(name); err != nil {
		return err
	}
	if err := unix.Unlinkat(dirfd, name, 0); err != nil {
		return &os.PathError{Op: "unlinkat", Path: name, Err: err}
	}
	return nil
}

func renameAt(dirfd int, from, to string) error {
	if err := validName(from); err != nil {
		return err
	}
	if err := validName(to); err != nil {
		return err
	}
	if err := unix.Renameat(dirfd, from, dirfd, to); err != nil {
		return &os.PathError{Op: "renameat", Path: from, Err: err}
	}
	return nil
}

// listAt returns the names in the directory dirfd, through a descriptor of
// its own (a shared one would share the read offset).
func listAt(dirfd int) ([]string, error) {
	fd, err := unix.Openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "openat", Path: ".", Err: err}
	}
	f := os.NewFile(uintptr(fd), ".")
	defer f.Close()
	return f.Readdirnames(-1)
}

// removeAllAt removes name from dirfd: a file or symlink is unlinked (a
// symlink itself, never its target), a directory is opened without
// following symlinks, emptied the same way and removed. Gone already is
// not an error.
func removeAllAt(dirfd int, name string) error {
	if err := validName(name); err != nil {
		return err
	}
	err := unix.Unlinkat(dirfd, name, 0)
	if err == nil || err == unix.ENOENT {
		return nil
	}
	if err != unix.EISDIR && err != unix.EPERM {
		return &os.PathError{Op: "unlinkat", Path: name, Err: err}
	}
	sub, err := openBeneath(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		if err == unix.ENOENT {
			return nil
		}
		return &os.PathError{Op: "openat", Path: name, Err: err}
	}
	names, lerr := listAt(sub)
	var first error
	for _, n := range names {
		if err := removeAllAt(sub, n); err != nil && first == nil {
			first = err
		}
	}
	_ = unix.Close(sub)
	if lerr != nil {
		return lerr
	}
	if err := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR); err != nil && err != unix.ENOENT && first == nil {
		first = &os.PathError{Op: "unlinkat", Path: name, Err: err}
	}
	return first
}

func closeFD(fd int) {
	if fd >= 0 {
		_ = unix.Close(fd)
	}
}

// copyFileIn copies the regular file name in dir, if it is the effective
// user's and not reached through a symlink, to w.
func copyFileIn(dir, name string, w io.Writer) error {
	dirfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(dirfd)
	f, err := openAt(dirfd, name, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}
