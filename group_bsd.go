//go:build unix && !linux

package agentproc

// countGroup cannot enumerate a group portably here: ok is false, and the
// caller falls back to kill(-pgid, 0), which also counts zombies.
func countGroup(int) (n int, ok bool) { return 0, false }

// groupLive cannot tell a running member from a zombie here: ok is false.
func groupLive(int) (live, ok bool) { return false, false }
