package agentproc

// checkLimits refuses limits without a cgroup: Linux has no per-tree limit
// on memory, processes or CPU outside one (RLIMIT_AS and RLIMIT_CPU hold per
// process, so a tree escapes them by forking, and RLIMIT_NPROC counts every
// process of the user, not of the tree).
func checkLimits(l Limits, cfg *config) error {
	if cfg.cgroupParent == "" {
		return unsupportedLimits(l, "Linux limits a whole process tree only through a cgroup v2, "+
			"and this Manager has none (use WithCgroup)")
	}
	return nil
}

// applyLimits writes l into the process's cgroup, which exists and is empty:
// the leader is cloned into it only later, so it runs under the limits from
// its first instruction.
func applyLimits(l Limits, _ *sysProc, c *containment) error {
	if l.IsZero() {
		return nil
	}
	return c.cg.setLimits(l)
}
