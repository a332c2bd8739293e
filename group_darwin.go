package agentproc

import "golang.org/x/sys/unix"

// countGroup counts the live (non-zombie) members of process group pgid
// with the kern.proc.pgrp sysctl; ok is false when the sysctl fails. XNU
// keeps a zombie in its group until it is reaped, and kill(-pgid, 0) then
// still succeeds: without this count a group holding only the shell, exited
// but not yet waited for, looks alive, so Stop would claim a command that
// ended by itself as killed and Leftovers would read 1.
func countGroup(pgid int) (n int, ok bool) {
	procs, err := unix.SysctlKinfoProcSlice("kern.proc.pgrp", pgid)
	if err != nil {
		return 0, false
	}
	for i := range procs {
		if int(procs[i].Eproc.Pgid) == pgid && procs[i].Proc.P_stat != procStateZombie {
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
