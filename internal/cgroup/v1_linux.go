package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"

	"github.com/agentproc/agentproc/internal/pidfd"
	"github.com/agentproc/agentproc/internal/procfs"
)

// v1Set is a tree's directories in the cgroup v1 hierarchies its limits
// need, one per hierarchy (cpu and cpuacct may share one or not).
type v1Set struct {
	id     string
	limits Limits
	dirs   []v1Dir
	// The directory of each controller used, "" where none.
	mem, pids, cpu, acct string
	oom                  *oomWatch // nil without a memory limit
	onOOM                func()
	// The files enter, leave and started write, opened by newV1Set so that
	// the start itself only writes (and so that a step the caller takes on
	// the placed thread, a Landlock domain or a seccomp filter, cannot stop
	// them being written): -1 where none. Each is closed once written, and
	// by remove at the latest.
	fds v1Files
}

// v1Files are a v1Set's open interface files.
type v1Files struct {
	into     []int // each directory's tasks
	back     []int // the tasks of each directory's home, where the thread goes back
	pidsMax  int
	memLimit int
	memswLim int // memory.memsw.limit_in_bytes, where the kernel accounts swap
	cpuQuota int
}

// noFiles is a v1Files with no file open.
func noFiles() v1Files { return v1Files{pidsMax: -1, memLimit: -1, memswLim: -1, cpuQuota: -1} }

// closeFiles closes the descriptors s still holds (remove leaves them).
func (s *v1Set) closeFiles() { s.fds.closeAll() }

// closeAll closes every file still open.
func (f *v1Files) closeAll() {
	f.closeEnter()
	f.closeStarted()
}

// closeEnter closes the files of the thread placement.
func (f *v1Files) closeEnter() {
	for _, fds := range [][]int{f.into, f.back} {
		for _, fd := range fds {
			if fd >= 0 {
				_ = unix.Close(fd)
			}
		}
	}
	f.into, f.back = nil, nil
	closeFD(&f.pidsMax)
}

// closeStarted closes the files started writes.
func (f *v1Files) closeStarted() {
	closeFD(&f.memLimit)
	closeFD(&f.memswLim)
	closeFD(&f.cpuQuota)
}

func closeFD(fd *int) {
	if *fd >= 0 {
		_ = unix.Close(*fd)
		*fd = -1
	}
}

// v1Dir is one directory of a v1Set.
type v1Dir struct {
	m    mount
	path string
	home string // the host's own cgroup in the hierarchy, where a placed thread goes back
}

var _ backend = (*v1Set)(nil)

// v1PollInterval is how often a v1 wait looks again: v1 has no event for
// a cgroup becoming empty.
const v1PollInterval = 2 * time.Millisecond

// newV1Set makes "agentproc-<id>" under each place and writes the one
// limit that may hold while the host's thread is inside: pids.max, one
// above the limit (see Group.EnterThread). listed, if set, is called with
// each directory's path before its mkdir until one is made: the first
// directory, which names the set.
func newV1Set(places []v1Place, id string, l Limits, onOOM func(), listed func(string)) (*v1Set, error) {
	s := &v1Set{id: id, limits: l, onOOM: onOOM, fds: noFiles()}
	for _, p := range places {
		if p.mkdir {
			if err := os.MkdirAll(p.parent, 0o755); err != nil && !p.optional {
				_ = s.remove(time.Now())
				return nil, xerrors.Errorf("create cgroup parent %q: %w", p.parent, err)
			}
		}
		dir := filepath.Join(p.parent, LeafName(id))
		if listed != nil && len(s.dirs) == 0 {
			listed(dir)
		}
		if err := unix.Mkdir(dir, 0o755); err != nil {
			if p.optional {
				continue
			}
			_ = s.remove(time.Now())
			return nil, xerrors.Errorf("create cgroup %q: %w", dir, err)
		}
		s.dirs = append(s.dirs, v1Dir{m: p.m, path: dir, home: p.home})
		for _, c := range p.m.controllers {
			switch c {
			case "memory":
				s.mem = dir
			case "pids":
				s.pids = dir
			case "cpu":
				s.cpu = dir
			case "cpuacct":
				s.acct = dir
			}
		}
	}
	if l.Procs > 0 {
		if err := writeFile(s.pids, "pids.max", strconv.Itoa(l.Procs+1)); err != nil {
			_ = s.remove(time.Now())
			return nil, err
		}
	}
	if err := s.prepare(); err != nil {
		_ = s.remove(time.Now())
		return nil, err
	}
	return s, nil
}

// prepare opens every file the start writes and, with a memory limit,
// starts the OOM watch and turns the kernel's OOM killer off for the tree
// (see started). Neither needs the limit yet, and with no limit in force
// nothing can run out of memory in the cgroup while the host's thread is
// inside it.
func (s *v1Set) prepare() error {
	open := func(file string) (int, error) {
		fd, err := openFile(file, unix.O_WRONLY)
		if err != nil {
			return -1, xerrors.Errorf("open cgroup file: %w", err)
		}
		return fd, nil
	}
	var err error
	f := &s.fds
	if s.limits.Procs > 0 {
		if f.pidsMax, err = open(filepath.Join(s.pids, "pids.max")); err != nil {
			return err
		}
	}
	for _, d := range s.dirs {
		fd, err := open(filepath.Join(d.path, "tasks"))
		if err != nil {
			return err
		}
		f.into = append(f.into, fd)
		if fd, err = open(filepath.Join(d.home, "tasks")); err != nil {
			return err
		}
		f.back = append(f.back, fd)
	}
	if s.limits.Memory > 0 {
		if f.memLimit, err = open(filepath.Join(s.mem, "memory.limit_in_bytes")); err != nil {
			return err
		}
		// memsw exists only where the kernel accounts swap.
		if fd, err := unix.Open(filepath.Join(s.mem, "memory.memsw.limit_in_bytes"), unix.O_WRONLY|unix.O_CLOEXEC, 0); err == nil {
			f.memswLim = fd
		}
		w, err := watchOOM(s.mem, s.onOOM)
		if err != nil {
			return err
		}
		s.oom = w
		// The kernel's OOM killer is turned off for the tree, the watch's
		// kill takes its place: with it on, the kernel killed one process
		// and the shell ran on (it printed its next line before the
		// watch's kill arrived, under load, in CI). Off, a process that
		// faults past the limit sleeps under OOM until the watch, woken
		// by the same notification, kills the whole tree at once, as
		// memory.oom.group does on v2. An allocation inside the kernel
		// fails with ENOMEM instead of sleeping.
		if err := writeFile(s.mem, "memory.oom_control", "1"); err != nil {
			return err
		}
	}
	if s.limits.CPU > 0 {
		if f.cpuQuota, err = open(filepath.Join(s.cpu, "cpu.cfs_quota_us")); err != nil {
			return err
		}
	}
	return nil
}

// enter moves thread tid into every directory of s and returns the step
// that moves it back; see Group.EnterThread for the ordering rule.
//
// The thread goes back to the host's own cgroups, read once before any
// thread was ever placed (see currentHost), not to where /proc says it is:
// that read would cost as much as a move.
func (s *v1Set) enter(tid int) (leave func() error, err error) {
	f := &s.fds
	if len(f.into) != len(s.dirs) {
		return nil, xerrors.Errorf("cgroups %q: a thread was placed in them before", s.dirs[0].path)
	}
	// "0" names the writing thread itself. For that one case the kernel
	// skips the global threadgroup lock, whose write side waits for an RCU
	// grace period: writing the TID instead costs about half a millisecond
	// per hierarchy and direction.
	self := []byte("0")
	moveBack := func(n int) error {
		var errs []error
		for i := range n {
			if err := writeAll(f.back[i], self); err != nil {
				errs = append(errs, xerrors.Errorf("move thread %d back to cgroup %q: %w", tid, s.dirs[i].home, err))
			}
		}
		return errors.Join(errs...)
	}
	for i, d := range s.dirs {
		if err := writeAll(f.into[i], self); err != nil {
			err = xerrors.Errorf("move thread %d into cgroup %q: %w", tid, d.path, err)
			err = errors.Join(err, moveBack(i))
			f.closeEnter()
			return nil, err
		}
	}
	return func() error {
		defer f.closeEnter()
		// Lowered while the thread still counts, so that the tree alone
		// never has more than the limit.
		var perr error
		if f.pidsMax >= 0 {
			if err := writeAll(f.pidsMax, []byte(strconv.Itoa(s.limits.Procs))); err != nil {
				perr = xerrors.Errorf("set pids.max of cgroup %q to %d: %w", s.pids, s.limits.Procs, err)
			}
		}
		return errors.Join(perr, moveBack(len(s.dirs)))
	}, nil
}

// started writes the limits that must wait until the host's thread has
// left: the memory limit (and the same for memory plus swap, so the tree
// cannot swap), then the CPU quota. The OOM watch runs since prepare.
func (s *v1Set) started() error {
	f := &s.fds
	defer f.closeStarted()
	if f.memLimit >= 0 {
		v := []byte(strconv.FormatInt(s.limits.Memory, 10))
		if err := writeAll(f.memLimit, v); err != nil {
			return xerrors.Errorf("set memory.limit_in_bytes of cgroup %q to %s: %w", s.mem, v, err)
		}
		// memsw must not be below limit_in_bytes, so it is written second.
		if f.memswLim >= 0 {
			if err := writeAll(f.memswLim, v); err != nil {
				return xerrors.Errorf("set memory.memsw.limit_in_bytes of cgroup %q to %s: %w", s.mem, v, err)
			}
		}
	}
	if f.cpuQuota >= 0 {
		// cpu.cfs_period_us is CPUPeriod in every new cgroup: the kernel's
		// default, so only the quota is written.
		v := strconv.FormatInt(cpuQuota(s.limits.CPU), 10)
		if err := writeAll(f.cpuQuota, []byte(v)); err != nil {
			return xerrors.Errorf("set cpu.cfs_quota_us of cgroup %q to %s: %w", s.cpu, v, err)
		}
	}
	return nil
}

func (s *v1Set) members() []int {
	if len(s.dirs) == 0 {
		return nil
	}
	return readPIDs(filepath.Join(s.dirs[0].path, "cgroup.procs"))
}

// kill SIGKILLs every member until the cgroup is empty, by internal/pidfd's
// protocol: each PID is pinned with a pidfd, checked to be in this cgroup,
// and signalled through the pidfd, so a PID reused meanwhile is never
// signalled. A member forked
// while this runs is found in the next round. v1 has no cgroup.kill; the
// freezer would make the round atomic but stalled for a second in OOM
// runs, so it is not used.
func (s *v1Set) kill() {
	if len(s.dirs) == 0 {
		return
	}
	d := s.dirs[0]
	self := os.Getpid()
	deadline := time.Now().Add(removeWait)
	for time.Now().Before(deadline) {
		pids := readPIDs(filepath.Join(d.path, "cgroup.procs"))
		// One round's targets: a PID found again next round is a member
		// still (or again) in the cgroup, checked anew.
		var round pidfd.Targets
		n := 0
		for _, pid := range pids {
			if pid == self {
				continue
			}
			n++
			round.Signal(pid, unix.SIGKILL, func() bool { return s.holds(d, pid) })
		}
		if n == 0 {
			return
		}
		fds, _ := round.Killed(true)
		if len(fds) == 0 {
			// Nothing to wait on (killed without pidfds, or members this
			// /proc cannot verify): look again after a pause, not at once.
			time.Sleep(v1PollInterval)
			continue
		}
		pidfd.Wait(fds, time.Now().Add(v1PollInterval*10))
		round.Close()
	}
}

// holds reports whether pid is in d now, from /proc/PID/cgroup.
func (s *v1Set) holds(d v1Dir, pid int) bool {
	ms := readMembership(procfs.PIDFile(pid, "cgroup"))
	p, ok := ms.v1[d.m.controllers[0]]
	return ok && (strings.HasSuffix(p, "/"+LeafName(s.id)))
}

// waitEmpty polls cgroup.procs until it lists nothing but the host: v1
// has no event for it.
func (s *v1Set) waitEmpty(deadline time.Time) bool {
	self := os.Getpid()
	tick := time.NewTicker(v1PollInterval)
	defer tick.Stop()
	for {
		empty := true
		for _, pid := range s.members() {
			if pid != self {
				empty = false
				break
			}
		}
		if empty {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
}

// usage reads the tree's CPU time from cpuacct.usage and its peak memory
// from memory.max_usage_in_bytes.
func (s *v1Set) usage() Usage {
	var u Usage
	if s.acct != "" {
		if ns, ok := readInt(filepath.Join(s.acct, "cpuacct.usage")); ok {
			u.CPU, u.CPUOK = time.Duration(ns), true
		}
	}
	if s.mem != "" {
		u.Peak, u.PeakOK = readInt(filepath.Join(s.mem, "memory.max_usage_in_bytes"))
	}
	return u
}

// oomKills reads oom_kill from memory.oom_control (Linux 4.13+);
// memory.failcnt is no signal (it stays 0 through an OOM kill). With the
// kernel's OOM killer off for the tree (see started) the kill is the
// watch's, which the kernel does not count: the notification counts as
// one.
func (s *v1Set) oomKills() (int64, bool) {
	if s.mem == "" {
		return 0, false
	}
	return s.countOOM(readKeyed(filepath.Join(s.mem, "memory.oom_control"), "oom_kill"))
}

// countOOM is oomKills from oom_kill as read (n, ok).
func (s *v1Set) countOOM(n int64, ok bool) (int64, bool) {
	if n == 0 && s.oom != nil && s.oom.fired.Load() {
		return 1, true
	}
	return n, ok
}

// remove stops the OOM watch, then removes each directory, retrying while
// the last members finish dying (EBUSY) until deadline.
func (s *v1Set) remove(deadline time.Time) error {
	// The watch goes first: the kernel signals a memory cgroup's event
	// descriptors when it removes the cgroup.
	if s.oom != nil {
		s.oom.stop()
	}
	tick := time.NewTicker(v1PollInterval)
	defer tick.Stop()
	var errs []error
	for _, d := range s.dirs {
		for {
			err := unix.Rmdir(d.path)
			if err == nil || err == unix.ENOENT {
				break
			}
			if err != unix.EBUSY || time.Now().After(deadline) {
				errs = append(errs, xerrors.Errorf("remove cgroup %q: %w", d.path, err))
				break
			}
			<-tick.C
		}
	}
	return errors.Join(errs...)
}
