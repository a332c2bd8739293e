package agentproc

import (
	"context"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"cdr.dev/slog/v3"
	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc/internal/cgroup"
	"github.com/agentproc/agentproc/internal/pidfd"
	"github.com/agentproc/agentproc/internal/procfs"
)

// containment reaches the parts of a process tree that left its process
// group (setsid, double forks, daemons): every process of our user whose
// environment carries the tree's marker, every process in the tree's own
// mount namespace (a tree sandboxed as root, which cannot leave it:
// inMountns), and, with WithCgroup or Limits, every member of the tree's
// own cgroups. The process group itself stays sysProc's job;
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

	// claim is the tree's claim on the Manager's cgroup sets made ahead (see
	// cgroupSetPool), nil without cgroups: once the tree's own are removed,
	// the next set is made for the same owner and limits.
	claim *cgroupSetClaim
	// logger reports a cgroup that removeCgroups could not remove.
	logger slog.Logger

	// startedAt is when the leader was about to start (monotonic), for
	// candidatePIDs' cheap path.
	startedAt time.Time

	mu     sync.Mutex
	leader int // PID and process group ID of the shell
	// mountns is the tree's own mount namespace (inMountns); zero without.
	mountns treeNamespace
	found   map[int]bool // every PID found outside the group, for Leftovers
	// targets are the processes outside the group signalled so far, pinned
	// by pidfd where one could be had (internal/pidfd: the protocol).
	targets  pidfd.Targets
	released bool
}

const (
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
// Where they go is internal/cgroup's to decide (see its plan). claim is what
// cgroupSetPool.take gave for the tree's ID: the cgroups made ahead, if
// any, which the containment then owns.
func newContainment(id string, cfg *config, l Limits, claim *cgroupSetClaim) (*containment, error) {
	c := &containment{
		id:     id,
		entry:  []byte(MarkerEnv + "=" + id),
		noProc: cfg.foreignProc,
		found:  make(map[int]bool),
		claim:  claim,
		logger: cfg.logger,
	}
	if claim != nil && claim.g != nil {
		c.cg, claim.g = claim.g, nil
		return c, nil
	}
	if wantsCgroup(cfg, l) {
		var guard *hostGuard
		if claim != nil {
			guard = claim.store.guard
		}
		g, err := cgroup.New(cgroupSpec(id, cfg, l, guard))
		if err != nil {
			guard.remove(id)
			return nil, err
		}
		c.cg = g
	}
	return c, nil
}

// wantsCgroup reports whether a tree gets cgroups of its own.
func wantsCgroup(cfg *config, l Limits) bool { return cfg.cgroupParent != "" || !l.IsZero() }

// cgroupSpec is what cgroup.New makes for the tree id. With a host guard
// the directory is listed with it before it is made, so that a host that
// dies while New runs leaves no cgroup unlisted; the caller unlists id if
// New fails.
func cgroupSpec(id string, cfg *config, l Limits, guard *hostGuard) cgroup.Spec {
	parent := cfg.cgroupParent
	if parent == CgroupAuto {
		parent = cgroup.Auto
	}
	spec := cgroup.Spec{
		ID:     id,
		Parent: parent,
		Limits: cgroup.Limits{Memory: l.Memory, Procs: l.Procs, CPU: l.CPU},
	}
	if guard != nil {
		spec.Listed = func(path string) { guard.add(id, hostIdentity{}, path) }
	}
	return spec
}

// cgroupSetPool is a Manager's cgroups made ahead for the next Starts with
// cgroups: making them (a directory in each hierarchy, the files a start
// writes opened, the OOM watch armed) is most of what Limits cost a Start,
// and off the Start path it overlaps with what the caller does next. Up to
// cgroupSetDepth sets are kept, for the owner and Limits of the last tree that
// had cgroups, each named for the ID the tree that takes it then gets;
// two, so that a Start right after another's Wait (a caller running
// commands one after the other) finds one ready while the next is made.
// They are made once a tree's cgroups are removed, so that making them
// does not compete with that tree's own start and exit, and never while a
// Start with cgroups is placing its thread: a mkdir holds the kernel's
// cgroup lock, which the placement's writes wait for (the maker yielding
// so measured better in BenchmarkLimits/all: docs/measurements.md). A set
// is only ever taken by a Start of the same owner with the same Limits,
// and nothing but this Manager knows its name. Close removes them. With a state dir each
// set is listed with the host guard under its ID from the moment it is
// made, so that a host that dies without Close leaves no empty set behind:
// the guard removes them with the trees (a tree that takes a set lists
// itself under the same ID).
type cgroupSetPool struct {
	mu     sync.Mutex
	closed bool
	guard  *hostGuard       // nil without a state dir; set before the first Start
	key    cgroupSetKey     // what sets holds and making makes
	sets   []readyCgroupSet // ready, oldest first
	making bool             // a goroutine is making sets for key
	ready  chan struct{}    // closed when the maker adds a set or stops
	wg     sync.WaitGroup
	// starting counts the Starts with cgroups between take and the
	// start's end; the maker makes no set while one is (startIdle), since
	// a mkdir holds the cgroup lock that the start's thread placement
	// needs.
	starting  int
	startIdle *sync.Cond
}

// cgroupSetDepth is how many ready sets a Manager keeps.
const cgroupSetDepth = 2

// readyCgroupSet is one set of cgroups made ahead, for the tree id.
type readyCgroupSet struct {
	id string
	g  *cgroup.Group
}

// cgroupSetKey is what ready sets are made for.
type cgroupSetKey struct {
	owner  string
	limits Limits
}

// cgroupSetClaim is a tree's claim on the ready sets: the set itself when one
// was ready (g), and what the next ones are to be made for.
type cgroupSetClaim struct {
	store *cgroupSetPool
	cfg   *config
	key   cgroupSetKey
	g     *cgroup.Group
	id    string // g's tree ID
	done  bool   // startDone was called
}

// take returns the ID and the ready set for a tree of owner with limits l
// about to start: a ready set's ID when one was made for the same owner
// and limits (waiting for the one being made rather than making another),
// else a new ID and a claim without a set. It returns a nil claim for a
// tree that gets no cgroups.
func (s *cgroupSetPool) take(owner string, cfg *config, l Limits) (string, *cgroupSetClaim) {
	if !wantsCgroup(cfg, l) {
		return uuid.NewString(), nil
	}
	sc := &cgroupSetClaim{store: s, cfg: cfg, key: cgroupSetKey{owner: owner, limits: l}}
	s.mu.Lock()
	defer func() {
		s.starting++
		s.mu.Unlock()
	}()
	for s.key == sc.key {
		if len(s.sets) > 0 {
			set := s.sets[0]
			s.sets = s.sets[1:]
			sc.g, sc.id = set.g, set.id
			return set.id, sc
		}
		if !s.making {
			break
		}
		ready := s.ready
		s.mu.Unlock()
		<-ready
		s.mu.Lock()
	}
	return uuid.NewString(), sc
}

// setGuard is New's hook: the host guard that lists the ready sets.
func (s *cgroupSetPool) setGuard(g *hostGuard) { s.guard = g }

// discard removes the set a claim holds that no containment took (a Start
// that failed before), and ends the claim's start.
func (sc *cgroupSetClaim) discard() {
	if sc == nil {
		return
	}
	if sc.g != nil {
		_ = sc.g.Remove()
		sc.store.guard.remove(sc.id)
		sc.g = nil
	}
	sc.startDone()
}

// startDone tells the store that the claim's start is over (started or
// failed), so that the maker may go on. Later calls do nothing.
func (sc *cgroupSetClaim) startDone() {
	if sc == nil || sc.done {
		return
	}
	sc.done = true
	s := sc.store
	s.mu.Lock()
	s.starting--
	if s.starting == 0 && s.startIdle != nil {
		s.startIdle.Broadcast()
	}
	s.mu.Unlock()
}

// refill makes ready sets for the claim's owner and limits in the
// background, up to cgroupSetDepth, replacing those made for others.
func (sc *cgroupSetClaim) refill() {
	s := sc.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	var old []readyCgroupSet
	if s.key != sc.key {
		old, s.sets, s.key = s.sets, nil, sc.key
	}
	if s.making || len(s.sets) >= cgroupSetDepth {
		if len(old) > 0 {
			s.wg.Go(func() { s.removeSets(old) })
		}
		// A maker for the old key sees the new one and stops; the next
		// refill then starts one for it.
		return
	}
	s.making, s.ready = true, make(chan struct{})
	s.wg.Go(func() { s.make(sc.cfg, sc.key, old) })
}

// make is refill's goroutine: it removes old, then makes sets for key until
// there are cgroupSetDepth or the key changed or the store closed.
func (s *cgroupSetPool) make(cfg *config, key cgroupSetKey, old []readyCgroupSet) {
	s.removeSets(old)
	for {
		s.mu.Lock()
		if s.startIdle == nil {
			s.startIdle = sync.NewCond(&s.mu)
		}
		for s.starting > 0 && !s.closed {
			s.startIdle.Wait()
		}
		if s.closed || s.key != key || len(s.sets) >= cgroupSetDepth {
			s.making = false
			close(s.ready)
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		id := uuid.NewString()
		// Listed before it is made (and so before any Start can take
		// it, whose own listing then replaces this one).
		g, err := cgroup.New(cgroupSpec(id, cfg, key.limits, s.guard))
		if err != nil {
			s.guard.remove(id)
		}
		s.mu.Lock()
		if err != nil || s.closed || s.key != key {
			s.making = false
			close(s.ready)
			s.mu.Unlock()
			if g != nil {
				s.removeSets([]readyCgroupSet{{id: id, g: g}})
			}
			return
		}
		s.sets = append(s.sets, readyCgroupSet{id: id, g: g})
		close(s.ready)
		s.ready = make(chan struct{})
		s.mu.Unlock()
	}
}

// close removes the ready sets, once the maker is done; no more are made.
func (s *cgroupSetPool) close() {
	s.mu.Lock()
	s.closed = true
	if s.startIdle != nil {
		s.startIdle.Broadcast()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.mu.Lock()
	sets := s.sets
	s.sets = nil
	s.mu.Unlock()
	s.removeSets(sets)
}

// removeSets removes sets no tree took, and unlists them with the guard.
func (s *cgroupSetPool) removeSets(sets []readyCgroupSet) {
	for _, set := range sets {
		_ = set.g.Remove()
		s.guard.remove(set.id)
	}
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
// which the leader or an early child runs outside it. With ownNS the
// leader is also born in a cgroup namespace of its own, which the kernel
// roots at that cgroup, not at the forking thread's (cgroup_post_fork
// makes the child's css_set the new namespace's root): the tree's
// /proc/self/cgroup then reads "0::/", and where cgroup2 is mounted with
// nsdelegate the tree can move nothing out of its cgroup
// (sandboxBuilt.ownCgroupNS).
func startInCgroup(attr *syscall.SysProcAttr, fd int, ownNS bool) error {
	attr.UseCgroupFD = true
	attr.CgroupFD = fd
	if ownNS {
		attr.Cloneflags |= unix.CLONE_NEWCGROUP
	}
	return nil
}

// cgroupEscapeWarning is the warning of a sandboxed tree started in its
// cgroup v2 that may start a child in another cgroup with
// clone3(CLONE_INTO_CGROUP) ("" where it may not): ownNS says whether it
// has a cgroup namespace of its own (sandboxBuilt.ownCgroupNS), which is
// made only where cgroup2 has nsdelegate
// (TestAttackCgroupEscapeByClone3Warns).
func cgroupEscapeWarning(ownNS bool) string {
	const what = "sandbox: not enforced: the tree's cgroup: clone3(CLONE_INTO_CGROUP) can start a child in any cgroup the tree's user may write, out of its limits and of Stop: "
	switch {
	case ownNS:
		return ""
	case !cgroup.NSDelegate():
		return what + "cgroup2 is mounted without nsdelegate, so a cgroup namespace would be no boundary (remount it with nsdelegate, as systemd does)"
	}
	return what + "without root the tree gets no cgroup namespace"
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
		defer c.claim.startDone()
		return c.cg.Started()
	}
	return nil
}

// inMountns records ns, if not zero, as the tree's own mount namespace,
// just after the start: a namespace no other process shares and the tree
// cannot leave (as root the sandbox refuses every new namespace to such a
// tree, and its capabilities are gone: sandboxBuilt.forkFilter), so every
// process in it is the tree's, whatever it did to its environment, title
// or session. The Start's hold keeps the namespace, and so its inode,
// until after the last sweep.
func (c *containment) inMountns(ns treeNamespace) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.mountns = ns
	c.mu.Unlock()
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
	_, _ = c.signalLocked(s, cands, unix.SIGTERM)
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
	// What terminate pinned is killed through its pidfd with no new
	// check; what it signalled without one, the scan below finds again if
	// it still carries the marker.
	if !c.released {
		c.targets.KillPinned()
	}
	c.mu.Unlock()
	// Rounds until one finds nothing new (sweepRounds): a process may fork
	// between a scan and its kill, and a fork hopper is under another PID
	// by the time a round signals it (TestAttackForkHopperOutlivesClose).
	sweepRounds(func() (int, int) {
		cands := c.candidates(s, time.Now())
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.signalLocked(s, cands, unix.SIGKILL)
	})
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
	leader, quiet := c.leader, len(c.found) == 0
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
// every other sweep at about the same moment, plus a probe of the PIDs
// handed out since that snapshot listed /proc (tail). No lock is held.
func (c *containment) candidates(s *procScanner, since time.Time) []int {
	var cands []int
	if c.cg != nil {
		cands = c.cg.Members()
	}
	c.mu.Lock()
	leader, ns := c.leader, c.mountns
	c.mu.Unlock()
	if pids, ok := s.candidatePIDs(leader, c.startedAt); ok {
		return append(cands, s.probeMarked(pids, c.entry, ns)...)
	}
	if ns == (treeNamespace{}) {
		snap := takeSnapshot(markerPass, since)
		return append(append(cands, snap.markedBy(c.id)...), c.tail(s, snap, ns)...)
	}
	// A pass reads the namespaces only while a sweep asks for them
	// (mountnsSweeps); one begun before this sweep asked may not have.
	mountnsSweeps.Add(1)
	defer mountnsSweeps.Add(-1)
	snap := takeSnapshot(markerPass, since)
	if snap.mountns == nil && snap.err == nil {
		snap = takeSnapshot(markerPass, time.Now())
	}
	cands = append(append(cands, snap.markedBy(c.id)...), snap.inMountns(ns)...)
	return append(cands, c.tail(s, snap, ns)...)
}

// tail probes the PIDs handed out since snap listed /proc (probeSince),
// which snap cannot hold: a pass takes milliseconds on a busy host, and a
// fork hopper is only ever under a PID newer than the listing by the time
// the pass would read it (TestAttackForkHopperOutlivesClose). The probe
// looks at those few PIDs just before the signal.
func (c *containment) tail(s *procScanner, snap *procSnapshot, ns treeNamespace) []int {
	var found []int
	probeSince(s, snap.mark, func(pids []int) {
		found = append(found, s.probeMarked(pids, c.entry, ns)...)
	})
	return found
}

// signalLocked sends sig to each candidate that is verified, right now, to
// be a process of the tree outside the group, and returns how many it
// signalled that had not been sent sig before (n), and how many candidates
// it had never found before and did not signal (missed: gone by the time
// of the signal, or not the tree's after all). A SIGTERM is followed by a
// SIGCONT, so that a stopped process acts on it.
//
// PID reuse: internal/pidfd's protocol (pin, check again, signal through
// the pin), the check being verify.
func (c *containment) signalLocked(s *procScanner, cands []int, sig unix.Signal) (n, missed int) {
	if c.released {
		return 0, 0
	}
	seen := make(map[int]bool, len(cands))
	for _, pid := range cands {
		if seen[pid] || pid == c.leader {
			continue
		}
		seen[pid] = true
		if pg, ok := s.PGrp(pid); !ok || pg == c.leader {
			if !ok && !c.found[pid] {
				missed++
			}
			continue // gone, or in the group the caller signals
		}
		switch c.targets.Signal(pid, sig, func() bool { return c.verify(s, pid) }) {
		case pidfd.Sent:
			n++
		case pidfd.SentAgain: // killed before without a pidfd, not gone yet
		case pidfd.Skipped:
			if !c.found[pid] {
				missed++
			}
			continue
		default:
			continue // pinned before and dealt with
		}
		c.found[pid] = true
		if sig == unix.SIGTERM {
			c.targets.Continue(pid)
		}
	}
	return n, missed
}

// verify reports whether pid belongs to the tree: it carries the marker
// and runs as our user, or it sits in the tree's own mount namespace or
// cgroup. The caller holds c.mu.
func (c *containment) verify(s *procScanner, pid int) bool {
	return s.marked(pid, c.entry) || s.inMountns(pid, c.mountns) || (c.cg != nil && s.inCgroup(pid, c.cg.Leaf()))
}

// waitGone waits up to timeout until every killed target has exited and
// the cgroup, if any, is empty. pidfds poll readable at exit, so this
// blocks in poll rather than on a timer; targets killed without a pidfd are
// looked up in /proc again every goneWithoutPidfdPoll. The pidfds stay open
// until release, which waits for this (Close waits for every stop).
func (c *containment) waitGone(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	c.mu.Lock()
	fds, bare := c.targets.Killed(true)
	c.mu.Unlock()
	if !pidfd.Wait(fds, deadline) {
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
// or in the tree's mount namespace (a zombie's environment reads empty,
// and its namespaces are gone).
func (c *containment) waitGoneBare(pids []int, deadline time.Time) {
	s, err := newProcScanner()
	if err != nil {
		return
	}
	defer s.Close()
	c.mu.Lock()
	ns := c.mountns
	c.mu.Unlock()
	tick := time.NewTicker(goneWithoutPidfdPoll)
	defer tick.Stop()
	for {
		left := pids[:0]
		for _, pid := range pids {
			if s.marked(pid, c.entry) || s.inMountns(pid, ns) {
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
// it knows them, else the leader's, and whether the peak is the cgroup's
// (else the caller asks sysProc.treePeak, which reads the exit records
// only then). The cgroup's numbers include every descendant, waited for
// or not.
func (c *containment) usage(cpu time.Duration, rss int64) (time.Duration, int64, bool) {
	if c.cg == nil {
		return cpu, rss, false
	}
	u := c.cg.Usage()
	if u.CPUOK {
		cpu = u.CPU
	}
	if u.PeakOK {
		return cpu, u.Peak, true
	}
	return cpu, rss, false
}

// release closes the pidfds. Later calls of the other methods do nothing.
// The cgroups stay until removeCgroups: the tree is gone (killEscaped has
// emptied them), and their removal need not delay the exit.
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
	c.targets.Close()
	c.mu.Unlock()
	c.claim.startDone() // a start that failed
	return nil
}

// removeCgroups removes the tree's cgroups and closes their descriptors,
// then has the next set made ahead. It runs once the exit is published,
// so that Wait does not wait for the rmdirs (a few hundred microseconds
// on v1, the costliest calls left on a limited Start+Wait's path:
// docs/measurements.md); Close waits for it, so no cgroup of an exited
// tree outlives Close. The host guard lists the cgroups, without the
// leader (recordExit), until they are gone, so that a host that dies
// meanwhile leaves none behind; the listing here covers a start that
// failed before its record listed the tree. It reports whether the tree
// had cgroups and they are gone: then no process of the tree is left,
// whatever it did to its environment or session (a cgroup with a member
// cannot be removed, and a tree cannot leave its cgroup).
func (c *containment) removeCgroups() (emptied bool) {
	if c.cg == nil {
		return false
	}
	if removeCgroupsHook != nil {
		removeCgroupsHook(c.cg.Dirs())
	}
	var guard *hostGuard
	if c.claim != nil {
		guard = c.claim.store.guard
	}
	guard.add(c.id, hostIdentity{}, c.cg.Path())
	err := c.cg.Remove()
	if err != nil {
		// Still there (a member that would not die): left listed, so that
		// the guard removes it if the host dies, as for a live tree.
		c.logger.Warn(context.Background(), "remove cgroup", fieldError(err))
		return false
	}
	guard.remove(c.id)
	if c.claim != nil {
		c.claim.refill()
	}
	return true
}

// removeCgroupsHook, when set by a test, runs in removeCgroups before the
// removal, with the directories to remove, to hold it.
var removeCgroupsHook func(dirs []string)
