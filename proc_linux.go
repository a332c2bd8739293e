package agentproc

import (
	"bytes"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// This file is the one reader of /proc's per-process files: group counting
// (sysProc), the marker sweep (containment), orphan stopping and process
// identities (the state dir), Process.Ports, Info.AwaitingInput and the
// tests all go through it. The system-wide files a feature reads for
// itself (/proc/net's socket tables in ports_linux.go, /proc/vmstat and
// oom_score_adj in guard_linux.go, mountinfo in cgroup_linux.go, boot_id in
// statedir_linux.go) are read where they are used.
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
// namespace than ours: a process started with unshare --pid --fork and no
// remount of /proc sees the parent namespace's processes under numbers that
// mean something else here. /proc/self then names our PID in that other
// namespace, not os.Getpid().
func foreignProc() bool {
	self, err := os.Readlink("/proc/self")
	if err != nil {
		// No /proc at all: nothing would be read from it anyway, and the
		// readers fail closed (ok false).
		return false
	}
	return self != strconv.Itoa(os.Getpid())
}

// procScanner reads /proc. Single files are opened relative to procRoot,
// one descriptor of /proc shared by the package; a listing of /proc takes a
// descriptor of its own (the listing moves its offset). Its buffer is
// reused for every file it reads, so a pass over thousands of processes
// allocates little. A scanner is used by one goroutine at a time.
//
// Reading /proc/PID/environ needs the same permission as ptrace-reading the
// process, so an unprivileged caller only ever sees its own processes.
type procScanner struct {
	proc  int    // procRoot: for openat of single files, never closed here
	list  int    // own descriptor of /proc for pids, opened on first use; -1 before
	buf   []byte // file contents, grown on demand
	dents []byte // getdents buffer
	names []string
	self  int
	euid  uint32
}

// procRootFD is a descriptor of /proc opened once and kept for the life of
// the host process: the exit path of every command reads a file or two of
// /proc, and opening the directory each time would be a third of those
// calls.
// A failure is not kept, so a /proc mounted later is found.
var procRootFD struct {
	mu   sync.Mutex
	fd   int
	open bool // a host with its stdin closed can get fd 0
}

func procRoot() (int, error) {
	procRootFD.mu.Lock()
	defer procRootFD.mu.Unlock()
	if procRootFD.open {
		return procRootFD.fd, nil
	}
	fd, err := unix.Open("/proc", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, xerrors.Errorf("open /proc: %w", err)
	}
	procRootFD.fd, procRootFD.open = fd, true
	return fd, nil
}

func newProcScanner() (*procScanner, error) {
	fd, err := procRoot()
	if err != nil {
		return nil, err
	}
	// buf and dents are made on first use: the sweep after a short
	// command's exit usually probes a handful of PIDs and lists nothing.
	return &procScanner{
		proc: fd,
		list: -1,
		self: os.Getpid(),
		euid: uint32(os.Geteuid()),
	}, nil
}

// close closes the scanner's own listing descriptor, if it opened one.
func (s *procScanner) close() {
	if s.list >= 0 {
		_ = unix.Close(s.list)
		s.list = -1
	}
}

// sibling returns a scanner for a worker goroutine, with buffers of its
// own; it is closed like any other.
func (s *procScanner) sibling() *procScanner {
	return &procScanner{proc: s.proc, list: -1, self: s.self, euid: s.euid}
}

// pids lists the thread-group IDs in /proc (threads are not listed at the
// top level), without our own.
func (s *procScanner) pids() ([]int, error) {
	if s.list < 0 {
		fd, err := unix.Open("/proc", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, xerrors.Errorf("open /proc: %w", err)
		}
		s.list = fd
	} else if _, err := unix.Seek(s.list, 0, 0); err != nil {
		return nil, xerrors.Errorf("rewind /proc: %w", err)
	}
	s.names = s.names[:0]
	if s.dents == nil {
		s.dents = make([]byte, 32<<10)
	}
	for {
		n, err := unix.Getdents(s.list, s.dents)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, xerrors.Errorf("read /proc: %w", err)
		}
		if n <= 0 {
			break
		}
		_, _, s.names = unix.ParseDirent(s.dents[:n], -1, s.names)
	}
	pids := make([]int, 0, len(s.names))
	for _, name := range s.names {
		if name == "" || name[0] < '1' || name[0] > '9' {
			continue
		}
		pid, err := strconv.Atoi(name)
		if err != nil || pid == s.self {
			continue
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// read returns the contents of /proc/PID/name in the scanner's buffer (valid
// until the next read) and, if owner is set, the file's owner.
func (s *procScanner) read(pid int, name string, owner bool) ([]byte, uint32, error) {
	fd, err := unix.Openat(s.proc, strconv.Itoa(pid)+"/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, err
	}
	defer unix.Close(fd)
	if len(s.buf) == 0 {
		s.buf = make([]byte, 16<<10)
	}
	n := 0
	for {
		if n == len(s.buf) {
			s.buf = append(s.buf, make([]byte, len(s.buf))...)
		}
		m, err := unix.Read(fd, s.buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	if !owner {
		return s.buf[:n], 0, nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, 0, err
	}
	return s.buf[:n], st.Uid, nil
}

// marked reports whether pid is a process of our user whose environment
// holds entry. The environment read is the one the process was exec'd with:
// a process that later unsets the variable in its own memory still matches,
// one that exec'd with a cleared environment does not.
//
// The owner of /proc/PID/environ is the process's effective user (root for
// a non-dumpable process, which an unprivileged caller cannot read anyway).
func (s *procScanner) marked(pid int, entry []byte) bool {
	env, uid, err := s.read(pid, "environ", true)
	return err == nil && uid == s.euid && hasEnvEntry(env, entry)
}

// mayBeMarked is marked without the owner check, for scans: the owner is
// checked when a candidate is verified before any signal, and most
// processes never get that far.
func (s *procScanner) mayBeMarked(pid int, entry []byte) bool {
	env, _, err := s.read(pid, "environ", false)
	return err == nil && hasEnvEntry(env, entry)
}

// stat returns the state and process group of pid.
func (s *procScanner) stat(pid int) (state byte, pgrp int, ok bool) {
	data, _, err := s.read(pid, "stat", false)
	if err != nil {
		return 0, 0, false
	}
	return parseStat(data)
}

// pgrp returns the process group of pid.
func (s *procScanner) pgrp(pid int) (int, bool) {
	_, pgrp, ok := s.stat(pid)
	return pgrp, ok
}

// inCgroup reports whether pid's cgroup path in any hierarchy (v2, or a
// v1 one on hosts that still bind controllers there) ends in the directory
// named leaf ("agentproc-<id>"), read from /proc/PID/cgroup. The path there
// is relative to the reader's cgroup namespace, so only its last element is
// compared; the ID in it is unique.
func (s *procScanner) inCgroup(pid int, leaf string) bool {
	data, _, err := s.read(pid, "cgroup", false)
	if err != nil {
		return false
	}
	for line := range bytes.Lines(data) {
		// hierarchy-ID:controllers:path
		_, rest, _ := bytes.Cut(bytes.TrimRight(line, "\n"), []byte(":"))
		_, path, ok := bytes.Cut(rest, []byte(":"))
		if ok && bytes.HasSuffix(path, []byte("/"+leaf)) {
			return true
		}
	}
	return false
}

// statFields returns the fields of the contents of a /proc/PID/stat file
// from field 3 (state) on, with at least n of them and a one-letter state.
// The command name (field 2) may contain spaces and parentheses, so the
// fixed fields are read after its last ')'.
func statFields(data []byte, n int) ([][]byte, bool) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return nil, false
	}
	fields := bytes.Fields(data[i+1:])
	if len(fields) < n || len(fields[0]) != 1 {
		return nil, false
	}
	return fields, true
}

// parseStat returns the state and process group (field 5) of the contents
// of a /proc/PID/stat file.
func parseStat(data []byte) (state byte, pgrp int, ok bool) {
	fields, ok := statFields(data, 3)
	if !ok {
		return 0, 0, false
	}
	pgrp, err := strconv.Atoi(string(fields[2]))
	if err != nil {
		return 0, 0, false
	}
	return fields[0][0], pgrp, true
}

// fdLinks calls fn with the target of every /proc/PID/fd link of pid
// ("socket:[12345]", "/dev/null", ...), up to 64 bytes of it, which is
// enough for the kinds of file the callers look for. link is valid only
// during the call.
func (s *procScanner) fdLinks(pid int, fn func(link []byte)) {
	dir := strconv.Itoa(pid) + "/fd"
	fd, err := unix.Openat(s.proc, dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), dir)
	names, err := f.Readdirnames(-1)
	_ = f.Close()
	if err != nil {
		return
	}
	var link [64]byte
	for _, name := range names {
		n, err := unix.Readlinkat(s.proc, dir+"/"+name, link[:])
		if err != nil {
			continue
		}
		fn(link[:n])
	}
}

// parseStatStart returns field 22 (starttime, in clock ticks since boot)
// and the state of the contents of a /proc/PID/stat file.
func parseStatStart(data []byte) (start uint64, state byte, ok bool) {
	fields, ok := statFields(data, 20) // fields[19] is field 22
	if !ok {
		return 0, 0, false
	}
	start, err := strconv.ParseUint(string(fields[19]), 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return start, fields[0][0], true
}

// startTime returns the start time field of /proc/PID/stat, 0 if unknown.
func (s *procScanner) startTime(pid int) uint64 {
	data, _, err := s.read(pid, "stat", false)
	if err != nil {
		return 0
	}
	start, _, _ := parseStatStart(data)
	return start
}

// procStartTime returns the start time and state of pid from
// /proc/PID/stat, without a procScanner: it is read with bare system calls
// into a stack buffer, since os.ReadFile's stat and second read double the
// cost of a file that fits in one read.
func procStartTime(pid int) (start uint64, state byte, ok bool) {
	if pid <= 0 {
		return 0, 0, false
	}
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, 0, false
	}
	var buf [1024]byte
	n, err := unix.Read(fd, buf[:])
	_ = unix.Close(fd)
	if err != nil || n <= 0 {
		return 0, 0, false
	}
	return parseStatStart(buf[:n])
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
	last, ok := s.lastPID()
	if !ok || last < leader || last-leader > rangeProbeMax {
		return nil, false
	}
	pids := make([]int, 0, last-leader)
	for pid := leader + 1; pid <= last; pid++ {
		if pid != s.self {
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
	pidMax := 32768
	if data, err := os.ReadFile("/proc/sys/kernel/pid_max"); err == nil {
		if v, err := strconv.Atoi(string(bytes.TrimSpace(data))); err == nil {
			pidMax = v
		}
	}
	spare := pidMax - 300 - rangeProbeMax
	if spare <= 0 {
		return 0
	}
	return time.Duration(float64(spare) / float64(runtime.NumCPU()*maxForksPerCPU) * float64(time.Second))
})

// lastPID returns the last PID allocated in this PID namespace.
func (s *procScanner) lastPID() (int, bool) { return nsLastPID() }

// nsLastPID returns the last PID the kernel handed out in our PID namespace
// (/proc/sys/kernel/ns_last_pid, Linux 3.3+). It runs after every command's
// exit, so the file is opened once and read with pread, which makes the
// kernel format the value afresh, into a stack buffer: one system call.
func nsLastPID() (int, bool) {
	fd, ok := lastPIDFile()
	if !ok {
		return 0, false
	}
	var buf [24]byte
	n, err := unix.Pread(fd, buf[:], 0)
	if err != nil || n <= 0 {
		return 0, false
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(buf[:n])))
	return pid, err == nil
}

// lastPIDFD is ns_last_pid opened once, for the life of the host process. A
// failure is not kept, as for procRootFD.
var lastPIDFD struct {
	mu   sync.Mutex
	fd   int
	open bool
}

func lastPIDFile() (int, bool) {
	lastPIDFD.mu.Lock()
	defer lastPIDFD.mu.Unlock()
	if lastPIDFD.open {
		return lastPIDFD.fd, true
	}
	root, err := procRoot()
	if err != nil {
		return 0, false
	}
	fd, err := unix.Openat(root, "sys/kernel/ns_last_pid", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, false
	}
	lastPIDFD.fd, lastPIDFD.open = fd, true
	return fd, true
}

// probeMarked returns the PIDs of pids that mayBeMarked accepts, skipping
// the supervised leaders (see leaders).
func (s *procScanner) probeMarked(pids []int, entry []byte) []int {
	var found []int
	leaders.mu.Lock()
	if len(leaders.pids) > 0 {
		pids = slices.DeleteFunc(slices.Clone(pids), func(pid int) bool { return leaders.pids[pid] })
	}
	leaders.mu.Unlock()
	for _, pid := range pids {
		if s.mayBeMarked(pid, entry) {
			found = append(found, pid)
		}
	}
	return found
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
	// the processes whose environment carries it.
	marked map[string][]int
	// groups counts the live (non-zombie) processes of each process group.
	groups  map[int]int
	scanned int
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
	defer s.close()
	pids, err := s.pids()
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
	workers := min(runtime.GOMAXPROCS(0), 4, len(pids)/snapshotWorkersMin+1)
	parts := make([]procSnapshot, workers)
	scanPart := func(w int, sc *procScanner, pids []int) {
		p := procSnapshot{marked: make(map[string][]int), groups: make(map[int]int)}
		for _, pid := range pids {
			if kind == groupPass {
				if state, pgrp, ok := sc.stat(pid); ok && state != 'Z' {
					p.groups[pgrp]++
				}
				continue
			}
			// A zombie's environment reads empty, so it is never listed.
			env, _, err := sc.read(pid, "environ", false)
			if err != nil {
				continue
			}
			eachMarker(env, func(id []byte) { p.marked[string(id)] = append(p.marked[string(id)], pid) })
		}
		parts[w] = p
	}
	if workers <= 1 {
		scanPart(0, s, pids)
	} else {
		chunk := (len(pids) + workers - 1) / workers
		var wg sync.WaitGroup
		for w := range workers {
			sub := pids[min(w*chunk, len(pids)):min((w+1)*chunk, len(pids))]
			sc := s
			if w > 0 {
				sc = s.sibling()
			}
			wg.Go(func() { scanPart(w, sc, sub) })
		}
		wg.Wait()
	}
	for _, p := range parts {
		for id, l := range p.marked {
			snap.marked[id] = append(snap.marked[id], l...)
		}
		for g, n := range p.groups {
			snap.groups[g] += n
		}
	}
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

// envValue returns the value of the variable whose "NAME=" is prefix in a
// NUL-separated environment block.
func envValue(env, prefix []byte) ([]byte, bool) {
	for len(env) > 0 {
		entry := env
		if i := bytes.IndexByte(env, 0); i >= 0 {
			entry, env = env[:i], env[i+1:]
		} else {
			env = nil
		}
		if bytes.HasPrefix(entry, prefix) {
			return entry[len(prefix):], true
		}
	}
	return nil, false
}

// hasEnvEntry reports whether env, a block of NUL-terminated NAME=value
// strings, holds entry as one whole string. A longer name that merely starts
// with the same bytes (AGENTPROC_ID_X=...) or a value with a common prefix
// does not match.
func hasEnvEntry(env, entry []byte) bool {
	for off := 0; off < len(env); {
		i := bytes.Index(env[off:], entry)
		if i < 0 {
			return false
		}
		i += off
		end := i + len(entry)
		if (i == 0 || env[i-1] == 0) && (end == len(env) || env[end] == 0) {
			return true
		}
		off = i + 1
	}
	return false
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

// procState returns the state letter of pid ('R', 'S', 'T', 'Z', ...),
// and ok false when the process is gone or /proc cannot be read.
func procState(pid int) (state byte, ok bool) {
	s, err := newProcScanner()
	if err != nil {
		return 0, false
	}
	defer s.close()
	state, _, ok = s.stat(pid)
	return state, ok
}

// procsMarked returns the live processes carrying MarkerEnv=id, with their
// command names, from a fresh pass that skips nothing.
func procsMarked(id string) map[int]string {
	s, err := newProcScanner()
	if err != nil {
		return nil
	}
	defer s.close()
	pids, err := s.pids()
	if err != nil {
		return nil
	}
	entry := []byte(MarkerEnv + "=" + id)
	out := make(map[int]string)
	for _, pid := range pids {
		if state, _, ok := s.stat(pid); !ok || state == 'Z' || !s.mayBeMarked(pid, entry) {
			continue
		}
		if comm, _, err := s.read(pid, "comm", false); err == nil {
			out[pid] = string(bytes.TrimSpace(comm))
		}
	}
	return out
}

// procChildren lists the children of every thread of pid
// (/proc/PID/task/TID/children, Linux 3.5+ with CONFIG_PROC_CHILDREN).
func procChildren(pid int) []int {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var kids []int
	for _, t := range tasks {
		data, err := os.ReadFile(dir + "/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range bytes.Fields(data) {
			if k, err := strconv.Atoi(string(f)); err == nil {
				kids = append(kids, k)
			}
		}
	}
	return kids
}

// descendants returns leader and every process below it, at most 4096.
func descendants(leader int) []int {
	out := []int{leader}
	for i := 0; i < len(out) && i < 4096; i++ {
		out = append(out, procChildren(out[i])...)
	}
	return out
}

// tasks calls fn with each thread of pid, until fn returns true, and
// reports whether it did. The thread's files are opened relative to one
// descriptor of /proc/PID/task and read into reused buffers: the input
// watcher reads two or three files of every thread of every quiet process
// every few seconds, and paths from the root of /proc, each file's stat
// and a fresh buffer each were most of its cost.
func (s *procScanner) tasks(pid int, fn func(t procTask) bool) bool {
	dir, err := unix.Openat(s.proc, strconv.Itoa(pid)+"/task", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(dir)
	if s.dents == nil {
		s.dents = make([]byte, 32<<10)
	}
	s.names = s.names[:0]
	for {
		n, err := unix.Getdents(dir, s.dents)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false
		}
		if n <= 0 {
			break
		}
		_, _, s.names = unix.ParseDirent(s.dents[:n], -1, s.names)
	}
	for _, tid := range s.names {
		if tid == "" || tid[0] < '1' || tid[0] > '9' {
			continue
		}
		if fn(procTask{s: s, dir: dir, tid: tid}) {
			return true
		}
	}
	return false
}

// procTask is one thread during procScanner.tasks, valid only in the call.
type procTask struct {
	s   *procScanner
	dir int // /proc/PID/task
	tid string
}

// read returns the contents of the thread's file name (a path under
// /proc/PID/task/TID) in the scanner's buffer, valid until the next read.
func (t procTask) read(name string) ([]byte, error) {
	return readProcAt(t.dir, t.tid+"/"+name, &t.s.buf, 1<<20)
}

// readInto is read into buf instead, at most limit bytes.
func (t procTask) readInto(name string, buf *[]byte, limit int) ([]byte, error) {
	return readProcAt(t.dir, t.tid+"/"+name, buf, limit)
}

// readProcAt reads the /proc file name relative to dir into *buf, growing
// it up to limit bytes, and returns the contents (truncated at limit).
func readProcAt(dir int, name string, buf *[]byte, limit int) ([]byte, error) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	if len(*buf) == 0 {
		*buf = make([]byte, min(4<<10, limit))
	}
	n := 0
	for n < limit {
		if n == len(*buf) {
			*buf = append(*buf, make([]byte, min(len(*buf), limit-n))...)
		}
		m, err := unix.Read(fd, (*buf)[n:min(len(*buf), limit)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	return (*buf)[:n], nil
}

// procFDFile returns the device and inode of the file pid's descriptor fd
// is open on (a stat through /proc/PID/fd/FD); ok is false when that
// cannot be read.
func procFDFile(pid, fd int) (dev, ino uint64, ok bool) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/"+strconv.Itoa(pid)+"/fd/"+strconv.Itoa(fd), &st); err != nil {
		return 0, 0, false
	}
	return uint64(st.Dev), uint64(st.Ino), true
}
