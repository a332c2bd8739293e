//go:build unix

package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
)

// userTag names the user in the default socket's directory: the UID.
func userTag() string { return strconv.Itoa(os.Getuid()) }

// listenPrivate listens on a Unix socket at path created with mode 0600:
// the umask is narrowed around the bind, which happens before any other
// goroutine of serve creates a file.
func listenPrivate(path string) (net.Listener, error) {
	old := syscall.Umask(0o177)
	defer syscall.Umask(old)
	return net.Listen("unix", path)
}

// checkPrivateDir verifies that dir is a directory (not a link to one) of
// the current user that no one else may enter or write.
func checkPrivateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	case ok && int(st.Uid) != os.Getuid():
		return fmt.Errorf("%s belongs to uid %d, not to you (uid %d); set --socket or $%s", dir, st.Uid, os.Getuid(), socketEnv)
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("%s has mode %v; others must not enter it (chmod 700 %s)", dir, fi.Mode().Perm(), dir)
	}
	return nil
}
