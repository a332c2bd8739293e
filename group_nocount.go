//go:build unix && !linux && !darwin && !freebsd

package agentproc

// countGroup cannot enumerate a group here: ok is false, and the caller
// falls back to kill(-pgid, 0), which also counts zombies.
func countGroup(int) (n int, ok bool) { return 0, false }

// groupLive: without a count, ok is false.
func groupLive(int) (live, ok bool) { return false, false }
