package agentproc

import (
	"os"
	"time"

	"github.com/agentproc/agentproc/internal/procfs"
)

func usageSupported() error { return nil }

// treeUsages reads each tree's cgroup counters where it has a cgroup that
// keeps them, and sums /proc over the live processes of the others
// (treeMembers, one pass over /proc for all of them: a page showing many
// processes pays for one scan, not one a process).
func treeUsages(procs []*Process) ([]Usage, error) {
	out := make([]Usage, len(procs))
	type need struct {
		i        int
		cpu, mem bool // the figure still to be summed from /proc
	}
	var needs []need
	var trees []portTree
	for i, p := range procs {
		cpuOK, memOK := false, false
		if c := p.sup.ctr; c != nil && c.cg != nil {
			if cu := c.cg.Usage(); cu.CPUOK {
				out[i].CPU, cpuOK = cu.CPU, true
			}
			out[i].Memory, memOK = c.cg.Memory()
		}
		if !cpuOK || !memOK {
			needs = append(needs, need{i, !cpuOK, !memOK})
			trees = append(trees, p.portTree())
		}
	}
	if len(trees) == 0 {
		return out, nil
	}
	s, err := newProcScanner()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	members, err := treeMembers(s, nil, trees)
	if err != nil {
		return nil, err
	}
	cpu := make([]time.Duration, len(trees))
	pages := make([]int64, len(trees))
	for _, m := range members {
		stat, _, err := s.Read(m.pid, "stat", false)
		if err != nil {
			continue // exited since it was listed
		}
		ns, state, ok := procfs.ParseStatCPU(stat)
		if !ok || state == 'Z' || state == 'X' {
			continue // a zombie's time goes to its parent once reaped
		}
		cpu[m.tree] += time.Duration(ns)
		// A process that exits between the two reads keeps its CPU time
		// in the sum and adds no memory, which is what it holds by then.
		if statm, _, err := s.Read(m.pid, "statm", false); err == nil {
			if n, ok := procfs.ParseStatmResident(statm); ok {
				pages[m.tree] += n
			}
		}
	}
	pageSize := int64(os.Getpagesize())
	for t, n := range needs {
		if n.cpu {
			out[n.i].CPU = cpu[t]
		}
		if n.mem {
			out[n.i].Memory = pages[t] * pageSize
		}
	}
	return out, nil
}
