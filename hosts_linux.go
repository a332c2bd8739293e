package agentproc

import (
	"net"
	"os"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"

	"github.com/agentproc/agentproc/internal/confine"
)

// buildHosts is build's part for NetworkHosts. As root the tree runs in
// the Manager's hosts namespace, whose only interface is a loopback that
// holds the trees' proxy listeners; without root it shares the host's
// network. Either way listen lets the tree connect to its own listener's
// port only (Landlock), and seccomp (confine.SeccompPorts) refuses every other way
// out (UDP, raw, MPTCP, Fast Open, other families, listening).
func (c *sandboxCache) buildHosts(b *sandboxBuilt, pol *sandboxPolicy, h hostCaps, mech *[]string) error {
	if h.root && pol.skip&sandboxSkipNetns == 0 {
		fd, err := c.namespace(NetworkHosts)
		if err != nil {
			return xerrors.Errorf("network namespace: %w", err)
		}
		b.netns = fd
		*mech = append(*mech, "netns")
	}
	if h.abi < 4 {
		b.missing = append(b.missing, unenforced{field: "AllowHosts",
			reason: "holding a tree to its own proxy listener needs Landlock's TCP rules (ABI 4, Linux 6.7)"})
	}
	return nil
}

// makeHostsListener makes a tree's proxy listener on 127.0.0.1 (in the
// tree's network namespace: the calling thread is in it), ready for the
// proxy to serve (a net.Listener: its descriptor duplicated and registered
// with the runtime's poller here, not on the Start), and restricts the
// thread's TCP connects to its port and refuses it every TCP bind (a
// Landlock layer of its own, on top of the policy's). The thread has
// no_new_privs set and is not yet otherwise confined: a ready thread does
// this ahead of its Start, which then only points the tree's proxy
// variables at the port (hostsRun.adopt).
func makeHostsListener() (hostsListener, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return hostsListener{}, xerrors.Errorf("proxy listener: %w", err)
	}
	fail := func(err error) (hostsListener, error) {
		_ = unix.Close(fd)
		return hostsListener{}, err
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return fail(xerrors.Errorf("proxy listener: bind: %w", err))
	}
	if err := unix.Listen(fd, 128); err != nil {
		return fail(xerrors.Errorf("proxy listener: listen: %w", err))
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return fail(xerrors.Errorf("proxy listener: %w", err))
	}
	port := sa.(*unix.SockaddrInet4).Port
	if sandboxHost().abi >= 4 {
		if err := confine.RestrictConnectToPort(port); err != nil {
			return fail(err)
		}
	}
	f := os.NewFile(uintptr(fd), "agentproc-proxy")
	ln, err := net.FileListener(f)
	_ = f.Close()
	if err != nil {
		return hostsListener{}, xerrors.Errorf("proxy listener: %w", err)
	}
	return hostsListener{ln: ln, port: port}, nil
}
