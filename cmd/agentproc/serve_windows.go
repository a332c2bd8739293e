package main

import (
	"fmt"
	"net"
	"os"
)

// userTag names the user in the default socket's directory. The temp dir
// is the user's own on Windows already; the name keeps two users of one
// shared TEMP apart.
func userTag() string { return os.Getenv("USERNAME") }

// listenPrivate listens on a Unix socket at path. Windows has no umask;
// the socket inherits the ACL of its directory, which is the user's.
func listenPrivate(path string) (net.Listener, error) {
	return net.Listen("unix", path)
}

// checkPrivateDir verifies that dir is a directory. Windows keeps the
// user's profile directories private through ACLs, which are not checked
// here.
func checkPrivateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	return nil
}
