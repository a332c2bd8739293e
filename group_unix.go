//go:build unix && !linux

package agentproc

// groupLive reports whether group pgid has a member that is not a zombie,
// from countGroup; ok is false where that cannot enumerate the group.
func groupLive(pgid int) (live, ok bool) {
	n, ok := countGroup(pgid)
	return n > 0, ok
}
