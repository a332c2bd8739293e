package agentproc

import (
	"os/exec"

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

// listen makes the tree's proxy listener on 127.0.0.1 (in the tree's
// network namespace: the calling thread is in it), restricts the thread's
// TCP connects to its port and refuses it every TCP bind (a Landlock layer
// of its own, on top of the policy's), and points cmd's proxy variables at
// it. The thread has no_new_privs set and is not yet otherwise confined.
func (h *hostsRun) listen(cmd *exec.Cmd) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return xerrors.Errorf("proxy listener: %w", err)
	}
	h.fd = fd
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return xerrors.Errorf("proxy listener: bind: %w", err)
	}
	if err := unix.Listen(fd, 128); err != nil {
		return xerrors.Errorf("proxy listener: listen: %w", err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return xerrors.Errorf("proxy listener: %w", err)
	}
	h.port = sa.(*unix.SockaddrInet4).Port
	if sandboxHost().abi >= 4 {
		if err := confine.RestrictConnectToPort(h.port); err != nil {
			return err
		}
	}
	cmd.Env = mergeEnv(cmd.Env, proxyEnv(h.port))
	return nil
}

// closeListenerFD closes a listener that was made but never served.
func closeListenerFD(h *hostsRun) {
	if h.fd >= 0 {
		_ = unix.Close(h.fd)
		h.fd = -1
	}
}
