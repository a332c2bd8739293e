package confine

import "golang.org/x/sys/unix"

// ForkRules says what SeccompForkFilter refuses besides clone with
// CLONE_PARENT, which it always refuses.
type ForkRules struct {
	// NoClone3 makes clone3 answer ENOSYS, as on a kernel without it: its
	// flags (CLONE_PARENT, CLONE_INTO_CGROUP, the CLONE_NEW* ones) sit in
	// a structure seccomp cannot read. glibc falls back to clone, and Go
	// uses clone3 only to start a child in a cgroup. The tree's own fork
	// needs clone3 when it starts the leader in its cgroup v2
	// (CLONE_INTO_CGROUP), so such a tree keeps clone3
	// (docs/sandbox-threats.md, third attack review).
	NoClone3 bool
	// NoNamespaces refuses (EPERM) unshare and clone with any CLONE_NEW*
	// flag: a tree then stays in the namespaces it was started in. It is
	// set for a tree that runs as root in a mount namespace of its own,
	// which the containment sweep finds its processes by (a process
	// leaves a mount namespace only with CAP_SYS_ADMIN, which the tree
	// lacks, or through a user namespace of its own first: `unshare -U`
	// then `unshare -m`). setns is refused in every mode by SeccompFilter.
	// Docker's default profile refuses the same calls to a container
	// without CAP_SYS_ADMIN.
	NoNamespaces bool
}

// cloneNamespaceFlags are the CLONE_NEW* flags clone takes in its first
// argument; cloneNamespaceFlags|CLONE_NEWTIME those of unshare.
// CLONE_NEWTIME (0x80) shares clone's exit-signal byte, so clone cannot
// take it (only clone3 and unshare do).
const cloneNamespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// SeccompForkFilter returns the second filter a tree's thread installs
// just before it forks the tree (after SeccompFilter), which the tree
// inherits:
//
//   - clone with CLONE_PARENT is refused (EPERM). Its child is the
//     caller's parent's: a tree's leader made children of the host that
//     the host never waits for, zombies that hold a PID each until the
//     host exits (200 from one command, after its end too), and so use
//     up the user's process limit or the system's PIDs;
//   - what r adds (ForkRules).
//
// The host's fork of the tree, which runs under it, passes neither
// CLONE_PARENT nor a CLONE_NEW* flag to clone, and uses clone3 only where
// r keeps it; that clone3 may carry CLONE_NEWCGROUP (as root, the tree's
// cgroup namespace beside CLONE_INTO_CGROUP), which the filter cannot
// see.
//
// It is a filter of its own, not a part of SeccompFilter, because the
// policy's filter may be installed on a ready thread before the Start
// says whether it has a cgroup.
func SeccompForkFilter(r ForkRules) []unix.SockFilter {
	var a bpfAsm
	a.op(bpfLdAbs, offArch)
	a.jump(bpfJeq, SeccompArch, "", "allow") // the first filter refuses other architectures
	a.op(bpfLdAbs, offNR)
	a.jump(bpfJeq, unix.SYS_CLONE, "clone", "")
	if r.NoNamespaces {
		a.jump(bpfJeq, unix.SYS_UNSHARE, "unshare", "")
	}
	if r.NoClone3 {
		a.jump(bpfJeq, unix.SYS_CLONE3, "nosys", "allow")
	} else {
		a.goTo("allow")
	}
	// clone(flags, ...) and unshare(flags) on every architecture the
	// filter is written for; every flag sits in the low 32 bits.
	a.label("clone")
	a.arg(0)
	if r.NoNamespaces {
		a.jump(bpfJset, unix.CLONE_PARENT|cloneNamespaceFlags, "deny", "allow")
		a.label("unshare")
		a.arg(0)
		a.jump(bpfJset, cloneNamespaceFlags|unix.CLONE_NEWTIME, "deny", "allow")
	} else {
		a.jump(bpfJset, unix.CLONE_PARENT, "deny", "allow")
	}
	a.label("allow")
	a.op(bpfRet, secAllow)
	a.label("deny")
	a.op(bpfRet, secDeny)
	a.label("nosys")
	a.op(bpfRet, secNoSys)
	return a.done()
}
