package confine

import (
	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// The steps that change the calling, locked thread before its fork, each
// on that thread only (the caller throws it away after the fork).

// EnterMountns takes the calling thread into the mount namespace ns.
func EnterMountns(ns int) error {
	// A thread shares its root and directory with the others until it
	// unshares them, and setns refuses a shared one.
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return xerrors.Errorf("unshare fs: %w", err)
	}
	if err := unix.Setns(ns, unix.CLONE_NEWNS); err != nil {
		return xerrors.Errorf("join mount namespace: %w", err)
	}
	return nil
}

// DropCapabilities empties the calling thread's bounding set, capability
// 0 to lastCap. On exec the kernel grants root its bounding set and its
// inheritable set, so with the one empty here and the other emptied by
// Thread the shell (uid 0) and every program it runs, file capabilities
// or setuid included, start with no capability
// (TestSandboxRootHasNoCapabilities, which also reads CapBnd, and
// TestAttackInheritedCapabilities). It takes a
// prctl per capability, each a new set of credentials, a cost per Start
// (docs/measurements.md) which the ready thread takes off the Start.
// Dropping the thread's own sets with one capset would do under
// no_new_privs for less, but leaves the child a full bounding set, and the
// bounding set is what the sandbox promises to drop. The thread keeps its
// effective set, which joining the network namespace after this needs.
func DropCapabilities(lastCap int) error {
	for c := 0; c <= lastCap; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return xerrors.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	return nil
}

// clearInherited empties the calling thread's ambient and inheritable
// capability sets, as any user may. Without it a host that runs with
// capabilities in either (an unprivileged service's
// AmbientCapabilities=, root under capsh or setpriv --inh-caps, or in a
// container that sets them) hands them to the tree: on exec any user
// keeps the ambient set and root gets the inheritable set besides the
// bounding set, and no_new_privs keeps what the thread had
// (TestAttackInheritedCapabilities: the tree made a device node of the
// host's disk). The thread's own permitted and effective sets stay, for
// the steps after this that need them.
func clearInherited() error {
	// EINVAL: a kernel before 4.3, without ambient capabilities.
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && err != unix.EINVAL {
		return xerrors.Errorf("clear ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return xerrors.Errorf("read capabilities: %w", err)
	}
	if data[0].Inheritable == 0 && data[1].Inheritable == 0 {
		return nil
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return xerrors.Errorf("clear inheritable capabilities: %w", err)
	}
	return nil
}

// Thread empties the calling thread's ambient and inheritable capability
// sets, as root or not (clearInherited), joins the network namespace
// netns (-1: stay in the host's), with
// ownIPC unshares an IPC namespace of the thread's own, and confines the
// calling thread: no_new_privs, inNetns if not nil, the
// Landlock rulesets in order (each a layer; -1s are skipped), the seccomp
// filter (nil: none). The order
// is forced: setns needs the capabilities no_new_privs keeps but the
// seccomp filter refuses it, and Landlock and seccomp need no_new_privs
// (Landlock without CAP_SYS_ADMIN, which the tree must not keep); so do
// unshare's.
func Thread(netns int, ownIPC bool, inNetns func() error, rulesets []int, filter []unix.SockFilter) error {
	if err := clearInherited(); err != nil {
		return err
	}
	if netns >= 0 {
		if err := unix.Setns(netns, unix.CLONE_NEWNET); err != nil {
			return xerrors.Errorf("join network namespace: %w", err)
		}
	}
	if ownIPC {
		if err := unix.Unshare(unix.CLONE_NEWIPC); err != nil {
			return xerrors.Errorf("unshare ipc: %w", err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return xerrors.Errorf("set no_new_privs: %w", err)
	}
	if inNetns != nil {
		if err := inNetns(); err != nil {
			return err
		}
	}
	for _, rs := range rulesets {
		if rs < 0 {
			continue
		}
		if err := LandlockRestrict(rs); err != nil {
			return err
		}
	}
	if filter != nil {
		if err := SeccompInstall(filter); err != nil {
			return err
		}
	}
	return nil
}
