//go:build !linux && !windows

package agentproc

import "runtime"

// checkLimits refuses every limit: these systems have no per-tree limit on
// memory, processes or CPU (rlimits hold per process, and a tree escapes
// them by forking).
func checkLimits(l Limits, _ *config) error {
	return unsupportedLimits(l, runtime.GOOS+" has no limit on a whole process tree "+
		"(rlimits hold per process); limits need Linux with WithCgroup, or Windows")
}

func applyLimits(Limits, *sysProc, *containment) error { return nil }
