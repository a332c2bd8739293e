package agentproc

import (
	"bytes"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc/internal/procfs"
)

// This file is what agentproc looks for in /proc: the marker protocol (which
// processes carry a tree's marker), a tree's cgroup membership, which
// processes make up a running tree (treeMembers), the probe of
// the PIDs handed out since a leader started, and snapshots shared by every
// caller that asks at about the same moment. How /proc is read (the
// scanner, stat, environ, fd links, socket tables, task files, ns_last_pid)
// is internal/procfs, the one place that names /proc.
//
// Two ways to look:
//   - a procScanner reads single processes (stat, environ, cgroup) and, for
//     a young process tree, probes the few PIDs handed out since its leader
//     started;
//   - a procSnapshot is one pass over every process on the host, shared by
//     every caller that asks at about the same moment (see takeSnapshot):
//     Close of a thousand processes reads /proc a handful of times, not a
//     thousand.
//
// Every read here is a syscall on a pseudo-file that can be slow on a busy
// host: none may run under Manager.mu or a Process lock.

// foreignProc reports whether the /proc mounted here belongs to another PID
// namespace than ours (procfs.Foreign): no PID read from it means anything
// here.
func foreignProc() bool { return procfs.Foreign() }

// procScanner is a procfs.Scanner with what agentproc looks for: the
// marker protocol and a tree's cgroup. A scanner is used by one goroutine at
// a time; call Close.
type procScanner struct {
	procfs.Scanner
}

func newProcScanner() (*procScanner, error) {
	sc, err := procfs.NewScanner()
	if err != nil {
		return nil, err
	}
	return &procScanner{sc}, nil
}

// marked reports whether pid is a process of our user whose environment
// holds entry. The environment read is the one the process was exec'd with:
// a process that later unsets the variable in its own memory still matches,
// one that exec'd with a cleared environment does not. A read that says
// nothing yet (readMarkerEnv) is made again until it does, for up to
// markerSettleWait.
//
// The owner of /proc/PID/environ is the process's effective user (root for
// a non-dumpable process, which an unprivileged caller cannot read anyway).
func (s *procScanner) marked(pid int, entry []byte) bool {
	return s.hasEntry(pid, entry, true)
}

// mayBeMarked is marked without the owner check, for scans: the owner is
// checked when a candidate is verified before any signal, and most
// processes never get that far.
func (s *procScanner) mayBeMarked(pid int, entry []byte) bool {
	return s.hasEntry(pid, entry, false)
}

func (s *procScanner) hasEntry(pid int, entry []byte, owner bool) bool {
	env, uid := s.settledEnv(pid, owner)
	return (!owner || uid == s.EUID()) && procfs.HasEnvEntry(env, entry)
}

// settledEnv returns pid's environment for a marker check (and its owner,
// if owner is set), read again while it says nothing yet (readMarkerEnv,
// settleEnvs); empty if it is not known by then or cannot be read. It is
// valid until the scanner's next read.
func (s *procScanner) settledEnv(pid int, owner bool) ([]byte, uint32) {
	env, uid, known := readMarkerEnv(&s.Scanner, pid, owner)
	if !known {
		// The read that settles is settleEnvs' last: env stays valid.
		settleEnvs(&s.Scanner, []int{pid}, owner, func(_ int, e []byte, u uint32) { env, uid = e, u })
	}
	return env, uid
}

// A marker read can catch a process at a moment when its environment says
// nothing: between exec's switch to the new program's memory and the setup
// of its stack (where the new environment is copied), /proc/PID/environ
// reads empty, as it does for a zombie, a kernel thread and a process
// exiting (newer kernels fail those with ESRCH instead). A sweep that took
// that for "no marker" would miss an escapee that was exec'ing at that
// moment (an escapee without a cgroup has nothing else to be found by). So
// readMarkerEnv tells such a read apart (stat's env_end is 0 while no
// environment is set up; a process exec'd with an empty environment has
// one, of no bytes), and the callers read each such PID again
// (settleEnvs), at once and then after pauses growing to
// markerSettlePoll until it says something, for up to markerSettleWait. A process that still says nothing
// then (stuck in exec or exit, in the D state on a hung file system) is
// taken as unmarked: no signal goes to a process without proof that it is
// the tree's (docs/containment.md).
const (
	markerSettleWait  = 200 * time.Millisecond
	markerSettleFirst = 20 * time.Microsecond
	markerSettlePoll  = time.Millisecond
)

// environEmptyHook, when a test sets it, is asked before each marker read
// of pid's environment; when it returns empty the read comes back empty,
// and with unset too the process's stat shows no environment set up: what
// a read during an exec sees (without unset, what a read just before the
// exec set the environment up sees, when stat is read just after).
var environEmptyHook atomic.Pointer[func(pid int) (empty, unset bool)]

// readMarkerEnv reads pid's environment (in sc's buffer) and, if owner is
// set, the file's owner, for a marker check. known is false when the read
// says nothing yet: it came back empty, or failed other than by the
// process being gone or not ours to read, while the process is neither a
// zombie nor a kernel thread and has no environment set up. An environment
// that is known but could not be read is returned empty.
func readMarkerEnv(sc *procfs.Scanner, pid int, owner bool) (env []byte, uid uint32, known bool) {
	env, uid, err, unset := readEnviron(sc, pid, owner)
	switch {
	case err == nil && len(env) > 0:
		return env, uid, true
	case err == unix.ESRCH || err == unix.EACCES:
		// A zombie leader's environ fails so (ESRCH; EACCES without
		// root: its files are root's) while its threads may run on
		// (threadEnviron). One stat leaves out single threads (kernel
		// threads, plain zombies), and kill(pid, 0) every other user's
		// process without root (EPERM): reading each one's stat instead
		// made a pass 3.5 times slower (BenchmarkProcSweep).
		if !sc.MultiThreaded(pid) || (err == unix.EACCES && unix.Kill(pid, 0) != nil) {
			return nil, 0, true
		}
		return threadEnviron(sc, pid, owner)
	case goneOrNotOurs(err):
		return nil, 0, true
	}
	stat, _, serr := sc.Read(pid, "stat", false)
	if serr != nil {
		return nil, 0, true // gone
	}
	state, kernel, envSet, ok := procfs.ParseStatEnv(stat)
	if !ok || state == 'Z' || state == 'X' || kernel {
		// Nothing to wait for: a process that cannot carry a marker, or a
		// kernel too old to tell.
		return nil, uid, true
	}
	if !envSet || unset {
		return nil, 0, false
	}
	// Set up now, but the empty read may have come just before: read
	// again, after stat showed it set up (177 of 2,000 children read as
	// exec.Cmd.Start returned were caught so, on a 2-core VM). Empty
	// again, it is an environment of no bytes.
	env, uid, err, unset = readEnviron(sc, pid, owner)
	switch {
	case err == nil && !unset:
		return env, uid, true
	case goneOrNotOurs(err):
		return nil, 0, true
	}
	return nil, 0, false
}

// threadEnviron reads the environment of pid, a zombie or gone, through
// another of its threads: a thread group whose main thread ended alone
// runs on behind a zombie leader, whose environ reads nothing while the
// marker is still in the group's memory (TestContainmentZombieLeaderKeepsMarker).
// Known (and empty) when there is no such thread.
func threadEnviron(sc *procfs.Scanner, pid int, owner bool) (env []byte, uid uint32, known bool) {
	tid, ok := sc.OtherThread(pid)
	if !ok {
		return nil, 0, true
	}
	env, uid, err, _ := readEnviron(sc, tid, owner)
	if err != nil {
		return nil, 0, true
	}
	return env, uid, true
}

// goneOrNotOurs reports whether err, from a read of a process's file, says
// the process is gone or not ours to read.
func goneOrNotOurs(err error) bool {
	return err == unix.ENOENT || err == unix.ESRCH || err == unix.EACCES || err == unix.EPERM
}

// readEnviron is one read of pid's environment, through environEmptyHook.
func readEnviron(sc *procfs.Scanner, pid int, owner bool) (env []byte, uid uint32, err error, unset bool) {
	env, uid, err = sc.Read(pid, "environ", owner)
	if h := environEmptyHook.Load(); h != nil {
		if empty, u := (*h)(pid); empty {
			return nil, uid, nil, u
		}
	}
	return env, uid, err, false
}

// settleEnvs reads the environments of pids, whose last reads said
// nothing yet (readMarkerEnv), again at once and then after pauses growing
// to markerSettlePoll until each says something or markerSettleWait has
// passed, and calls fn with each one that did (env valid only during the
// call). It returns the PIDs that never did.
func settleEnvs(sc *procfs.Scanner, pids []int, owner bool, fn func(pid int, env []byte, uid uint32)) (stuck []int) {
	if len(pids) == 0 {
		return nil
	}
	pids = slices.Clone(pids)
	deadline := time.Now().Add(markerSettleWait)
	// The first time at once: the rest of a pass has often given an exec
	// the time it needed. Then after a pause that doubles from
	// markerSettleFirst up to markerSettlePoll: an exec's window is
	// usually some microseconds, and a sweep that meets one (a Start's
	// shell, say) should not wait a whole poll for it.
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for pause := time.Duration(0); ; pause = min(max(2*pause, markerSettleFirst), markerSettlePoll) {
		if pause > 0 {
			if timer == nil {
				timer = time.NewTimer(pause)
			} else {
				timer.Reset(pause)
			}
			<-timer.C
		}
		left := pids[:0]
		for _, pid := range pids {
			if env, uid, known := readMarkerEnv(sc, pid, owner); known {
				fn(pid, env, uid)
			} else {
				left = append(left, pid)
			}
		}
		pids = left
		if len(pids) == 0 || time.Now().After(deadline) {
			return pids
		}
	}
}

// inCgroup reports whether pid's cgroup path in any hierarchy (v2, or a
// v1 one on hosts that still bind controllers there) ends in the directory
// named leaf ("agentproc-<id>"), read from /proc/PID/cgroup. The path there
// is relative to the reader's cgroup namespace, so only its last element is
// compared; the ID in it is unique.
func (s *procScanner) inCgroup(pid int, leaf string) bool {
	data, _, err := s.Read(pid, "cgroup", false)
	return err == nil && procfs.InCgroupLeaf(data, leaf)
}

// leaderRunning reports whether the leader of group pgid (whose PID is
// pgid), our child, has not exited yet. waitid with WNOWAIT looks without
// reaping, so os/exec's Wait still gets the status; no /proc read is
// needed for this common case of a running command.
func leaderRunning(pgid int) bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, pgid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	// Linux zeroes info when no child is waitable; an exited leader fills
	// in SIGCHLD. ECHILD: already reaped.
	return err == nil && info.Signo == 0
}

// rangeProbeMax is the widest PID range candidatePIDs probes one by one
// instead of taking a snapshot of all of /proc. Probing costs one failed
// or successful open per PID; a snapshot costs a read per process on the
// host but is shared by every stop at about the same moment, so the probe
// is kept for the short commands it was made for.
const rangeProbeMax = 256

// candidatePIDs returns the PIDs that can belong to descendants of leader,
// started at startedAt, when that range is narrow enough to probe, and
// ok false when a snapshot must be used instead. Linux hands out PIDs in
// increasing order, wrapping at pid_max, so as long as fewer PIDs were
// handed out since the leader started than fit between it and pid_max,
// every descendant got a PID after the leader's and at most the
// namespace's last one (/proc/sys/kernel/ns_last_pid). When the leader is
// younger than wrapWindow that holds, and when the range is also narrow
// (the common case of a short command) probing it is far cheaper than
// reading all of /proc: it keeps the sweep after every shell exit out of
// Start+Wait's cost.
func (s *procScanner) candidatePIDs(leader int, startedAt time.Time) ([]int, bool) {
	if leader <= 0 || startedAt.IsZero() || time.Since(startedAt) >= wrapWindow() {
		return nil, false
	}
	last, ok := procfs.LastPID()
	if !ok || last < leader || last-leader > rangeProbeMax {
		return nil, false
	}
	pids := make([]int, 0, last-leader)
	for pid := leader + 1; pid <= last; pid++ {
		if pid != s.Self() {
			pids = append(pids, pid)
		}
	}
	return pids, true
}

// maxForksPerCPU bounds how many processes or threads one CPU can create in
// a second. Real fork-and-exit loops reach a few tens of thousands; the
// bound is generous on purpose, since it only decides how long the cheap
// path of candidatePIDs may be taken.
const maxForksPerCPU = 100_000

// wrapWindow is how long after a leader's start its PID range cannot have
// wrapped: pid_max minus the reserved PIDs and the probe range, at
// maxForksPerCPU on every CPU. With pid_max 32768 on 2 CPUs it is about a
// sixth of a second; kernels scale pid_max with the CPU count, so it stays
// in the tens of milliseconds or more on large machines. It is real
// (monotonic) time on purpose: it bounds what the kernel can do, not what a
// caller's clock says.
var wrapWindow = sync.OnceValue(func() time.Duration {
	spare := pidMax() - 300 - rangeProbeMax
	if spare <= 0 {
		return 0
	}
	return time.Duration(float64(spare) / float64(runtime.NumCPU()*maxForksPerCPU) * float64(time.Second))
})

// pidMax is the kernel's pid_max, read once: PIDs are below it.
var pidMax = sync.OnceValue(func() int {
	if v, ok := procfs.SysInt("kernel/pid_max"); ok && v > 0 {
		return v
	}
	return 32768
})

// inMountns reports whether pid, not this process, is in the mount
// namespace ns; false for the zero ns.
func (s *procScanner) inMountns(pid int, ns treeNamespace) bool {
	if ns == (treeNamespace{}) || pid == s.Self() {
		return false
	}
	ino, ok := s.MountNS(pid)
	return ok && ino == ns.ino
}

// mountnsSweeps counts the sweeps, in every Manager, of trees with a mount
// namespace of their own (containment.inMountns) that are waiting for a
// marker pass: a pass begun while there is one reads each process's
// namespace too, one readlink more per process (BenchmarkProcSweep's
// scanner+mountns), which other sweeps need not pay.
var mountnsSweeps atomic.Int64

// probeMarked returns the PIDs of pids that mayBeMarked accepts, or that
// are in the mount namespace ns (unless ns is zero), skipping
// the supervised leaders (see leaders), the PIDs no process or thread holds
// any more, and this process's own threads.
//
// Most of a range are freed PIDs when Starts overlap: the shells and
// threads of other trees, gone by the time of the sweep. kill with signal
// 0 tells, without a path lookup, that a PID is free; a failed open of
// /proc/PID/environ allocates and frees a dentry on the way (in bursts of
// sandboxed Starts most opens failed; docs/measurements.md). A PID the
// kernel has handed out but not yet attached to its process reads free
// either way.
//
// A sandboxed Start or a cgroup v1 placement leaves a thread ID of this
// process in the range (the ready thread made after it, the runtime's
// replacements for discarded threads). This process carries no marker, and
// reading its environment takes its mmap lock, on the path of Wait: tgkill
// with signal 0 names its threads instead (docs/measurements.md).
func (s *procScanner) probeMarked(pids []int, entry []byte, ns treeNamespace) []int {
	var found []int
	leaders.mu.Lock()
	if len(leaders.pids) > 0 {
		pids = slices.DeleteFunc(slices.Clone(pids), func(pid int) bool { return leaders.pids[pid] })
	}
	leaders.mu.Unlock()
	self := s.Self()
	var unknown []int
	for _, pid := range pids {
		if freePIDOrOurs(self, pid) {
			continue
		}
		if s.inMountns(pid, ns) {
			found = append(found, pid)
			continue
		}
		env, _, known := readMarkerEnv(&s.Scanner, pid, false)
		if !known {
			unknown = append(unknown, pid) // read again below, all at once
		} else if procfs.HasEnvEntry(env, entry) {
			found = append(found, pid)
		}
	}
	settleEnvs(&s.Scanner, unknown, false, func(pid int, env []byte, _ uint32) {
		if procfs.HasEnvEntry(env, entry) {
			found = append(found, pid)
		}
	})
	return found
}

// treeMember is a process found to belong to trees[tree].
type treeMember struct {
	pid, tree int
}

// treeMembers returns the processes of each tree: the leader and its
// descendants (from /proc/PID/task/TID/children, which costs in proportion
// to the tree), every process whose environment carries the tree's marker,
// and the members of its cgroup. A process belongs to the first tree that
// claims it. It is the one answer to "which processes are this tree's" for
// a caller that looks at trees as they run (Process.Ports); the kill
// sweep, which must see every process that existed at a moment, asks the
// shared snapshot (markedBy) and checks each PID again (containment.verify).
//
// Finding marked processes means looking at every process of the system,
// but the environment a process was exec'd with never changes: with a
// cache, each process's environment is read once, and only a marked
// process's start time is read again (to tell it from a later process
// that got the same PID).
func treeMembers(s *procScanner, cache *portCache, trees []portTree) ([]treeMember, error) {
	if cache == nil {
		cache = &portCache{}
	}
	if cache.marker == nil {
		cache.marker = make(map[int]markerEntry)
	}
	byID := make(map[string]int, len(trees))
	for i, t := range trees {
		byID[t.id] = i
	}
	seen := make(map[int]bool)
	var members []treeMember
	add := func(pid, tree int) {
		if !seen[pid] {
			seen[pid] = true
			members = append(members, treeMember{pid, tree})
		}
	}
	for i, t := range trees {
		for _, pid := range procfs.Descendants(t.leader) {
			add(pid, i)
		}
	}

	pids, err := s.PIDs()
	if err != nil {
		return nil, err
	}
	alive := make(map[int]bool, len(pids))
	for _, pid := range pids {
		alive[pid] = true
		if seen[pid] {
			continue
		}
		ent, ok := cache.marker[pid]
		if ok && ent.id != "" && s.StartTime(pid) != ent.start {
			ok = false // the PID was reused
		}
		if !ok {
			ent = markerEntry{}
			env, _, known := readMarkerEnv(&s.Scanner, pid, false)
			if id, found := markerID(env); found {
				// Copied before the next read reuses the buffer.
				ent.id = string(id)
				ent.start = s.StartTime(pid)
			}
			if known {
				// Not cached when the read said nothing yet (an exec
				// under way): the next scan reads it again.
				cache.marker[pid] = ent
			}
		}
		if i, ok := byID[ent.id]; ok && ent.id != "" {
			add(pid, i)
		}
	}
	for pid := range cache.marker {
		if !alive[pid] {
			delete(cache.marker, pid)
		}
	}

	for i, t := range trees {
		if t.cgroup == "" {
			continue
		}
		data, err := os.ReadFile(t.cgroup + "/cgroup.procs")
		if err != nil {
			continue // removed: the process has exited
		}
		for _, pid := range appendPIDs(nil, data) {
			add(pid, i)
		}
	}
	return members, nil
}

// portCache is what a port poller keeps between scans: the marker each
// process carries ("" for none), with the start time of marked ones.
type portCache struct {
	marker map[int]markerEntry
}

type markerEntry struct {
	start uint64 // /proc/PID/stat's starttime; 0 if unknown
	id    string
}

// procSnapshot is what one pass over /proc saw, read-only once taken:
// which processes carry a marker (a markerPass), or how many live
// processes each process group has (a groupPass). The two are separate
// passes because they read different files, and /proc/PID/stat, which the
// group count needs, costs more than the environment and is rarely needed:
// only for a group that outlived its leader.
type procSnapshot struct {
	began time.Time     // when the pass began; set under its queue's lock
	done  chan struct{} // closed once the fields below are set
	err   error
	// marked lists, by marker value (the process ID after "AGENTPROC_ID="),
	// the processes whose environment carries it, including those whose
	// first read said nothing yet and a later one did (settleEnvs).
	marked map[string][]int
	// mountns lists, by mount namespace, the processes in it but the
	// host's, in a marker pass begun while a sweep asked for them
	// (mountnsSweeps); nil otherwise.
	mountns map[treeNamespace][]int
	// unknown, in a worker's part of a pass only, lists the processes
	// whose environment said nothing yet, to be read again (settleEnvs).
	unknown []int
	// groups counts the live (non-zombie) processes of each process group.
	groups  map[int]int
	scanned int
	// mark is the last PID handed out just before a marker pass listed
	// /proc: a process made since is under a PID after it (newPIDs).
	mark pidMark
}

// countGroup counts the live (non-zombie) processes whose process group is
// pgid in a groupPass; ok is false when /proc could not be read. Zombies do
// not count: a killed member whose parent died waits for init to reap it,
// and it neither runs nor holds files.
func (snap *procSnapshot) countGroup(pgid int) (n int, ok bool) {
	if snap.err != nil {
		return 0, false
	}
	return snap.groups[pgid], true
}

// markedBy returns the processes carrying MarkerEnv=id in a markerPass
// (unverified: the caller checks each again before a signal).
func (snap *procSnapshot) markedBy(id string) []int { return snap.marked[id] }

// inMountns returns the processes in the mount namespace ns in a
// markerPass (unverified, like markedBy); none for the zero ns.
func (snap *procSnapshot) inMountns(ns treeNamespace) []int {
	if ns == (treeNamespace{}) {
		return nil
	}
	return snap.mountns[ns]
}

// passKind says what a pass over /proc reads.
type passKind int

const (
	markerPass passKind = iota // every environment
	groupPass                  // every stat
)

// snapshotQueue coalesces passes of one kind. A caller asks for a snapshot
// begun after a moment of its choosing (so it sees every process that
// existed then); every caller content with the pass that is running, or
// the last one taken, uses it, and all others that ask while a pass runs
// share the next one. Stopping N processes at once therefore costs a few
// passes over /proc, each O(N + processes on the host), instead of N.
type snapshotQueue struct {
	mu      sync.Mutex
	done    *procSnapshot // the latest pass taken; nil before the first
	current *procSnapshot // the pass being taken; nil when none runs
	pending *procSnapshot // to be taken next; nil if nobody asked
}

var snapshotQueues [2]snapshotQueue

// takeSnapshot returns a snapshot of the given kind begun after since
// (monotonic time): the last pass taken or the one running if either began
// late enough, else the next. Close passes the moment it began, so that
// one pass serves the terminate step of every process it stops; a single
// stop passes the moment it was called. The first caller that finds no
// pass running takes the passes itself (for itself and for whoever asks
// meanwhile) until nobody waits; the others block on it. No goroutine
// outlives the callers.
func takeSnapshot(kind passKind, since time.Time) *procSnapshot {
	q := &snapshotQueues[kind]
	q.mu.Lock()
	if d := q.done; d != nil && !d.began.Before(since) {
		q.mu.Unlock()
		return d
	}
	if c := q.current; c != nil && !c.began.Before(since) {
		q.mu.Unlock()
		<-c.done
		return c
	}
	snap := q.pending
	if snap == nil {
		snap = &procSnapshot{done: make(chan struct{})}
		q.pending = snap
	}
	if q.current != nil {
		q.mu.Unlock()
		<-snap.done
		return snap
	}
	for {
		next := q.pending
		q.pending = nil
		q.current = next
		if next == nil {
			q.mu.Unlock()
			return snap
		}
		next.began = time.Now()
		q.mu.Unlock()
		next.scan(kind)
		close(next.done)
		q.mu.Lock()
		q.done = next
	}
}

// snapshotWorkersMin is the number of processes per worker below which a
// pass runs on one goroutine: opening a file per process costs a few
// microseconds, so only large process tables gain from spreading it.
const snapshotWorkersMin = 256

var markerPrefix = []byte(MarkerEnv + "=")

// leaders holds the PIDs of the shells this package has started and not
// yet reaped, in every Manager. A marker pass does not read their
// environments: each is the leader of its own session and process group,
// which it cannot leave, so it is never a process that escaped a group.
// When Close stops a thousand processes that is most of what a pass would
// otherwise read, and the slowest part, since they are dying meanwhile.
//
// A PID is removed just after its process is reaped, before that tree's
// kill sweep; for another process to get the number in between, PIDs
// would have to wrap around within microseconds.
var leaders struct {
	mu   sync.Mutex
	pids map[int]bool
}

func addLeader(pid int) {
	leaders.mu.Lock()
	if leaders.pids == nil {
		leaders.pids = make(map[int]bool)
	}
	leaders.pids[pid] = true
	leaders.mu.Unlock()
}

func removeLeader(pid int) {
	leaders.mu.Lock()
	delete(leaders.pids, pid)
	leaders.mu.Unlock()
}

// scan fills snap from one pass over /proc, spread over up to four
// goroutines for large process tables.
func (snap *procSnapshot) scan(kind passKind) {
	snap.marked = make(map[string][]int)
	snap.groups = make(map[int]int)
	s, err := newProcScanner()
	if err != nil {
		snap.err = err
		return
	}
	defer s.Close()
	if kind == markerPass {
		snap.mark = markPIDs()
	}
	pids, err := s.PIDs()
	if err != nil {
		snap.err = err
		return
	}
	if kind == markerPass {
		leaders.mu.Lock()
		if len(leaders.pids) > 0 {
			pids = slices.DeleteFunc(pids, func(pid int) bool { return leaders.pids[pid] })
		}
		leaders.mu.Unlock()
	}
	snap.scanned = len(pids)
	// Read after began was set: a sweep that counted itself before then
	// and asks for a pass begun after that moment gets the namespaces.
	readNS := kind == markerPass && mountnsSweeps.Load() > 0
	var hostNS treeNamespace // not listed: most processes are in it, no tree's
	if readNS {
		snap.mountns = make(map[treeNamespace][]int)
		if ino, ok := s.MountNS(s.Self()); ok {
			hostNS = treeNamespace{ino: ino}
		}
	}
	workers := min(runtime.GOMAXPROCS(0), 4, len(pids)/snapshotWorkersMin+1)
	parts := make([]procSnapshot, workers)
	scanPart := func(w int, sc *procfs.Scanner, pids []int) {
		p := procSnapshot{marked: make(map[string][]int), groups: make(map[int]int)}
		if readNS {
			p.mountns = make(map[treeNamespace][]int)
		}
		for _, pid := range pids {
			if kind == groupPass {
				if state, pgrp, ok := sc.Stat(pid); ok && state != 'Z' {
					p.groups[pgrp]++
				}
				continue
			}
			if readNS {
				if ino, ok := sc.MountNS(pid); ok {
					if ns := (treeNamespace{ino: ino}); ns != hostNS {
						p.mountns[ns] = append(p.mountns[ns], pid)
					}
				}
			}
			// A zombie's environment reads empty, so it is never listed.
			env, _, known := readMarkerEnv(sc, pid, false)
			if !known {
				p.unknown = append(p.unknown, pid) // read again below, all at once
				continue
			}
			eachMarker(env, func(id []byte) { p.marked[string(id)] = append(p.marked[string(id)], pid) })
		}
		parts[w] = p
	}
	if workers <= 1 {
		scanPart(0, &s.Scanner, pids)
	} else {
		chunk := (len(pids) + workers - 1) / workers
		var wg sync.WaitGroup
		for w := range workers {
			sub := pids[min(w*chunk, len(pids)):min((w+1)*chunk, len(pids))]
			sc := &s.Scanner
			if w > 0 {
				sc = s.Sibling()
			}
			wg.Go(func() { scanPart(w, sc, sub) })
		}
		wg.Wait()
	}
	var unknown []int
	for _, p := range parts {
		for id, l := range p.marked {
			snap.marked[id] = append(snap.marked[id], l...)
		}
		for g, n := range p.groups {
			snap.groups[g] += n
		}
		for ns, l := range p.mountns {
			snap.mountns[ns] = append(snap.mountns[ns], l...)
		}
		unknown = append(unknown, p.unknown...)
	}
	// Read again before the pass is done, so that every sweep sharing it
	// sees what they carry; the wait is for the pass, not per sweep. What
	// never says anything is taken as unmarked.
	settleEnvs(&s.Scanner, unknown, false, func(pid int, env []byte, _ uint32) {
		eachMarker(env, func(id []byte) { snap.marked[string(id)] = append(snap.marked[string(id)], pid) })
	})
}

// eachMarker calls fn with the value of every MarkerEnv=value entry of env,
// a block of NUL-terminated NAME=value strings. A longer name that merely
// ends with the same bytes (X_AGENTPROC_ID=...) is not a marker.
func eachMarker(env []byte, fn func(id []byte)) {
	for off := 0; off < len(env); {
		i := bytes.Index(env[off:], markerPrefix)
		if i < 0 {
			return
		}
		i += off
		end := bytes.IndexByte(env[i:], 0)
		if end < 0 {
			end = len(env)
		} else {
			end += i
		}
		if i == 0 || env[i-1] == 0 {
			fn(env[i+len(markerPrefix) : end])
		}
		off = end + 1
	}
}

// markerID returns the value of the first marker in env, for a caller that
// files each process under one tree (the port scan, orphan recovery).
func markerID(env []byte) ([]byte, bool) { return procfs.EnvValue(env, markerPrefix) }

// appendPIDs appends the numbers in a whitespace-separated list of PIDs
// (a children or cgroup.procs file) to pids.
func appendPIDs(pids []int, data []byte) []int {
	for _, f := range bytes.Fields(data) {
		if pid, err := strconv.Atoi(string(f)); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// countGroup counts the live (non-zombie) members of process group pgid
// from a snapshot begun after the call; ok is false when /proc cannot be
// read.
func countGroup(pgid int) (n int, ok bool) {
	return takeSnapshot(groupPass, time.Now()).countGroup(pgid)
}

// groupLive reports whether group pgid has a member that is not a zombie:
// the leader, looked at alone, answers the common case of a running
// command; only once it has exited is the whole group counted.
func groupLive(pgid int) (live, ok bool) {
	if leaderRunning(pgid) {
		return true, true
	}
	n, ok := countGroup(pgid)
	return n > 0, ok
}
