package agentproc

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentproc/agentproc/internal/cgroup"
	"github.com/agentproc/agentproc/internal/procfs"
	"github.com/agentproc/agentproc/internal/taskstats"
)

// The tests read /proc through the package's one reader (proc_linux.go).
var (
	// HostHWM is this process's VmHWM, the bound leaderPeak trusts a peak above.
	HostHWM     = hostHWM
	ProcState   = procState
	ProcsMarked = procsMarked
)

// ProcFile returns the contents of /proc/PID/name.
func ProcFile(pid int, name string) ([]byte, error) {
	s, err := newProcScanner()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	data, _, err := s.Read(pid, name, false)
	return bytes.Clone(data), err
}

// ProcStartTime returns field 22 of /proc/PID/stat, the start time that
// state records keep; ok is false when it cannot be read.
func ProcStartTime(pid int) (start uint64, ok bool) {
	start, _, ok = procfs.StartTime(pid)
	return start, ok
}

// OOMRaised returns a channel closed once the output reader has raised p's
// oom_score_adj (closed at once when nothing is raised).
func OOMRaised(p *Process) <-chan struct{} {
	if p.sup.raised == nil {
		done := make(chan struct{})
		close(done)
		return done
	}
	return p.sup.raised
}

// PretendSandboxHost makes the sandbox believe this host has Landlock ABI
// abi, root's namespaces or not and seccomp or not, until restore is
// called. Tests that use it must not run in parallel with other sandbox
// tests.
func PretendSandboxHost(abi int, root, seccomp bool) (restore func()) {
	h := probeHost()
	h.abi, h.root, h.seccomp = abi, root, seccomp
	hostOverride.Store(&h)
	return func() { hostOverride.Store(nil) }
}

// WithSandboxOnly keeps, of the Linux sandbox's mechanisms, only those
// named ("netns", "mountns", "capabilities", "landlock", "seccomp"; the
// throwaway thread and no_new_privs always stay), so that a benchmark can
// measure each one's share. Policies it leaves open are not reported as
// missing: it is for benchmarks only.
func WithSandboxOnly(mechs ...string) Option {
	skip := sandboxSkipNetns | sandboxSkipMountns | sandboxSkipCaps | sandboxSkipLandlock | sandboxSkipSeccomp
	for _, m := range mechs {
		switch m {
		case "netns":
			skip &^= sandboxSkipNetns
		case "mountns":
			skip &^= sandboxSkipMountns
		case "capabilities":
			skip &^= sandboxSkipCaps
		case "landlock":
			skip &^= sandboxSkipLandlock
		case "seccomp":
			skip &^= sandboxSkipSeccomp
		}
	}
	return optionFunc(func(c *config) { c.sandboxSkip = skip })
}

// SpareStarts returns how many sandboxed Starts so far took a spare
// thread.
func SpareStarts() int64 { return readyThreadStarts.Load() }

// SparesMade returns how many spare threads were made so far.
func SparesMade() int64 { return readyThreadsMade.Load() }

// SpareThreadID returns the thread ID of a spare thread of m that is
// ready (of its one policy, in the tests that ask), 0 if none is.
func SpareThreadID(m *Manager) int {
	for _, tid := range SpareThreadIDs(m) {
		return tid
	}
	return 0
}

// SpareThreadIDs returns the thread IDs of m's spare threads that are
// ready.
func SpareThreadIDs(m *Manager) []int {
	c := &m.sandbox.cache
	c.readyThreadMu.Lock()
	defer c.readyThreadMu.Unlock()
	var tids []int
	for _, st := range c.readyThreads {
		if tid := st.spare.TID(); tid != 0 {
			tids = append(tids, tid)
		}
	}
	return tids
}

// MaxSpareThreads is how many spare threads a Manager keeps.
const MaxSpareThreads = maxReadyThreads

// SpareReady waits up to timeout until m's sandbox has a spare thread
// ready, and reports whether it has.
func SpareReady(m *Manager, timeout time.Duration) bool {
	c := &m.sandbox.cache
	deadline := time.Now().Add(timeout)
	for {
		c.readyThreadMu.Lock()
		var st *readyThread
		for _, st = range c.readyThreads {
			break
		}
		c.readyThreadMu.Unlock()
		if st != nil {
			select {
			case <-st.spare.Ready():
				return true
			case <-st.spare.Failed():
				return false
			case <-time.After(time.Until(deadline)):
				return false
			}
		}
		if time.Now().After(deadline) {
			return false
		}
		runtime.Gosched()
	}
}

// ReadyCgroupSetDirs waits until m's pool holds n cgroup sets and returns their
// directories, or returns an error when ctx ends first. With no maker at
// work it looks again every 10 ms: the last tree's cgroup removal, which
// starts the next maker, runs after its Wait returned.
func ReadyCgroupSetDirs(ctx context.Context, m *Manager, n int) ([]string, error) {
	s := &m.cgroupSets
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.sets) < n {
		var ready <-chan struct{}
		var again <-chan time.Time
		if s.making {
			ready = s.ready
		} else {
			again = tick.C
		}
		s.mu.Unlock()
		select {
		case <-ready:
		case <-again:
		case <-ctx.Done():
		}
		s.mu.Lock()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%d ready cgroup sets when %v, want %d", len(s.sets), ctx.Err(), n)
		}
	}
	var dirs []string
	for _, set := range s.sets {
		dirs = append(dirs, set.g.Dirs()...)
	}
	return dirs, nil
}

// Placements returns how many cgroup v1 thread placements this process
// made so far, and how many of them placed the main thread.
func Placements() (all, onMain int64) { return placements.Load(), mainPlacements.Load() }

// LiveRepairPasses returns how many passes m's live repair of its
// policies' mount namespaces ran (internal/confine/repair_linux.go).
func LiveRepairPasses(m *Manager) int64 { return m.sandbox.cache.dirs.RepairPasses() }

// MountRebuilds returns how many policies were built again so far because
// their mount namespace no longer covered what they name.
func MountRebuilds() int64 { return mountRebuilds.Load() }

// HoldCgroupRemoval makes every finished tree's cgroup removal (after its
// exit is published) wait until release is called, and returns a channel
// that receives each tree's cgroup directories as its removal is held.
func HoldCgroupRemoval() (held <-chan []string, release func()) {
	ch, hold := make(chan []string, 16), make(chan struct{})
	removeCgroupsHook = func(dirs []string) {
		ch <- dirs
		<-hold
	}
	return ch, func() { close(hold) }
}

// TrackCgroups has every cgroup this process makes recorded, and every
// failed removal with the members its directories held then. The returned
// report lists the directories still there (each with the failures seen
// for it); it is empty when the run left none.
func TrackCgroups() (report func() []string) {
	var mu sync.Mutex
	made := map[string]bool{}
	failures := map[string][]string{}
	cgroup.SetTestHooks(func(dirs []string) {
		mu.Lock()
		defer mu.Unlock()
		for _, d := range dirs {
			made[d] = true
		}
	}, func(dirs []string, err error) {
		var members []string
		for _, d := range dirs {
			data, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			for pid := range strings.FieldsSeq(string(data)) {
				stat, _ := os.ReadFile("/proc/" + pid + "/stat")
				cmd, _ := os.ReadFile("/proc/" + pid + "/cmdline")
				members = append(members, fmt.Sprintf("%s in %s: stat %q cmdline %q", pid, d, stat, bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for _, d := range dirs {
			failures[d] = append(failures[d], fmt.Sprintf("remove failed: %v; members: %v", err, members))
		}
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		var left []string
		for d := range made {
			if _, err := os.Stat(d); err == nil {
				left = append(left, fmt.Sprintf("%s %v", d, failures[d]))
			}
		}
		slices.Sort(left)
		return left
	}
}

// HoldCgroupNew makes the nth cgroup.New of this process (counting from 1)
// block, once it has made every directory, until the process ends; the
// returned channel receives that group's directories as it blocks.
func HoldCgroupNew(n int) <-chan []string {
	ch := make(chan []string, 1)
	var calls atomic.Int64
	cgroup.SetTestHooks(func(dirs []string) {
		if calls.Add(1) == int64(n) {
			ch <- dirs
			select {}
		}
	}, nil)
	return ch
}

// CoverFile returns the empty file m's namespaces cover hidden files with.
func CoverFile(m *Manager) (string, error) { return m.sandbox.cache.emptyFile() }

// procState returns (for tests only) the state letter of pid ('R', 'S', 'T', 'Z', ...),
// and ok false when the process is gone or /proc cannot be read.
func procState(pid int) (state byte, ok bool) {
	s, err := newProcScanner()
	if err != nil {
		return 0, false
	}
	defer s.Close()
	state, _, ok = s.Stat(pid)
	return state, ok
}

// procsMarked returns (for tests only) the live processes carrying MarkerEnv=id, with their
// command names, from a fresh pass that skips nothing.
func procsMarked(id string) map[int]string {
	s, err := newProcScanner()
	if err != nil {
		return nil
	}
	defer s.Close()
	pids, err := s.PIDs()
	if err != nil {
		return nil
	}
	entry := []byte(MarkerEnv + "=" + id)
	out := make(map[int]string)
	for _, pid := range pids {
		if state, _, ok := s.Stat(pid); !ok || state == 'Z' || !s.mayBeMarked(pid, entry) {
			continue
		}
		if comm, _, err := s.Read(pid, "comm", false); err == nil {
			out[pid] = string(bytes.TrimSpace(comm))
		}
	}
	return out
}

// WithoutExitRecords makes m take its trees' peaks without the exit
// records, as where the kernel refuses them; call it before m's first
// Start.
func WithoutExitRecords(m *Manager) { m.peaks.once.Do(func() {}) }

// ExitRecordsAvailable reports whether this process may read the kernel's
// exit records (root in the initial namespaces), and why not.
func ExitRecordsAvailable() (bool, error) {
	l, err := taskstats.Open()
	if err != nil {
		return false, err
	}
	return true, l.Close()
}

// ExitRecordHolds is how many holds the exit listener has (Managers that
// started a tree and are not closed).
func ExitRecordHolds() int {
	exitRecords.mu.Lock()
	defer exitRecords.mu.Unlock()
	return exitRecords.refs
}

// PretendNoTraceAtExec makes the sandbox act as on a host whose Yama
// refuses PTRACE_TRACEME (traceAtExec false) until restore. Not for
// parallel tests: Starts read it.
func PretendNoTraceAtExec() (restore func()) {
	old := traceAtExec
	traceAtExec = func() bool { return false }
	return func() { traceAtExec = old }
}

// WatchTracedThreads reports on the reaper of traced threads
// (traced_thread_linux.go): ended receives each shell's PID once its output
// has ended, and looks returns how many times pid's threads were listed.
// stop ends the watch.
func WatchTracedThreads() (ended <-chan int, looks func(pid int) int, stop func()) {
	ch := make(chan int, 64)
	var mu sync.Mutex
	count := map[int]int{}
	h := func(pid int, look bool) {
		if !look {
			select {
			case ch <- pid:
			default:
			}
			return
		}
		mu.Lock()
		count[pid]++
		mu.Unlock()
	}
	tracedHook.Store(&h)
	return ch, func(pid int) int {
			mu.Lock()
			defer mu.Unlock()
			return count[pid]
		}, func() {
			tracedHook.Store(nil)
		}
}

// WatchTracedListing calls f with the thread IDs the reaper of traced
// threads reads from /proc/PID/task, before it asks about any of them
// (traced_thread_linux.go). stop ends the watch.
func WatchTracedListing(f func(pid int, tids []int)) (stop func()) {
	tracedListedHook.Store(&f)
	return func() { tracedListedHook.Store(nil) }
}
