package agentproc

import (
	"context"
	"time"

	"golang.org/x/xerrors"
)

// Usage is what a running process tree uses now, as Process.Usage reads it.
type Usage struct {
	// CPU is the user plus system CPU time the tree has used so far.
	CPU time.Duration
	// Memory is the tree's memory in bytes now.
	Memory int64
}

// Usage reads, now, the CPU time and memory of the process's running tree
// (the shell, its descendants, processes carrying its MarkerEnv marker and
// the members of its cgroup: the processes Ports looks at). Nothing samples
// in the background: each call reads the OS's counters.
//
// On Linux, when the tree has a cgroup of its own (Request.Limits, or
// WithCgroup), CPU is the cgroup's usage (v2 cpu.stat usage_usec, v1
// cpuacct.usage), which counts every member since the start, exited or
// not, and Memory is what the cgroup is charged (v2 memory.current, v1
// memory.usage_in_bytes): resident memory plus the page cache and kernel
// memory its members caused. Without a cgroup (or a controller the cgroup
// lacks) the figures are summed over the tree's live processes from
// /proc/PID/stat and /proc/PID/statm: CPU is each process's own time plus
// that of the children it has waited for, so the time of a member that
// exited unwaited for (an orphan reaped by init) leaves the sum; Memory is
// the sum of their resident set sizes, in which a page shared by several
// members counts once for each. A tree that runs no process at the moment
// of the read (all but the shell just exited) reads as zero, which is then
// true.
//
// Once the process has exited Usage returns an error wrapping
// ErrNotRunning: Info's CPUTime and MaxRSS are then the final figures.
// macOS, FreeBSD and Windows return ErrUnsupported wrapped with the
// platform's name. When ctx ends before the read does, Usage returns
// ctx.Err() and the read finishes on its own.
func (p *Process) Usage(ctx context.Context) (Usage, error) {
	if err := usageSupported(); err != nil {
		return Usage{}, err
	}
	if err := ctx.Err(); err != nil {
		return Usage{}, err
	}
	if p.exited() {
		return Usage{}, xerrors.Errorf("usage of process %s: %w", p.id, ErrNotRunning)
	}
	type read struct {
		u   Usage
		err error
	}
	done := make(chan read, 1)
	go func() {
		u, err := treeUsage(p)
		done <- read{u, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return Usage{}, xerrors.Errorf("usage of process %s: %w", p.id, r.err)
		}
		// The tree may have exited during the read, which then saw only
		// part of it (or nothing): that is not a reading of a running tree.
		if p.exited() {
			return Usage{}, xerrors.Errorf("usage of process %s: %w", p.id, ErrNotRunning)
		}
		return r.u, nil
	case <-ctx.Done():
		return Usage{}, ctx.Err()
	}
}

// The per-OS usage layer (usage_linux.go, usage_other.go):
//   - usageSupported() is nil where treeUsage works, else ErrUnsupported
//     wrapped with the platform's name;
//   - treeUsage(p) reads the current usage of p's tree (see Process.Usage),
//     without any lock held.
var (
	_ func() error                  = usageSupported
	_ func(*Process) (Usage, error) = treeUsage
)
