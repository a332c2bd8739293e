package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
)

// userTag names the user in the default socket's directory. The temp dir
// is the user's own on Windows already; the name keeps two users of one
// shared TEMP apart.
func userTag() string { return os.Getenv("USERNAME") }

// listenPrivate listens on a Unix socket at path. Windows has no umask;
// the socket inherits the ACL of its directory, which is the user's.
// Windows before 10 1803, and Wine, have no AF_UNIX sockets: the error
// then says to listen on TCP instead.
func listenPrivate(path string) (net.Listener, error) {
	l, err := net.Listen("unix", path)
	if errors.Is(err, wsaEAFNOSUPPORT) {
		return nil, fmt.Errorf("%w: this Windows has no Unix sockets (they came with Windows 10 1803); use --listen with a TCP address", err)
	}
	return l, err
}

// wsaEAFNOSUPPORT is Winsock's "address family not supported".
const wsaEAFNOSUPPORT = syscall.Errno(10047)

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
