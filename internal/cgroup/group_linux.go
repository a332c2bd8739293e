package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Limits is agentproc.Limits as this package needs it: zero fields set no
// limit. The caller has validated the values.
type Limits struct {
	Memory int64   // bytes
	Procs  int     // processes and threads
	CPU    float64 // cores
}

// fields names the fields l sets, as agentproc's errors name them.
func (l Limits) fields() []string {
	var f []string
	if l.Memory > 0 {
		f = append(f, "Limits.Memory")
	}
	if l.Procs > 0 {
		f = append(f, "Limits.Procs")
	}
	if l.CPU > 0 {
		f = append(f, "Limits.CPU")
	}
	return f
}

// Auto is the Spec.Parent (agentproc.CgroupAuto): the default parent (see
// plan), for trees with or without limits.
const Auto = "auto"

// Spec says what cgroups New makes.
type Spec struct {
	// ID names the cgroups: each is "agentproc-<ID>".
	ID string
	// Parent is WithCgroup's parent: an absolute path in a cgroup v2 or v1
	// hierarchy, Auto, or "" for the default (found by plan, and only for
	// limits).
	Parent string
	// Limits are the limits to hold the tree to.
	Limits Limits
	// Listed, if set, is called with the path the group's Path will have
	// just before New makes that directory (again with another path
	// should that mkdir fail and another directory take its place): a
	// caller that lists it with a guard then leaves no directory unlisted
	// if the process dies inside New.
	Listed func(path string)
}

// Usage is what the cgroups know of a tree's consumption; each OK is false
// when the value is unknown.
type Usage struct {
	CPU    time.Duration
	CPUOK  bool
	Peak   int64
	PeakOK bool
}

// backend is what each cgroup version's part of a Group does. Group picks,
// for each step, the part that does it best on this host.
type backend interface {
	members() []int
	kill()
	waitEmpty(deadline time.Time) bool
	usage() Usage
	oomKills() (int64, bool)
	remove(deadline time.Time) error
}

// removeWait bounds how long Remove waits for the last members to finish
// dying.
const removeWait = 2 * time.Second

// Group is the cgroups of one process tree: a v2 directory, v1 directories
// (one per hierarchy a limit needs), or both. Make it with New; call Remove
// when the tree is gone. Its methods may be called from several goroutines.
type Group struct {
	id     string
	limits Limits
	v2     *v2Dir // nil without one
	v1     *v1Set // nil without one
	once   sync.Once
	remErr error
	// exit holds the files read once the tree has exited (Members, Usage,
	// OOMKills), opened by New so that the exit path reads each with one
	// pread instead of an open, two reads and a close; Remove closes them.
	exit exitFiles
}

// exitFiles are a Group's open files for its exit reads, -1 where none (a
// Group from Open, a file the hierarchy lacks). The read lock is held
// while one is read, the write lock while Remove closes them.
type exitFiles struct {
	mu     sync.RWMutex
	closed bool
	procs  int // the cgroup.procs of Path
	cpu    int // cpuacct.usage (cpuV1) or the v2 cpu.stat
	cpuV1  bool
	peak   int // memory.max_usage_in_bytes (v1) or memory.peak (v2)
	oom    int // memory.oom_control (oomV1) or the v2 memory.events
	oomV1  bool
}

// openExitFiles opens g's exit files, each from the backend Usage and
// OOMKills would read it from; a file that cannot be opened is read by
// path later, as before.
func (g *Group) openExitFiles() {
	e := &g.exit
	e.closed = false
	e.procs, e.cpu, e.peak, e.oom = -1, -1, -1, -1
	open := func(dir, name string) int {
		fd, err := openFile(filepath.Join(dir, name), unix.O_RDONLY)
		if err != nil {
			return -1
		}
		return fd
	}
	e.procs = open(g.Path(), "cgroup.procs")
	if g.v1 != nil && g.v1.acct != "" {
		e.cpu, e.cpuV1 = open(g.v1.acct, "cpuacct.usage"), true
	} else if g.v2 != nil {
		e.cpu = open(g.v2.path, "cpu.stat")
	}
	if g.v1 != nil && g.v1.mem != "" {
		e.peak = open(g.v1.mem, "memory.max_usage_in_bytes")
		e.oom, e.oomV1 = open(g.v1.mem, "memory.oom_control"), true
	} else if g.v2 != nil {
		e.peak = open(g.v2.path, "memory.peak")
		e.oom = open(g.v2.path, "memory.events")
	}
}

// closeExitFiles closes the exit files; later reads go by path.
func (g *Group) closeExitFiles() {
	e := &g.exit
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	e.closed = true
	for _, fd := range []*int{&e.procs, &e.cpu, &e.peak, &e.oom} {
		closeFD(fd)
	}
}

// New makes the cgroups spec asks for, with the limits written that may be
// in force before the leader starts (all of them on v2; on v1 only
// pids.max, one above the limit, see EnterThread). The leader is to be
// started with CloneFD (v2) inside EnterThread's placement (v1), and
// Started called once it runs. New also opens every file the start writes
// and the exit reads, and arms the v1 OOM watch, so that the start and the
// exit only write and read: a Group holds up to a dozen descriptors until
// Started and four, and the watch's eventfd, until Remove. All of it may
// be done well ahead of the start (agentproc's pool of cgroup sets keeps
// Groups made so for the next Starts). Errors wrap
// errdefs.ErrInvalidRequest (a parent that cannot be used) or
// errdefs.ErrUnsupported (a limit nothing here can hold, naming the limit,
// what was tried and the remedy).
func New(s Spec) (*Group, error) {
	p, err := plan(currentHost(), s)
	if err != nil {
		return nil, err
	}
	if p.moveHost {
		if _, err := delegate(p.v2Parent, os.Getpid()); err != nil {
			return nil, err
		}
	}
	g := &Group{id: s.ID, limits: s.Limits}
	g.exit.closed = true // until openExitFiles
	if p.v2Parent != "" {
		d, err := newV2Dir(p.v2Parent, s.ID, s.Listed)
		switch {
		case err != nil && p.v2Optional:
			// A controller-less v2 cgroup beside v1 ones only adds
			// cgroup.kill and cgroup.events; the v1 kill holds without.
		case err != nil:
			return nil, err
		default:
			g.v2 = d
			if p.v2Limits != (Limits{}) {
				if err := d.setLimits(p.v2Limits); err != nil {
					_ = g.Remove()
					return nil, err
				}
			}
		}
	}
	if len(p.v1) > 0 {
		var listed func(string)
		if g.v2 == nil {
			listed = s.Listed
		}
		set, err := newV1Set(p.v1, s.ID, p.v1Limits, g.killFromOOM, listed)
		if err != nil {
			_ = g.Remove()
			return nil, err
		}
		g.v1 = set
	}
	g.openExitFiles()
	if h := madeHook; h != nil {
		h(g.Dirs())
	}
	return g, nil
}

// madeHook and removeFailedHook, when set (SetTestHooks), are told of every
// group New makes and of every Remove that fails: tests use them to find
// the cgroups a run leaves and why.
var (
	madeHook         func(dirs []string)
	removeFailedHook func(dirs []string, err error)
)

// SetTestHooks sets madeHook and removeFailedHook. It is for tests, which
// call it before they make any group.
func SetTestHooks(made func(dirs []string), removeFailed func(dirs []string, err error)) {
	madeHook, removeFailedHook = made, removeFailed
}

// Open returns the Group of a tree a former host made in the cgroup v2
// directory path, for killing and removing what is left of it. The caller
// has checked that path is a cgroup v2 directory of agentproc's. On a
// hybrid host the tree's v1 directories of the same name under this host's
// own cgroups (where a former host on the same cgroups put them) are part
// of it, so that they are removed too.
func Open(path string) *Group {
	g := &Group{v2: &v2Dir{path: path, dirfd: -1, hasKill: exists(path + "/cgroup.kill")}}
	g.exit.closed = true
	leaf := filepath.Base(path)
	h := currentHost()
	var dirs []v1Dir
	for _, m := range h.mounts {
		if m.v2 {
			continue
		}
		home := m.dirOf(h.own.v1[m.controllers[0]])
		if home == "" {
			continue
		}
		if st, err := os.Stat(filepath.Join(home, leaf)); err == nil && st.IsDir() {
			dirs = append(dirs, v1Dir{m: m, path: filepath.Join(home, leaf), home: home})
		}
	}
	if len(dirs) > 0 {
		g.v1 = &v1Set{id: strings.TrimPrefix(leaf, leafPrefix), dirs: dirs, fds: noFiles()}
	}
	return g
}

// OpenV1 is Open for a tree a former host made on a host without cgroup2
// (pure v1), where path, the directory its record names, is one of the
// tree's v1 directories: the Group holds path and the directories of the
// same name under this host's own cgroups in the other v1 hierarchies. The
// caller has checked that path is a cgroup v1 directory of agentproc's. It
// returns nil if path is in no v1 hierarchy this host sees.
func OpenV1(path string) *Group {
	leaf := filepath.Base(path)
	h := currentHost()
	var dirs []v1Dir
	found := false
	for _, m := range h.mounts {
		if m.v2 {
			continue
		}
		home := m.dirOf(h.own.v1[m.controllers[0]])
		if rel, ok := strings.CutPrefix(path, m.point+"/"); ok && !found {
			// The named directory first: the kill reads its members.
			dirs = append([]v1Dir{{m: m, path: filepath.Join(m.point, rel), home: home}}, dirs...)
			found = true
			continue
		}
		if home == "" {
			continue
		}
		if st, err := os.Stat(filepath.Join(home, leaf)); err == nil && st.IsDir() {
			dirs = append(dirs, v1Dir{m: m, path: filepath.Join(home, leaf), home: home})
		}
	}
	if !found {
		return nil
	}
	g := &Group{v1: &v1Set{id: strings.TrimPrefix(leaf, leafPrefix), dirs: dirs, fds: noFiles()}}
	g.exit.closed = true
	return g
}

// Path is the directory that names the tree's cgroup: the v2 one where
// there is one, else the first v1 one. Its cgroup.procs lists the tree.
func (g *Group) Path() string {
	if g.v2 != nil {
		return g.v2.path
	}
	return g.v1.dirs[0].path
}

// Dirs lists every directory of the group, the v2 one first.
func (g *Group) Dirs() []string {
	var dirs []string
	if g.v2 != nil {
		dirs = append(dirs, g.v2.path)
	}
	if g.v1 != nil {
		for _, d := range g.v1.dirs {
			dirs = append(dirs, d.path)
		}
	}
	return dirs
}

// Leaf is the last element of every directory of the group.
func (g *Group) Leaf() string { return LeafName(g.id) }

// leafPrefix begins the name of every tree's cgroup (see LeafName).
const leafPrefix = "agentproc-"

// LeafName is the name of the cgroups of tree id, in every hierarchy: the
// one place that builds it, for this package and for the orphan killer,
// which accepts a recorded cgroup only under this name.
func LeafName(id string) string { return leafPrefix + id }

// CloneFD is the v2 directory to clone the leader into
// (SysProcAttr.CgroupFD), or -1 without one.
func (g *Group) CloneFD() int {
	if g.v2 == nil {
		return -1
	}
	return g.v2.dirfd
}

// NeedsThread reports whether the leader must be started inside
// EnterThread's placement: whether there are v1 cgroups, which have no
// CLONE_INTO_CGROUP.
func (g *Group) NeedsThread() bool { return g.v1 != nil }

// EnterThread moves the calling OS thread into each v1 cgroup of g, so that
// a child it forks is born inside them, and returns leave, which moves it
// back where it was. The caller has locked the goroutine to its thread
// (runtime.LockOSThread), calls leave right after the start, and must not
// let the thread run other goroutines if leave fails.
//
// While the thread is inside, the only limit in force is pids.max, one
// above Limits.Procs for the thread itself: with the memory limit set, the
// kernel's OOM killer could pick the host. leave lowers pids.max to the
// limit before it moves the thread out (so the tree never has more than
// Procs tasks), and Started writes the memory and CPU limits.
func (g *Group) EnterThread() (leave func() error, err error) {
	if g.v1 == nil {
		return func() error { return nil }, nil
	}
	return g.v1.enter(unix.Gettid())
}

// Started finishes the group once the leader runs: it closes the v2
// directory and writes the v1 limits that must wait until the host's
// thread has left (memory, CPU), then watches for OOM. On an error the
// caller kills the tree.
func (g *Group) Started() error {
	if g.v2 != nil {
		g.v2.closeDir()
	}
	if g.v1 != nil {
		return g.v1.started()
	}
	return nil
}

// Members returns the PIDs of the tree's processes, never the host's.
func (g *Group) Members() []int {
	var pids []int
	if data, ok := g.readExit(func(e *exitFiles) int { return e.procs }); ok {
		pids = parsePIDs(data)
	} else if g.v2 != nil {
		pids = g.v2.members()
	} else {
		pids = g.v1.members()
	}
	self := os.Getpid()
	out := pids[:0]
	for _, pid := range pids {
		if pid != self {
			out = append(out, pid)
		}
	}
	return out
}

// Kill SIGKILLs every process of the tree: at once through cgroup.kill
// where the v2 directory has it, else each member, pinned and verified by
// pidfd, until the cgroup is empty (v1), or frozen and killed by PID (v2
// before Linux 5.14).
func (g *Group) Kill() {
	switch {
	case g.v2 != nil && g.v2.hasKill:
		g.v2.kill()
	case g.v1 != nil:
		g.v1.kill()
	case g.v2 != nil:
		g.v2.kill()
	}
}

// killFromOOM is the v1 OOM watcher's action: v1 has no memory.oom.group,
// so the kernel kills one process and the rest of the tree runs on.
func (g *Group) killFromOOM() { g.Kill() }

// WaitEmpty waits up to timeout until the tree has no process left and
// reports whether it has none.
func (g *Group) WaitEmpty(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	if g.v2 != nil {
		return g.v2.waitEmpty(deadline)
	}
	return g.v1.waitEmpty(deadline)
}

// Usage returns the tree's CPU time and peak memory where the cgroups
// count them: v1 cpuacct and memory.max_usage_in_bytes, v2 cpu.stat and
// memory.peak.
func (g *Group) Usage() Usage {
	if u, ok := g.exitUsage(); ok {
		return u
	}
	var u, u2 Usage
	if g.v1 != nil {
		u = g.v1.usage()
	}
	if g.v2 != nil {
		u2 = g.v2.usage()
	}
	if !u.CPUOK {
		u.CPU, u.CPUOK = u2.CPU, u2.CPUOK
	}
	if !u.PeakOK {
		u.Peak, u.PeakOK = u2.Peak, u2.PeakOK
	}
	return u
}

// OOMKills returns how many processes of the tree the kernel's OOM killer
// killed; ok is false where no memory controller counts them.
func (g *Group) OOMKills() (int64, bool) {
	if data, ok := g.readExit(func(e *exitFiles) int { return e.oom }); ok {
		n, ok := parseKeyed(data, "oom_kill")
		if g.exit.oomV1 {
			n, ok = g.v1.countOOM(n, ok)
		}
		return n, ok
	}
	if g.v1 != nil {
		if n, ok := g.v1.oomKills(); ok {
			return n, ok
		}
	}
	if g.v2 != nil {
		return g.v2.oomKills()
	}
	return 0, false
}

// Remove stops the OOM watch, deletes every directory of the group,
// waiting up to two seconds for members still dying, and closes the
// group's descriptors. Later calls return the first call's result.
func (g *Group) Remove() error {
	err := g.RemoveDirs()
	g.closeFiles()
	return err
}

// RemoveDirs is Remove but for the descriptors, which stay open until
// Remove is called: a cgroup directory is deleted with its files open, and
// a caller that waits for the directories need not wait for the closes
// too. Later calls return the first call's result.
func (g *Group) RemoveDirs() error {
	g.once.Do(func() {
		deadline := time.Now().Add(removeWait)
		var errs []error
		if g.v1 != nil {
			if err := g.v1.remove(deadline); err != nil {
				errs = append(errs, err)
			}
		}
		if g.v2 != nil {
			if err := g.v2.remove(deadline); err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) > 0 {
			g.remErr = errors.Join(errs...)
			if h := removeFailedHook; h != nil {
				h(g.Dirs(), g.remErr)
			}
		}
	})
	return g.remErr
}

// closeFiles closes every descriptor g holds; later calls do nothing.
func (g *Group) closeFiles() {
	g.closeExitFiles()
	if g.v1 != nil {
		g.v1.closeFiles()
	}
	if g.v2 != nil {
		g.v2.closeDir()
	}
}

// readExit reads the exit file which picks, if it is open.
func (g *Group) readExit(which func(*exitFiles) int) ([]byte, bool) {
	e := &g.exit
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed || which(e) < 0 {
		return nil, false
	}
	data, err := preadAll(which(e))
	return data, err == nil
}

// exitUsage is Usage from the exit files, when both are open: the CPU time
// and the peak each from where Usage would take it.
func (g *Group) exitUsage() (Usage, bool) {
	var u Usage
	cpu, ok := g.readExit(func(e *exitFiles) int { return e.cpu })
	if !ok {
		return u, false
	}
	if g.exit.cpuV1 {
		ns, ok := parseInt(cpu)
		if !ok {
			return u, false // Usage then tries the v2 cpu.stat
		}
		u.CPU, u.CPUOK = time.Duration(ns), true
	} else if us, ok := parseKeyed(cpu, "usage_usec"); ok {
		u.CPU, u.CPUOK = time.Duration(us)*time.Microsecond, true
	}
	if peak, ok := g.readExit(func(e *exitFiles) int { return e.peak }); ok {
		u.Peak, u.PeakOK = parseInt(peak)
	} else if g.v1 != nil && g.v1.mem != "" {
		return u, false // the peak was to come from v1 and could not be read
	}
	return u, true
}
