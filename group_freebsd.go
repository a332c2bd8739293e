package agentproc

import "golang.org/x/sys/unix"

// countGroup counts the live (non-zombie) members of process group pgid
// with the kern.proc.pgrp sysctl; ok is false when the sysctl fails or its
// records cannot be read (see parseKinfoProcs). Like XNU, FreeBSD counts a
// zombie as a group member for kill(-pgid, 0).
func countGroup(pgid int) (n int, ok bool) {
	buf, err := unix.SysctlRaw("kern.proc.pgrp", pgid)
	if err != nil {
		return 0, false
	}
	members, ok := parseKinfoProcs(buf)
	if !ok {
		return 0, false
	}
	for _, m := range members {
		if m.pgid == pgid && m.stat != procStateZombie {
			n++
		}
	}
	return n, true
}

// groupLive reports whether group pgid has a member that is not a zombie,
// from countGroup; ok is false where that cannot enumerate the group.
func groupLive(pgid int) (live, ok bool) {
	n, ok := countGroup(pgid)
	return n > 0, ok
}
