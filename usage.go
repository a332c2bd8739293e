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
		u, err := treeUsages([]*Process{p})
		if err != nil {
			done <- read{err: err}
			return
		}
		done <- read{u: u[0]}
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

// Usage reads, as Process.Usage does, the usage of every running process of
// the Scope's owner, by ID, in one pass over the OS's tables: a caller
// showing many processes (a page refreshing its table) pays for one scan of
// /proc, not one a process. A process that exits during the read is left
// out. It returns ErrUnsupported where Process.Usage does, and ctx.Err()
// when ctx ends first (the read then finishes on its own).
func (s *Scope) Usage(ctx context.Context) (map[string]Usage, error) {
	if err := usageSupported(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	procs := s.m.runningOf(s.visible)
	type read struct {
		u   []Usage
		err error
	}
	done := make(chan read, 1)
	go func() {
		u, err := treeUsages(procs)
		done <- read{u, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, xerrors.Errorf("usage of owner %q's processes: %w", s.owner, r.err)
		}
		out := make(map[string]Usage, len(procs))
		for i, p := range procs {
			if !p.exited() {
				out[p.id] = r.u[i]
			}
		}
		return out, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// runningOf returns the running processes visible accepts. Only the map is
// read under the lock; the reads of their usage come after.
func (m *Manager) runningOf(visible func(*Process) bool) []*Process {
	m.mu.Lock()
	defer m.mu.Unlock()
	var procs []*Process
	for _, p := range m.procs {
		if visible(p) && !p.exited() {
			procs = append(procs, p)
		}
	}
	return procs
}

// The per-OS usage layer (usage_linux.go, usage_other.go: usageSupported,
// treeUsages) is part of the contract in platform.go.
