package agentproc

import (
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc/internal/cgroup"
	"github.com/agentproc/agentproc/internal/procfs"
)

// containment reaches the parts of a process tree that left its process
// group (setsid, double forks, daemons): every process of our user whose
// environment carries the tree's marker, and, with WithCgroup or Limits,
// every member of the tree's own cgroups. The process group itself stays sysProc's job;
// containment acts after it on each stop path.
//
// Sweeps read /proc, so they run only when something is being stopped,
// never on a timer. The pass over /proc that finds candidates runs without
// any lock and is shared with every other sweep at about the same moment
// (takeSnapshot). mu serialises the per-candidate steps of this one tree
// (pin, verify, signal, record) with its release; it is never taken by
// Info, Get, List or any other process, so a slow /proc read under it
// delays only this tree's own stop.
type containment struct {
	id    string
	entry []byte        // MarkerEnv=<id>, exactly as it appears in /proc/PID/environ
	cg    *cgroup.Group // nil without WithCgroup and Limits
	// noProc is set when /proc belongs to another PID namespace (see
	// foreignProc): no PID read from it means anything here, so there is
	// no sweep, and only the cgroup, if any, is killed as a whole.
	noProc bool

	// startedAt is when the leader was about to start (monotonic), for
	// candidatePIDs' cheap path.
	startedAt time.Time

	mu       sync.Mutex
	leader   int              // PID and process group ID of the shell
	found    map[int]bool     // every PID found outside the group, for Leftovers
	targets  map[int]*escapee // processes signalled so far, by PID
	stale    []int            // pidfds of targets that exited, closed at release
	released bool
}

// escapee is one process outside the group that was verified and signalled.
type escapee struct {
	// fd is a pidfd naming it, or -1 when none could be opened (no pidfd
	// support, or pidfd_open denied by a seccomp profile). Without one the
	// entry only records that the PID was signalled: it is never used to
	// signal again, since the PID may name another process by then.
	fd     int
	killed bool
}

const (
	// maxSweepRounds bounds the scan-kill loop: each round kills what the
	// previous round's processes forked before dying.
	maxSweepRounds = 10
	// escapeeDeathWait bounds how long a kill sweep waits for what it
	// killed to be gone, so that Stop returns with the tree gone.
	escapeeDeathWait = time.Second
	// goneWithoutPidfdPoll is how often the kill sweep looks again whether
	// processes it killed without a pidfd are gone; there is no event for
	// that without one.
	goneWithoutPidfdPoll = 5 * time.Millisecond
)

// newContainment makes the containment of a tree about to start. The tree
// gets cgroups of its own with WithCgroup, and with limits, which hold only
// in a cgroup: Linux has no per-tree limit on memory, processes or CPU
// outside one (RLIMIT_AS and RLIMIT_CPU hold per process, so a tree escapes
// them by forking, and RLIMIT_NPROC counts every process of the user).
// Where they go is internal/cgroup's to decide (see its plan).
func newContainment(id string, cfg *config, l Limits) (*containment, error) {
	c := &containment{
		id:      id,
		entry:   []byte(MarkerEnv + "=" + id),
		noProc:  cfg.foreignProc,
		found:   make(map[int]bool),
		targets: make(map[int]*escapee),
	}
	if cfg.cgroupParent != "" || !l.IsZero() {
		parent := cfg.cgroupParent
		if parent == CgroupAuto {
			parent = cgroup.Auto
		}
		g, err := cgroup.New(cgroup.Spec{
			ID:     id,
			Parent: parent,
			Limits: cgroup.Limits{Memory: l.Memory, Procs: l.Procs, CPU: l.CPU},
		})
		if err != nil {
			return nil, err
		}
		c.cg = g
	}
	return c, nil
}

// prepare is called just before the start and returns the directory of the
// process's cgroup v2, or -1 without one, for sysProc.prepare to start the
// leader in.
func (c *containment) prepare() (cgroupFD int) {
	c.startedAt = time.Now()
	if c.cg == nil {
		return -1
	}
	return c.cg.CloneFD()
}

// enterThread is the containment's step of startCommand: on cgroup v1,
// which has no CLONE_INTO_CGROUP, it moves the calling (locked) OS thread
// into the tree's cgroups so that the leader is born inside them, and
// returns the step that moves it back. needed is false when there is
// nothing to do, so startCommand need not lock a thread.
func (c *containment) enterThread() (leave func() error, err error) {
	return c.cg.EnterThread()
}

// needsThread reports whether enterThread has anything to do.
func (c *containment) needsThread() bool { return c.cg != nil && c.cg.NeedsThread() }

// startInCgroup makes the kernel create the leader directly inside the
// cgroup open at fd (clone3 with CLONE_INTO_CGROUP): there is no moment at
// which the leader or an early child runs outside it.
func startInCgroup(attr *syscall.SysProcAttr, fd int) error {
	attr.UseCgroupFD = true
	attr.CgroupFD = fd
	return nil
}

// cgroupDir is the tree's cgroup directory (its cgroup.procs lists the
// tree), "" without a cgroup (or without a containment: a detached process
// has none). cg is set once by newContainment and never changes.
func (c *containment) cgroupDir() string {
	if c == nil || c.cg == nil {
		return ""
	}
	return c.cg.Path()
}

// describe names the cgroup for a start error.
func (c *containment) describe() string {
	if c.cg == nil {
		return ""
	}
	return fmt.Sprintf(" in cgroup %q", c.cg.Path())
}

// started records the leader, whose PID is the process group ID, and
// finishes the cgroups: on v1 the memory and CPU limits are written only
// now, after the host's thread has left them (see cgroup.Group.Started).
// On an error the caller kills the tree.
func (c *containment) started(cmd *exec.Cmd) error {
	c.mu.Lock()
	c.leader = cmd.Process.Pid
	c.mu.Unlock()
	addLeader(cmd.Process.Pid)
	if c.cg != nil {
		return c.cg.Started()
	}
	return nil
}

// terminate sends SIGTERM, then SIGCONT so that a stopped process can act
// on it, to every process of the tree outside the process group, which the
// caller has just signalled itself: the first step of the stop ladder. The
// kill step is killEscaped, run once the shell is gone.
//
// The processes are looked for in a pass over /proc begun after since: the
// moment Stop was called, or the moment Close began, so that one pass
// serves every process Close stops.
func (c *containment) terminate(since time.Time) {
	if c.noProc {
		return
	}
	s, err := newProcScanner()
	if err != nil {
		return
	}
	defer s.Close()
	cands := c.candidates(s, since)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.signalLocked(s, cands, unix.SIGTERM)
}

// reaped says the leader has been reaped: from now on its PID may name
// another process, so marker passes read it again.
func (c *containment) reaped() {
	removeLeader(c.leaderPID())
}

// prepareStops takes the pass over /proc that the terminate steps of stops
// asked for from since on will use, before any of them signals anything.
func prepareStops(cfg *config, since time.Time) {
	if !cfg.foreignProc {
		takeSnapshot(markerPass, since)
	}
}

// killEscaped SIGKILLs every process of the tree outside the process group,
// which the caller has killed already: the cgroup as a whole, then the
// processes terminate pinned with a pidfd, then whatever carries the
// marker, scanning again until a scan finds nothing new (a process may fork
// between a scan and its kill). It waits briefly for them to be gone, so
// their end of the output pipe is closed, and returns how many processes
// outside the group were found on all stop paths of this tree.
func (c *containment) killEscaped() int {
	if c.cg != nil {
		// Counted before cgroup.kill makes them vanish; the kill itself
		// needs no PID, so it cannot hit a reused one. cgroup.procs lists
		// PIDs of our own namespace, but telling group members apart needs
		// /proc.
		// An empty cgroup (the usual case once the shell is gone) needs
		// neither: nothing outside it can fork into it.
		var outside []int
		members := c.cg.Members()
		if !c.noProc && len(members) > 0 {
			if s, err := newProcScanner(); err == nil {
				for _, pid := range members {
					if pg, ok := s.PGrp(pid); ok && pg != c.leaderPID() {
						outside = append(outside, pid)
					}
				}
				s.Close()
			}
		}
		if len(members) > 0 || c.noProc {
			c.cg.Kill()
		}
		c.mu.Lock()
		for _, pid := range outside {
			c.found[pid] = true
		}
		c.mu.Unlock()
	}
	if c.noProc {
		c.waitGone(escapeeDeathWait)
		return c.foundCount()
	}
	if c.nothingForked() {
		return 0
	}
	s, err := newProcScanner()
	if err != nil {
		return c.foundCount()
	}
	defer s.Close()
	c.mu.Lock()
	// A pidfd names the process terminate verified even if its PID was
	// reused meanwhile, so these need no new check. Targets without one
	// are not signalled from this list: the scan below finds them again
	// if they still carry the marker.
	for _, e := range c.targets {
		if e.fd >= 0 && !e.killed && !c.released {
			_ = unix.PidfdSendSignal(e.fd, unix.SIGKILL, nil, 0)
			e.killed = true
		}
	}
	c.mu.Unlock()
	for range maxSweepRounds {
		cands := c.candidates(s, time.Now())
		c.mu.Lock()
		n := c.signalLocked(s, cands, unix.SIGKILL)
		c.mu.Unlock()
		if n == 0 {
			break
		}
	}
	c.waitGone(escapeeDeathWait)
	return c.foundCount()
}

// nothingForked reports, for a tree whose stop ladder found nothing (and
// whose cgroup, if any, was empty), whether the kernel has handed out no PID since the leader's:
// then the leader forked nothing, so nothing can have escaped. It is the
// usual case for a short command on a quiet host, and one read of a sysctl
// instead of a sweep. A PID range that may have wrapped is never taken as
// proof.
func (c *containment) nothingForked() bool {
	c.mu.Lock()
	leader, quiet := c.leader, len(c.targets) == 0 && len(c.found) == 0
	c.mu.Unlock()
	if !quiet || leader <= 0 || time.Since(c.startedAt) >= wrapWindow() {
		return false
	}
	last, ok := procfs.LastPID()
	return ok && last == leader
}

func (c *containment) leaderPID() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leader
}

func (c *containment) foundCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.found)
}

// candidates lists the processes that may belong to the tree outside its
// group, unverified: cgroup members and marker carriers, the latter from a
// probe of the PIDs handed out since the leader started when that range is
// narrow, else from a snapshot of /proc begun after since and shared with
// every other sweep at about the same moment. No lock is held.
func (c *containment) candidates(s *procScanner, since time.Time) []int {
	var cands []int
	if c.cg != nil {
		cands = c.cg.Members()
	}
	if pids, ok := s.candidatePIDs(c.leaderPID(), c.startedAt); ok {
		return append(cands, s.probeMarked(pids, c.entry)...)
	}
	return append(cands, takeSnapshot(markerPass, since).markedBy(c.id)...)
}

// signalLocked sends sig to each candidate that is verified, right now, to
// be a process of the tree outside the group, and returns how many it
// signalled that had not been sent sig before. A SIGTERM is followed by a
// SIGCONT, so that a stopped process acts on it.
//
// PID reuse: a candidate is first pinned with a pidfd, then checked again
// (marker in its environment, or its cgroup in /proc/PID/cgroup) and only
// then signalled through the pidfd. If the PID was reused before the pidfd
// was opened, the check fails on the newcomer; if after, the pidfd names
// the dead original and the signal goes nowhere. When no pidfd can be
// opened, for whatever reason, the check is made immediately before kill
// with nothing in between but the kill itself; a PID is never signalled
// because it was found earlier.
func (c *containment) signalLocked(s *procScanner, cands []int, sig unix.Signal) int {
	if c.released {
		return 0
	}
	n := 0
	seen := make(map[int]bool, len(cands))
	for _, pid := range cands {
		if seen[pid] || pid == c.leader {
			continue
		}
		seen[pid] = true
		if pg, ok := s.PGrp(pid); !ok || pg == c.leader {
			continue // gone, or in the group the caller signals
		}
		e := c.targets[pid]
		if e != nil && e.fd >= 0 {
			if !pidfdExited(e.fd) {
				if sig == unix.SIGKILL && !e.killed {
					_ = unix.PidfdSendSignal(e.fd, sig, nil, 0)
					e.killed = true
				}
				continue
			}
			// The one we signalled is gone and its PID is back: a new
			// process, checked like any other. Its pidfd is closed at
			// release, not now: waitGone may be polling it.
			c.stale = append(c.stale, e.fd)
			delete(c.targets, pid)
			e = nil
		}
		fd := pidfdOpen(pid)
		if !c.verify(s, pid) || signalTarget(pid, fd, sig) != nil {
			if fd >= 0 {
				_ = unix.Close(fd)
			}
			continue
		}
		if sig == unix.SIGTERM {
			_ = signalTarget(pid, fd, unix.SIGCONT)
		}
		c.found[pid] = true
		if e == nil {
			e = &escapee{fd: fd}
			c.targets[pid] = e
		} else if fd >= 0 {
			e.fd = fd
		}
		if sig == unix.SIGKILL {
			if e.killed {
				continue // killed before without a pidfd and not gone yet
			}
			e.killed = true
		}
		n++
	}
	return n
}

// verify reports whether pid belongs to the tree: it carries the marker
// and runs as our user, or it sits in the tree's cgroup.
func (c *containment) verify(s *procScanner, pid int) bool {
	return s.marked(pid, c.entry) || (c.cg != nil && s.inCgroup(pid, c.cg.Leaf()))
}

// waitGone waits up to timeout until every killed target has exited and
// the cgroup, if any, is empty. pidfds poll readable at exit, so this
// blocks in poll rather than on a timer; targets killed without a pidfd are
// looked up in /proc again every goneWithoutPidfdPoll.
func (c *containment) waitGone(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	var pfds []unix.PollFd
	var bare []int
	c.mu.Lock()
	for pid, e := range c.targets {
		switch {
		case !e.killed:
		case e.fd >= 0:
			pfds = append(pfds, unix.PollFd{Fd: int32(e.fd), Events: unix.POLLIN})
		default:
			bare = append(bare, pid)
		}
	}
	c.mu.Unlock()
	if !waitPidfds(pfds, deadline) {
		return
	}
	if len(bare) > 0 {
		c.waitGoneBare(bare, deadline)
	}
	if c.cg != nil {
		c.cg.WaitEmpty(time.Until(deadline))
	}
}

// waitGoneBare waits until deadline for processes killed without a pidfd:
// a PID is gone once it no longer names a live process carrying the marker
// (a zombie's environment reads empty).
func (c *containment) waitGoneBare(pids []int, deadline time.Time) {
	s, err := newProcScanner()
	if err != nil {
		return
	}
	defer s.Close()
	tick := time.NewTicker(goneWithoutPidfdPoll)
	defer tick.Stop()
	for {
		left := pids[:0]
		for _, pid := range pids {
			if s.marked(pid, c.entry) {
				left = append(left, pid)
			}
		}
		pids = left
		if len(pids) == 0 || time.Now().After(deadline) {
			return
		}
		<-tick.C
	}
}

// usage returns the tree's CPU time and peak memory from the cgroup where
// it knows them, else the leader's cpu and rss unchanged. The cgroup's
// numbers include every descendant, waited for or not.
func (c *containment) usage(cpu time.Duration, rss int64) (time.Duration, int64) {
	if c.cg == nil {
		return cpu, rss
	}
	u := c.cg.Usage()
	if u.CPUOK {
		cpu = u.CPU
	}
	if u.PeakOK {
		rss = u.Peak
	}
	return cpu, rss
}

// release closes the pidfds and removes the cgroup. Later calls of the
// other methods do nothing. The cgroup is removed after mu is released:
// removal may wait for the last members to finish dying.
func (c *containment) release() error {
	c.mu.Lock()
	if c.released {
		c.mu.Unlock()
		return nil
	}
	c.released = true
	if c.leader > 0 {
		removeLeader(c.leader) // a spawn that failed after the start
	}
	for _, fd := range c.stale {
		_ = unix.Close(fd)
	}
	c.stale = nil
	for pid, e := range c.targets {
		if e.fd >= 0 {
			_ = unix.Close(e.fd)
		}
		delete(c.targets, pid)
	}
	c.mu.Unlock()
	if c.cg != nil {
		return c.cg.Remove()
	}
	return nil
}

// pidfdOpen returns a pidfd for pid, or -1 when none can be had. Every
// error means "no pidfd" and nothing more: ENOSYS on kernels before 5.3,
// EPERM or anything else a seccomp profile chooses, ESRCH for a process
// that is gone. The caller then verifies and signals by PID, which is safe
// on its own (see signalLocked); reading an error as "exited" would let
// every escapee survive where pidfd_open is denied.
func pidfdOpen(pid int) int {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return -1
	}
	return fd
}

// signalTarget sends sig to the process named by fd (a pidfd), or by pid
// when fd is -1. A pidfd keeps naming the same process even after its PID is
// reused, so once the target was verified the signal cannot go astray.
func signalTarget(pid, fd int, sig unix.Signal) error {
	if fd >= 0 {
		return unix.PidfdSendSignal(fd, sig, nil, 0)
	}
	return unix.Kill(pid, sig)
}

// pidfdExited reports whether the process behind a pidfd has exited; a
// pidfd polls readable from then on.
func pidfdExited(fd int) bool {
	if fd < 0 {
		return false
	}
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(pfd, 0)
	return err == nil && n > 0
}

// waitPidfds blocks in poll until every pidfd in pfds is readable (its
// process has exited) or deadline passes, and reports whether all were.
func waitPidfds(pfds []unix.PollFd, deadline time.Time) bool {
	for len(pfds) > 0 {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		n, err := unix.Poll(pfds, int(left/time.Millisecond)+1)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			return false
		}
		waiting := pfds[:0]
		for _, p := range pfds {
			if p.Revents == 0 {
				waiting = append(waiting, p)
			}
		}
		pfds = waiting
	}
	return true
}
