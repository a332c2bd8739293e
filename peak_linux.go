package agentproc

import (
	"bytes"
	"strconv"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc/internal/procfs"
)

// leaderPeak turns the leader's ru_maxrss (bytes) into the tree's peak
// memory, or 0 where it cannot be told from the host's own. Go starts a
// child with clone(CLONE_VM|CLONE_VFORK): until its exec the child runs
// on the host's memory, and exec folds that memory's high-water mark into
// the child's maxrss (the kernel keeps the larger across exec and exit),
// so a host that has touched 300 MiB saw 300 MiB reported for `true`. The
// mark the leader brought along is at most the host's own high-water mark
// now (VmHWM: it only grows), so a maxrss above that is the tree's own; at
// or below it, it may be the host's, and the peak is unknown (0) rather
// than a number the tree never used. A cgroup's memory.peak, where the tree
// has one, replaces it (containment.usage).
func leaderPeak(rss int64) int64 {
	if rss <= 0 || rss <= lastHWM.Load() {
		// VmHWM only grows (short of a write to clear_refs): at or below
		// a mark read before, rss is at or below the mark now, with no
		// read at all (the usual case: every leader brings the host's
		// mark along).
		return 0
	}
	// getrusage is one system call, and its maxrss is at least VmHWM: a
	// maxrss above it needs no read of /proc.
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) == nil && rss > int64(ru.Maxrss)*1024 {
		return rss
	}
	hwm, ok := hostHWM()
	if !ok {
		return 0
	}
	for old := lastHWM.Load(); hwm > old && !lastHWM.CompareAndSwap(old, hwm); old = lastHWM.Load() {
	}
	if rss > hwm {
		return rss
	}
	return 0
}

// lastHWM is the largest VmHWM hostHWM has read, in bytes.
var lastHWM atomic.Int64

// hostHWM is this process's VmHWM in bytes, from /proc/self/status.
func hostHWM() (int64, bool) {
	status, err := procfs.ReadSelf("status")
	if err != nil {
		return 0, false
	}
	v, ok := procfs.StatusField(status, "VmHWM")
	if !ok {
		return 0, false
	}
	kib, err := strconv.ParseInt(string(bytes.TrimSuffix(v, []byte(" kB"))), 10, 64)
	return kib * 1024, err == nil
}
