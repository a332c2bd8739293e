package agentproc

// checkLimits accepts every limit: whether one can be held is known only
// when newContainment plans the tree's cgroups, which fails Start with
// ErrUnsupported (naming the limit, what was tried and the remedy) before
// anything runs.
func checkLimits(Limits, *config) error { return nil }

// applyLimits does nothing more: cgroup.New wrote the limits that may hold
// before the start, and containment.started writes the rest.
func applyLimits(Limits, *sysProc, *containment) error { return nil }
