package agentproc

import (
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// containment reaches the parts of a process tree that left its process
// group (setsid, double forks, daemons): every process of our user whose
// environment carries the tree's marker, and, with WithCgroup, every member
// of the tree's own cgroup. The process group itself stays sysProc's job;
// containment acts after it on each stop path.
//
// Sweeps read /proc, so they run only when something is being stopped,
// never on a timer.
type containment struct {
	entry []byte  // MarkerEnv=<id>, exactly as it appears in /proc/PID/environ
	cg    *cgroup // nil without WithCgroup

	// startedAt is when the leader was about to start (monotonic), for
	// candidatePIDs' cheap path.
	startedAt time.Time

	mu       sync.Mutex
	leader   int              // PID and process group ID of the shell
	found    map[int]bool     // every PID found outside the group, for Leftovers
	targets  map[int]*escapee // processes signalled so far, by PID
	released bool
}

// escapee is one process outside the group that was verified and signalled.
type escapee struct {
	fd     int // pidfd naming it, -1 where the kernel has none
	killed bool
}

const (
	// maxSweepRounds bounds the scan-kill loop: each round kills what the
	// previous round's processes forked before dying.
	maxSweepRounds = 10
	// escapeeDeathWait bounds how long a kill sweep waits for what it
	// killed to be gone, so that Stop returns with the tree gone.
	escapeeDeathWait = time.Second
)

func newContainment(id string, cfg *config) (*containment, error) {
	c := &containment{
		entry:   []byte(MarkerEnv + "=" + id),
		found:   make(map[int]bool),
		targets: make(map[int]*escapee),
	}
	if cfg.cgroupParent != "" {
		g, err := newCgroup(cfg.cgroupParent, id)
		if err != nil {
			return nil, err
		}
		c.cg = g
	}
	return c, nil
}

// prepare is called just before the start and returns the directory of the
// process's cgroup, or -1 without one, for sysProc.prepare to start the
// leader in.
func (c *containment) prepare() (cgroupFD int) {
	c.startedAt = time.Now()
	if c.cg == nil {
		return -1
	}
	return c.cg.dirfd
}

// startInCgroup makes the kernel create the leader directly inside the
// cgroup open at fd (clone3 with CLONE_INTO_CGROUP): there is no moment at
// which the leader or an early child runs outside it.
func startInCgroup(attr *syscall.SysProcAttr, fd int) error {
	attr.UseCgroupFD = true
	attr.CgroupFD = fd
	return nil
}

// describe names the cgroup for a start error.
func (c *containment) describe() string {
	if c.cg == nil {
		return ""
	}
	return fmt.Sprintf(" in cgroup %q", c.cg.path)
}

// started records the leader, whose PID is the process group ID.
func (c *containment) started(cmd *exec.Cmd) {
	c.mu.Lock()
	c.leader = cmd.Process.Pid
	c.mu.Unlock()
	if c.cg != nil {
		c.cg.closeDir()
	}
}

// terminate sends SIGTERM to every process of the tree outside the process
// group, which the caller has just signalled itself: the first step of the
// stop ladder. The kill step is killEscaped, run once the shell is gone.
func (c *containment) terminate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return
	}
	s, err := newProcScanner()
	if err != nil {
		return
	}
	defer s.close()
	c.signalNewLocked(s, unix.SIGTERM)
}

// killEscaped SIGKILLs every process of the tree outside the process group,
// which the caller has killed already: the cgroup as a whole, then the
// processes signalled by terminate, then whatever carries the marker,
// scanning again until a scan finds nothing new (a process may fork between
// a scan and its kill). It waits briefly for them to be gone, so their end
// of the output pipe is closed, and returns how many processes outside the
// group were found on all stop paths of this tree.
func (c *containment) killEscaped() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return len(c.found)
	}
	s, err := newProcScanner()
	if err != nil {
		return len(c.found)
	}
	defer s.close()
	if c.cg != nil {
		// Counted before cgroup.kill makes them vanish; the kill itself
		// needs no PID, so it cannot hit a reused one.
		for _, pid := range c.cg.members() {
			if pg, ok := s.pgrp(pid); ok && pg != c.leader {
				c.found[pid] = true
			}
		}
		c.cg.kill()
	}
	for pid, e := range c.targets {
		if !e.killed {
			_ = signalTarget(pid, e.fd, unix.SIGKILL)
			e.killed = true
		}
	}
	for range maxSweepRounds {
		if c.signalNewLocked(s, unix.SIGKILL) == 0 {
			break
		}
	}
	c.waitGoneLocked(escapeeDeathWait)
	return len(c.found)
}

// signalNewLocked finds the tree's processes outside the group (cgroup
// members and marker carriers), sends sig to each one not signalled with it
// before, and returns how many it signalled.
//
// PID reuse: a candidate is first pinned with a pidfd, then checked again
// (marker in its environment, or listed in cgroup.procs) and only then
// signalled through the pidfd. If the PID was reused before the pidfd was
// opened, the check fails on the newcomer; if after, the pidfd names the
// dead original and the signal goes nowhere.
func (c *containment) signalNewLocked(s *procScanner, sig unix.Signal) int {
	var cands []int
	if c.cg != nil {
		cands = c.cg.members()
	}
	marked, _, err := s.markedPIDs(c.entry, c.leader, c.startedAt)
	if err == nil {
		cands = append(cands, marked...)
	}
	type pinned struct{ pid, fd int }
	var pins []pinned
	seen := make(map[int]bool, len(cands))
	for _, pid := range cands {
		if seen[pid] || pid == c.leader {
			continue
		}
		seen[pid] = true
		if pg, ok := s.pgrp(pid); !ok || pg == c.leader {
			continue // gone, or in the group the caller signals
		}
		if e, ok := c.targets[pid]; ok {
			if !pidfdExited(e.fd) {
				if sig == unix.SIGKILL && !e.killed {
					_ = signalTarget(pid, e.fd, sig)
					e.killed = true
				}
				continue
			}
			// The one we signalled is gone and its PID is back: a new
			// process, checked like any other.
			_ = unix.Close(e.fd)
			delete(c.targets, pid)
		}
		fd, err := pidfdOpen(pid)
		if err != nil {
			continue // exited since the scan
		}
		pins = append(pins, pinned{pid, fd})
	}
	if len(pins) == 0 {
		return 0
	}
	var inCgroup map[int]bool
	if c.cg != nil {
		inCgroup = make(map[int]bool)
		for _, pid := range c.cg.members() {
			inCgroup[pid] = true
		}
	}
	n := 0
	for _, p := range pins {
		if !inCgroup[p.pid] && !s.marked(p.pid, c.entry) {
			if p.fd >= 0 {
				_ = unix.Close(p.fd)
			}
			continue
		}
		if err := signalTarget(p.pid, p.fd, sig); err != nil {
			if p.fd >= 0 {
				_ = unix.Close(p.fd)
			}
			continue
		}
		c.found[p.pid] = true
		c.targets[p.pid] = &escapee{fd: p.fd, killed: sig == unix.SIGKILL}
		n++
	}
	return n
}

// waitGoneLocked waits up to timeout until every killed target has exited
// and the cgroup, if any, is empty. pidfds poll readable at exit, so this
// blocks in poll rather than on a timer.
func (c *containment) waitGoneLocked(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	var pfds []unix.PollFd
	for _, e := range c.targets {
		if e.killed && e.fd >= 0 {
			pfds = append(pfds, unix.PollFd{Fd: int32(e.fd), Events: unix.POLLIN})
		}
	}
	for len(pfds) > 0 {
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		n, err := unix.Poll(pfds, int(left/time.Millisecond)+1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return
		}
		if n == 0 {
			return
		}
		waiting := pfds[:0]
		for _, p := range pfds {
			if p.Revents == 0 {
				waiting = append(waiting, p)
			}
		}
		pfds = waiting
	}
	if c.cg != nil {
		c.cg.waitEvent("populated", "0", time.Until(deadline))
	}
}

// usage returns the tree's CPU time and peak memory from the cgroup where
// it knows them, else the leader's cpu and rss unchanged. The cgroup's
// numbers include every descendant, waited for or not.
func (c *containment) usage(cpu time.Duration, rss int64) (time.Duration, int64) {
	if c.cg == nil {
		return cpu, rss
	}
	gcpu, cpuOK, peak, peakOK := c.cg.usage()
	if cpuOK {
		cpu = gcpu
	}
	if peakOK {
		rss = peak
	}
	return cpu, rss
}

// release closes the pidfds and removes the cgroup. Later calls of the
// other methods do nothing.
func (c *containment) release() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return nil
	}
	c.released = true
	for pid, e := range c.targets {
		if e.fd >= 0 {
			_ = unix.Close(e.fd)
		}
		delete(c.targets, pid)
	}
	if c.cg != nil {
		return c.cg.remove()
	}
	return nil
}
