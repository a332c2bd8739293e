//go:build unix && !linux

package agentproc

import (
	"runtime"
	"strings"

	"golang.org/x/xerrors"
)

// checkLimits refuses every limit: these systems have no per-tree limit on
// memory, processes or CPU (rlimits hold per process, and a tree escapes
// them by forking).
func checkLimits(l Limits, _ *config) error {
	return unsupportedLimits(l, runtime.GOOS+" has no limit on a whole process tree "+
		"(rlimits hold per process); limits need Linux (with a cgroup) or Windows")
}

func applyLimits(Limits, *sysProc, *containment) error { return nil }

// limitFields names the fields l sets, as "Limits.Memory".
func limitFields(l Limits) []string {
	var f []string
	if l.Memory > 0 {
		f = append(f, "Limits.Memory")
	}
	if l.Procs > 0 {
		f = append(f, "Limits.Procs")
	}
	if l.CPU > 0 {
		f = append(f, "Limits.CPU")
	}
	return f
}

// unsupportedLimits is the error for limits the platform cannot enforce: it
// names every field of l that is set and says why.
func unsupportedLimits(l Limits, why string) error {
	return xerrors.Errorf("%s: %s: %w", strings.Join(limitFields(l), ", "), why, ErrUnsupported)
}
