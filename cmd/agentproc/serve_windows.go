package main

import (
	"fmt"
	"net"
	"os"
)

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
