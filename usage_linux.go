package agentproc

import (
	"os"
	"time"

	"github.com/agentproc/agentproc/internal/procfs"
)

func usageSupported() error { return nil }

// treeUsage reads the cgroup's counters where the tree has a cgroup that
// keeps them, and sums /proc over the tree's live processes (treeMembers)
// for whatever it does not.
func treeUsage(p *Process) (Usage, error) {
	var u Usage
	cpuOK, memOK := false, false
	if c := p.sup.ctr; c != nil && c.cg != nil {
		if cu := c.cg.Usage(); cu.CPUOK {
			u.CPU, cpuOK = cu.CPU, true
		}
		u.Memory, memOK = c.cg.Memory()
	}
	if cpuOK && memOK {
		return u, nil
	}
	s, err := newProcScanner()
	if err != nil {
		return Usage{}, err
	}
	defer s.Close()
	members, err := treeMembers(s, nil, []portTree{p.portTree()})
	if err != nil {
		return Usage{}, err
	}
	var cpu time.Duration
	var pages int64
	for _, m := range members {
		stat, _, err := s.Read(m.pid, "stat", false)
		if err != nil {
			continue // exited since it was listed
		}
		ns, state, ok := procfs.ParseStatCPU(stat)
		if !ok || state == 'Z' || state == 'X' {
			continue // a zombie's time goes to its parent once reaped
		}
		cpu += time.Duration(ns)
		// A process that exits between the two reads keeps its CPU time
		// in the sum and adds no memory, which is what it holds by then.
		if statm, _, err := s.Read(m.pid, "statm", false); err == nil {
			if n, ok := procfs.ParseStatmResident(statm); ok {
				pages += n
			}
		}
	}
	if !cpuOK {
		u.CPU = cpu
	}
	if !memOK {
		u.Memory = pages * int64(os.Getpagesize())
	}
	return u, nil
}
