package confine

import "golang.org/x/sys/unix"

// SeccompForkFilter returns the second filter a tree's thread installs
// just before it forks the tree (after SeccompFilter), which the tree
// inherits:
//
//   - clone with CLONE_PARENT is refused (EPERM). Its child is the
//     caller's parent's: a tree's leader made children of the host that
//     the host never waits for, zombies that hold a PID each until the
//     host exits (200 from one command, after its end too), and so use
//     up the user's process limit or the system's PIDs;
//   - with noClone3, clone3 answers ENOSYS, as on a kernel without it:
//     its flags (CLONE_PARENT, CLONE_INTO_CGROUP) sit in a structure
//     seccomp cannot read. glibc falls back to clone, and Go uses clone3
//     only to start a child in a cgroup. The tree's own fork needs clone3
//     when it starts the leader in its cgroup v2 (CLONE_INTO_CGROUP), so
//     such a tree keeps clone3 (docs/sandbox-threats.md, third attack
//     review).
//
// It is a filter of its own, not a part of SeccompFilter, because the
// policy's filter may be installed on a ready thread before the Start
// says whether it has a cgroup.
func SeccompForkFilter(noClone3 bool) []unix.SockFilter {
	var a bpfAsm
	a.op(bpfLdAbs, offArch)
	a.jump(bpfJeq, SeccompArch, "", "allow") // the first filter refuses other architectures
	a.op(bpfLdAbs, offNR)
	a.jump(bpfJeq, unix.SYS_CLONE, "clone", "")
	if noClone3 {
		a.jump(bpfJeq, unix.SYS_CLONE3, "nosys", "allow")
	} else {
		a.goTo("allow")
	}
	// clone(flags, ...) on every architecture the filter is written for.
	a.label("clone")
	a.arg(0)
	a.jump(bpfJset, unix.CLONE_PARENT, "deny", "allow")
	a.label("allow")
	a.op(bpfRet, secAllow)
	a.label("deny")
	a.op(bpfRet, secDeny)
	a.label("nosys")
	a.op(bpfRet, secNoSys)
	return a.done()
}
