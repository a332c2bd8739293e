package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"

	"github.com/agentproc/agentproc/internal/errdefs"
)

// v2Dir is the cgroup v2 directory of one tree. Every descendant is born
// inside it and only a process with write access to another cgroup can
// leave it, so it holds the whole tree even when the environment marker is
// gone.
type v2Dir struct {
	path    string
	dirfd   int  // open from creation until the leader has started, else -1
	hasKill bool // cgroup.kill exists (Linux 5.14+)
}

var _ backend = (*v2Dir)(nil)

// newV2Dir checks that parent is a writable cgroup v2 directory and
// creates the child cgroup "agentproc-<id>" in it, calling listed (if set)
// with its path first. It never falls back to weaker containment: every
// problem is an error that names the path and what is missing.
func newV2Dir(parent, id string, listed func(string)) (*v2Dir, error) {
	if st, err := os.Stat(parent); err != nil || !st.IsDir() {
		return nil, xerrors.Errorf("cgroup parent %q is not a cgroup directory: %w", parent, errdefs.ErrInvalidRequest)
	}
	if err := unix.Access(parent, unix.W_OK|unix.X_OK); err != nil {
		return nil, xerrors.Errorf("cgroup parent %q is not writable, so no child cgroup can be created in it (%v): %w",
			parent, err, errdefs.ErrInvalidRequest)
	}
	path := filepath.Join(parent, LeafName(id))
	if listed != nil {
		listed(path)
	}
	if err := unix.Mkdir(path, 0o755); err != nil {
		return nil, xerrors.Errorf("create cgroup %q: %w", path, err)
	}
	g := &v2Dir{path: path, dirfd: -1}
	if err := unix.Access(filepath.Join(path, "cgroup.procs"), unix.W_OK); err != nil {
		_ = g.remove(time.Now())
		return nil, xerrors.Errorf("cgroup %q: cgroup.procs is not writable, so no process can be started in it (%v): %w",
			path, err, errdefs.ErrInvalidRequest)
	}
	fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = g.remove(time.Now())
		return nil, xerrors.Errorf("open cgroup %q: %w", path, err)
	}
	g.dirfd = fd
	g.hasKill = exists(filepath.Join(path, "cgroup.kill"))
	return g, nil
}

// closeDir closes the directory fd once the leader has been cloned into
// the cgroup; nothing else needs it.
func (g *v2Dir) closeDir() {
	if g.dirfd >= 0 {
		_ = unix.Close(g.dirfd)
		g.dirfd = -1
	}
}

func (g *v2Dir) members() []int { return readPIDs(filepath.Join(g.path, "cgroup.procs")) }

// kill SIGKILLs every member. cgroup.kill does it atomically, including
// processes forked while it runs. Without it (before Linux 5.14) the cgroup
// is frozen first, so that no member can fork or exit while each is killed
// by PID, and thawed after: a frozen PID cannot be reused, so killing by
// number is safe.
func (g *v2Dir) kill() {
	if g.hasKill {
		if err := writeBytes(filepath.Join(g.path, "cgroup.kill"), []byte("1")); err == nil {
			return
		}
	}
	freeze := filepath.Join(g.path, "cgroup.freeze")
	if err := writeBytes(freeze, []byte("1")); err == nil {
		defer func() { _ = writeBytes(freeze, []byte("0")) }()
		g.waitEvent("frozen", "1", time.Second)
	}
	self := os.Getpid()
	for _, pid := range g.members() {
		if pid != self {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	}
}

// waitEvent waits up to timeout until cgroup.events says key is value.
// The kernel wakes pollers of cgroup.events (POLLPRI) on every change, so
// this blocks without a poll timer.
func (g *v2Dir) waitEvent(key, value string, timeout time.Duration) bool {
	fd, err := unix.Open(filepath.Join(g.path, "cgroup.events"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	want := []byte(key + " " + value + "\n")
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 512)
	for {
		n, err := unix.Pread(fd, buf, 0)
		if err != nil && err != unix.EINTR {
			return false
		}
		if n > 0 && (bytes.HasPrefix(buf[:n], want) || bytes.Contains(buf[:n], append([]byte{'\n'}, want...))) {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLPRI}}
		if _, err := unix.Poll(pfd, int(left/time.Millisecond)+1); err != nil && err != unix.EINTR {
			return false
		}
	}
}

func (g *v2Dir) waitEmpty(deadline time.Time) bool {
	return g.waitEvent("populated", "0", time.Until(deadline))
}

// usage reads the tree's CPU time from cpu.stat (kept for every cgroup v2,
// controller or not) and its peak memory from memory.peak (only there when
// the parent enables the memory controller for its children, Linux 5.19+).
func (g *v2Dir) usage() Usage {
	var u Usage
	if v, ok := readKeyed(filepath.Join(g.path, "cpu.stat"), "usage_usec"); ok {
		u.CPU, u.CPUOK = time.Duration(v)*time.Microsecond, true
	}
	if v, ok := readInt(filepath.Join(g.path, "memory.peak")); ok {
		u.Peak, u.PeakOK = v, true
	}
	return u
}

// oomKills returns memory.events oom_kill, counted by the memory
// controller for the cgroup and its descendants; ok is false without it.
func (g *v2Dir) oomKills() (int64, bool) {
	return readKeyed(filepath.Join(g.path, "memory.events"), "oom_kill")
}

// remove deletes the cgroup. rmdir fails with EBUSY while a member is still
// dying; it is retried as the cgroup empties, until deadline.
func (g *v2Dir) remove(deadline time.Time) error {
	for {
		err := unix.Rmdir(g.path)
		if err == nil || err == unix.ENOENT {
			return nil
		}
		if err != unix.EBUSY || time.Now().After(deadline) {
			return xerrors.Errorf("remove cgroup %q: %w", g.path, err)
		}
		if g.waitEvent("populated", "0", time.Until(deadline)) {
			// Empty but still busy: the kernel is finishing the last exit.
			// A short pause avoids spinning on rmdir.
			time.Sleep(time.Millisecond)
		}
	}
}

// v2Controller is the cgroup v2 controller that enforces each limit.
var v2Controller = map[string]string{"Limits.Memory": "memory", "Limits.Procs": "pids", "Limits.CPU": "cpu"}

// setLimits enables in the parent the controllers l needs and writes l into
// g. It is called before any process is in g.
//
// The parent passes a controller to its children only when it is listed in
// its cgroup.subtree_control; writing it there is idempotent, so concurrent
// Starts may race on it harmlessly. A controller the parent itself lacks
// (not in its cgroup.controllers) cannot be enabled from here: the cgroup
// above it has to, and on a host that still mounts cgroup v1 hierarchies
// the controller may be bound to one of those and so absent from v2
// altogether.
func (g *v2Dir) setLimits(l Limits) error {
	parent := filepath.Dir(g.path)
	avail := listFile(filepath.Join(parent, "cgroup.controllers"))
	enabled := listFile(filepath.Join(parent, "cgroup.subtree_control"))
	var add []string
	for _, field := range l.fields() {
		c := v2Controller[field]
		if !avail[c] {
			return xerrors.Errorf("%s needs the %s controller, which cgroup %q does not have (its cgroup.controllers lists %q; "+
				"the cgroup above it must enable %s in cgroup.subtree_control, and a cgroup v1 hierarchy may hold it instead): %w",
				field, c, parent, listNames(avail), c, errdefs.ErrUnsupported)
		}
		if !enabled[c] {
			add = append(add, "+"+c)
		}
	}
	if len(add) > 0 {
		if err := enableControllers(parent, add); err != nil {
			return err
		}
	}
	// With any limit the tree also becomes one CPU scheduling group where
	// the cpu controller is there to be had, even without Limits.CPU: a
	// fork bomb held at pids.max then competes with the host as one entity
	// of weight 100, not as dozens of busy processes. Best effort: without
	// the controller the other limits still hold.
	if l.CPU == 0 && avail["cpu"] && !enabled["cpu"] {
		_ = writeBytes(filepath.Join(parent, "cgroup.subtree_control"), []byte("+cpu"))
	}
	if l.Memory > 0 {
		if err := writeFile(g.path, "memory.max", strconv.FormatInt(l.Memory, 10)); err != nil {
			return err
		}
		// Without swap accounting (no memory.swap.max) the kernel cannot
		// hold swap to a limit; with it, the tree may not swap at all, so
		// that Memory is the tree's footprint and a hog ends in an OOM kill
		// rather than in the host thrashing.
		if exists(filepath.Join(g.path, "memory.swap.max")) {
			if err := writeFile(g.path, "memory.swap.max", "0"); err != nil {
				return err
			}
		}
		// One OOM kill ends the whole tree: a shell whose command was
		// killed would otherwise run on with half its work gone.
		if exists(filepath.Join(g.path, "memory.oom.group")) {
			if err := writeFile(g.path, "memory.oom.group", "1"); err != nil {
				return err
			}
		}
	}
	if l.Procs > 0 {
		if err := writeFile(g.path, "pids.max", strconv.Itoa(l.Procs)); err != nil {
			return err
		}
	}
	if l.CPU > 0 {
		if err := writeFile(g.path, "cpu.max", fmt.Sprintf("%d %d", cpuQuota(l.CPU), CPUPeriod)); err != nil {
			return err
		}
	}
	return nil
}

// enableControllers writes add ("+memory" ...) into dir's
// cgroup.subtree_control.
func enableControllers(dir string, add []string) error {
	file := filepath.Join(dir, "cgroup.subtree_control")
	err := writeBytes(file, []byte(strings.Join(add, " ")))
	if err == nil {
		return nil
	}
	why := err.Error()
	if errors.Is(err, unix.EBUSY) {
		// The no-internal-process rule: a non-root cgroup with member
		// processes cannot pass controllers on.
		why = "the cgroup has processes of its own, and cgroup v2 lets only a cgroup without member processes " +
			"enable controllers for its children; use a parent that holds no process"
	}
	return xerrors.Errorf("enable %s in %q: %s: %w", strings.Join(add, " "), file, why, errdefs.ErrUnsupported)
}

// CPUPeriod is the CPU quota period in microseconds (cpu.max, or
// cpu.cfs_period_us on v1): the kernel's default. Over each period the tree
// may run for CPU × CPUPeriod.
const CPUPeriod = 100_000

// minCPUQuota is the smallest quota the kernel accepts (1 ms).
const minCPUQuota = 1000

func cpuQuota(cores float64) int64 {
	return max(int64(math.Ceil(cores*CPUPeriod)), minCPUQuota)
}
