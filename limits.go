package agentproc

import (
	"fmt"
	"math"
	"strings"

	"golang.org/x/xerrors"
)

// Limits bounds the resources of one process tree: the shell and every
// process it starts, together. The zero value of each field means no limit.
//
// Where a limit holds depends on the OS and on WithCgroup (see the README's
// "Limits" section): Start never runs a process with a limit it cannot
// enforce, it returns ErrUnsupported naming the field and the reason.
//
// Its JSON tags are part of httpapi's wire format, which embeds it; they are
// kept stable (TestWireTags).
type Limits struct {
	// Memory is the most memory, in bytes, the tree may use (cgroup
	// memory.max, with swap forbidden where the kernel accounts it; a Job
	// Object's job memory on Windows). On Linux a tree that needs more is
	// killed by the kernel's OOM killer, all of it, and its Info.Reason is
	// ReasonOOM; on Windows the allocation that would pass it fails. 0 means
	// no limit; otherwise at least 1 MiB.
	Memory int64 `json:"memory_bytes,omitempty"`
	// Procs is the most processes and threads the tree may have at once
	// (cgroup pids.max; a Job Object's active processes on Windows, which
	// does not count threads). A fork beyond it fails in the child, which
	// is how a fork bomb is held. 0 means no limit.
	Procs int `json:"procs,omitempty"`
	// CPU is the CPU time the tree may use, as a number of cores: 0.25 is a
	// quarter of one core, 2 is two whole cores (cgroup cpu.max; a Job
	// Object's CPU rate on Windows). The tree is throttled, not stopped.
	// 0 means no limit.
	CPU float64 `json:"cpu,omitempty"`
}

// IsZero reports whether l sets no limit.
func (l Limits) IsZero() bool { return l == Limits{} }

// String describes the limits set, as "memory 64 MiB, procs 64, cpu 0.25".
func (l Limits) String() string {
	var parts []string
	if l.Memory > 0 {
		parts = append(parts, "memory "+formatBytes(l.Memory))
	}
	if l.Procs > 0 {
		parts = append(parts, fmt.Sprintf("procs %d", l.Procs))
	}
	if l.CPU > 0 {
		parts = append(parts, fmt.Sprintf("cpu %g", l.CPU))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// formatBytes writes n in the largest binary unit that keeps it readable,
// as "64 MiB" or "1.5 GiB", for messages about limits.
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for q := n / unit; q >= unit && exp < 5; q /= unit {
		div *= unit
		exp++
	}
	v := float64(n) / float64(div)
	s := fmt.Sprintf("%.1f", v)
	s = strings.TrimSuffix(s, ".0")
	return s + " " + string("KMGTPE"[exp]) + "iB"
}

// minMemoryLimit is the smallest Memory accepted: below a few pages no shell
// can even start, and the kernel would OOM-kill it before it ran anything,
// which would read as the command's fault.
const minMemoryLimit = 1 << 20

// maxCPUQuotaCores bounds CPU so that the cgroup quota, in microseconds per
// 100 ms period, stays far from overflow.
const maxCPUQuotaCores = 1 << 20

// limitsFor merges req over the Manager's defaults field by field and checks
// the result: a negative or absurd value, or one above the operator's
// ceiling, is ErrInvalidRequest, a limit this platform cannot enforce with
// the Manager's settings is ErrUnsupported.
func (m *Manager) limitsFor(req Limits) (Limits, error) {
	l := req
	d := m.cfg.limits
	switch {
	case d.Memory > 0 && req.Memory > d.Memory:
		return l, xerrors.Errorf("Limits.Memory %s is above the ceiling of %s set with WithLimits: %w",
			formatBytes(req.Memory), formatBytes(d.Memory), ErrInvalidRequest)
	case d.Procs > 0 && req.Procs > d.Procs:
		return l, xerrors.Errorf("Limits.Procs %d is above the ceiling of %d set with WithLimits: %w",
			req.Procs, d.Procs, ErrInvalidRequest)
	case d.CPU > 0 && req.CPU > d.CPU:
		return l, xerrors.Errorf("Limits.CPU %g is above the ceiling of %g set with WithLimits: %w",
			req.CPU, d.CPU, ErrInvalidRequest)
	}
	if l.Memory == 0 {
		l.Memory = d.Memory
	}
	if l.Procs == 0 {
		l.Procs = d.Procs
	}
	if l.CPU == 0 {
		l.CPU = d.CPU
	}
	switch {
	case l.Memory < 0:
		return l, xerrors.Errorf("Limits.Memory %d is negative: %w", l.Memory, ErrInvalidRequest)
	case l.Memory > 0 && l.Memory < minMemoryLimit:
		return l, xerrors.Errorf("Limits.Memory %d is below the minimum of %s: %w",
			l.Memory, formatBytes(minMemoryLimit), ErrInvalidRequest)
	case l.Procs < 0:
		return l, xerrors.Errorf("Limits.Procs %d is negative: %w", l.Procs, ErrInvalidRequest)
	case math.IsNaN(l.CPU) || l.CPU < 0 || l.CPU > maxCPUQuotaCores:
		return l, xerrors.Errorf("Limits.CPU %g is not a number of cores between 0 and %d: %w",
			l.CPU, maxCPUQuotaCores, ErrInvalidRequest)
	}
	if l.IsZero() {
		return l, nil
	}
	if err := checkLimits(l, &m.cfg); err != nil {
		return l, err
	}
	return l, nil
}
