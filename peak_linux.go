package agentproc

import (
	"bytes"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc/internal/procfs"
	"github.com/agentproc/agentproc/internal/taskstats"
)

// A tree without a cgroup that reports memory.peak has its peak memory
// from the kernel's exit records where this process may read them (root in
// the initial namespaces: internal/taskstats): the largest high-water mark
// of the leader's own memory and of every descendant it reaped, which is
// what the leader's ru_maxrss covers without the host's memory. Elsewhere
// the leader's ru_maxrss is kept only where it cannot be the host's
// (leaderPeak). docs/limits.md says what is reported where.
//
// Rejected: reading the leader's VmHWM from /proc before it is reaped (a
// zombie has released its memory, and by then /proc shows no Vm lines;
// while it runs, any read may come before its peak), stopping it at exit
// with ptrace (PTRACE_O_TRACEEXIT: the tree could no longer be traced by
// its own debugger, and every signal to the leader would stop it), and
// starting the leader by fork from a small process (its ru_maxrss would
// be its own, but it would not be this process's child). None of these
// gives the reaped descendants' peaks apart from the host's either: the
// leader's cmaxrss is only ever reported together with its maxrss.

// exitRecords is this process's one exit listener, shared by every
// Manager that has started a tree and closed with the last of them.
var exitRecords struct {
	// mu is held across Open and Close: whoever waits for it needs the
	// listener settled anyway, and no other caller takes it.
	mu     sync.Mutex
	refs   int
	l      *taskstats.Listener
	denied bool // Open failed once: the kernel refuses this process
}

// acquireExitRecords returns the shared listener, opening it for the first
// holder, or nil where the kernel refuses one.
func acquireExitRecords() *taskstats.Listener {
	exitRecords.mu.Lock()
	defer exitRecords.mu.Unlock()
	if exitRecords.denied {
		return nil
	}
	if exitRecords.l == nil {
		l, err := taskstats.Open()
		if err != nil {
			exitRecords.denied = true
			return nil
		}
		exitRecords.l = l
	}
	exitRecords.refs++
	return exitRecords.l
}

// releaseExitRecords drops a hold; the last closes the listener.
func releaseExitRecords() {
	exitRecords.mu.Lock()
	defer exitRecords.mu.Unlock()
	if exitRecords.refs--; exitRecords.refs == 0 {
		_ = exitRecords.l.Close()
		exitRecords.l = nil
	}
}

// treePeaks is a Manager's hold on the exit listener, taken at its first
// Start (a Manager that starts nothing reads no records) and dropped by
// Close once every tree's exit is recorded.
type treePeaks struct {
	once sync.Once
	l    *taskstats.Listener // set by once; nil without a listener
	// released makes close drop the hold once: Shutdown's clean-up runs
	// for every call of it.
	released sync.Once
}

// mark is taken before a tree starts: its records are those read after.
func (t *treePeaks) mark() peakMark {
	t.once.Do(func() { t.l = acquireExitRecords() })
	if t.l == nil {
		return peakMark{}
	}
	return peakMark{l: t.l, m: t.l.Mark()}
}

// close drops the hold, once however often it is called; a later mark
// takes none.
func (t *treePeaks) close() {
	t.once.Do(func() {})
	t.released.Do(func() {
		if t.l != nil {
			releaseExitRecords()
		}
	})
}

// peakMark is where a tree's records begin; the zero value has no
// listener.
type peakMark struct {
	l *taskstats.Listener
	m taskstats.Mark
}

// done is called once the tree's peak is no longer needed (sysProc.release).
func (p peakMark) done() {
	if p.l != nil {
		p.l.Done()
	}
}

// watch is called with the leader's PID once it has started.
func (p peakMark) watch(pid int) {
	if p.l != nil {
		p.l.Watch(pid, p.m)
	}
}

// of returns the tree's peak memory from the reaped leader pid and its
// ru_maxrss (bytes): the exit records' where there are, and ru_maxrss
// too where it cannot be the host's (leaderPeak), which also covers the
// memory a forked descendant had before its exec.
func (p peakMark) of(pid int, rss int64) int64 {
	peak := leaderPeak(rss)
	if p.l == nil {
		return peak
	}
	if own, ok := p.l.Peak(pid, p.m); ok {
		return max(own, peak)
	}
	return peak
}

// leaderPeak turns the leader's ru_maxrss (bytes) into the tree's peak
// memory, or 0 where it cannot be told from the host's own. Go starts a
// child with clone(CLONE_VM|CLONE_VFORK): until its exec the child runs
// on the host's memory, and exec folds that memory's high-water mark into
// the child's maxrss (the kernel keeps the larger across exec and exit),
// so a host that has touched 300 MiB saw 300 MiB reported for `true`. The
// mark the leader brought along is at most the host's own high-water mark
// now (VmHWM: it only grows), so a maxrss above that is the tree's own; at
// or below it, it may be the host's, and the peak is unknown (0) rather
// than a number the tree never used. It is the fallback where there are no
// exit records (peakMark.of); a cgroup's memory.peak, where the tree has
// one, replaces both (containment.usage).
func leaderPeak(rss int64) int64 {
	if rss <= 0 || rss <= lastHWM.Load() {
		// VmHWM only grows (short of a write to clear_refs): at or below
		// a mark read before, rss is at or below the mark now, with no
		// read at all (the usual case: every leader brings the host's
		// mark along).
		return 0
	}
	// getrusage is one system call, and its maxrss is at least VmHWM: a
	// maxrss above it needs no read of /proc.
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) == nil && rss > int64(ru.Maxrss)*1024 {
		return rss
	}
	hwm, ok := hostHWM()
	if !ok {
		return 0
	}
	for old := lastHWM.Load(); hwm > old && !lastHWM.CompareAndSwap(old, hwm); old = lastHWM.Load() {
	}
	if rss > hwm {
		return rss
	}
	return 0
}

// lastHWM is the largest VmHWM hostHWM has read, in bytes.
var lastHWM atomic.Int64

// hostHWM is this process's VmHWM in bytes, from /proc/self/status.
func hostHWM() (int64, bool) {
	status, err := procfs.ReadSelf("status")
	if err != nil {
		return 0, false
	}
	v, ok := procfs.StatusField(status, "VmHWM")
	if !ok {
		return 0, false
	}
	kib, err := strconv.ParseInt(string(bytes.TrimSuffix(v, []byte(" kB"))), 10, 64)
	return kib * 1024, err == nil
}
