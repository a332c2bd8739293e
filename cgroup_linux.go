package agentproc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// cgroup is the cgroup v2 directory one process tree runs in. Every
// descendant is born inside it and only a process with write access to
// another cgroup can leave it, so it holds the whole tree even when the
// environment marker is gone.
type cgroup struct {
	path    string
	dirfd   int  // open from creation until the leader has started, else -1
	hasKill bool // cgroup.kill exists (Linux 5.14+)
}

// cgroupRemoveWait bounds how long removing a cgroup waits for its last
// members to finish dying.
const cgroupRemoveWait = 2 * time.Second

// cgroup2Mounts returns the mount points of the cgroup v2 hierarchy listed
// in /proc/self/mountinfo: /sys/fs/cgroup on unified hosts,
// /sys/fs/cgroup/unified on hybrid ones, anything elsewhere.
func cgroup2Mounts() []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID parent major:minor root mountpoint options [optional...] - fstype source superoptions
		left, right, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		fields, after := strings.Fields(left), strings.Fields(right)
		if len(fields) >= 5 && len(after) >= 1 && after[0] == "cgroup2" {
			mounts = append(mounts, unescapeMountinfo(fields[4]))
		}
	}
	return mounts
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) that
// mountinfo uses in paths.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// newCgroup checks that parent is a writable cgroup v2 directory and
// creates the child cgroup "agentproc-<id>" in it. It never falls back to
// weaker containment: every problem is an error that names the path and
// what is missing.
func newCgroup(parent, id string) (*cgroup, error) {
	if !filepath.IsAbs(parent) {
		return nil, xerrors.Errorf("cgroup parent %q is not an absolute path: %w", parent, ErrInvalidRequest)
	}
	mounts := cgroup2Mounts()
	if len(mounts) == 0 {
		return nil, xerrors.Errorf("cgroup parent %q: no cgroup v2 hierarchy is mounted (none in /proc/self/mountinfo): %w",
			parent, ErrUnsupported)
	}
	where := "cgroup v2 is mounted at " + strings.Join(mounts, ", ")
	var fs unix.Statfs_t
	if err := unix.Statfs(parent, &fs); err != nil {
		return nil, xerrors.Errorf("cgroup parent %q: %v (%s): %w", parent, err, where, ErrInvalidRequest)
	}
	if fs.Type != unix.CGROUP2_SUPER_MAGIC {
		return nil, xerrors.Errorf("cgroup parent %q is not in a cgroup v2 hierarchy (%s): %w", parent, where, ErrInvalidRequest)
	}
	if st, err := os.Stat(parent); err != nil || !st.IsDir() {
		return nil, xerrors.Errorf("cgroup parent %q is not a cgroup directory: %w", parent, ErrInvalidRequest)
	}
	if err := unix.Access(parent, unix.W_OK|unix.X_OK); err != nil {
		return nil, xerrors.Errorf("cgroup parent %q is not writable, so no child cgroup can be created in it (%v): %w",
			parent, err, ErrInvalidRequest)
	}
	path := filepath.Join(parent, "agentproc-"+id)
	if err := unix.Mkdir(path, 0o755); err != nil {
		return nil, xerrors.Errorf("create cgroup %q: %w", path, err)
	}
	g := &cgroup{path: path, dirfd: -1}
	if err := unix.Access(filepath.Join(path, "cgroup.procs"), unix.W_OK); err != nil {
		g.remove()
		return nil, xerrors.Errorf("cgroup %q: cgroup.procs is not writable, so no process can be started in it (%v): %w",
			path, err, ErrInvalidRequest)
	}
	fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		g.remove()
		return nil, xerrors.Errorf("open cgroup %q: %w", path, err)
	}
	g.dirfd = fd
	_, err = os.Stat(filepath.Join(path, "cgroup.kill"))
	g.hasKill = err == nil
	return g, nil
}

// closeDir closes the directory fd once the leader has been cloned into
// the cgroup; nothing else needs it.
func (g *cgroup) closeDir() {
	if g.dirfd >= 0 {
		_ = unix.Close(g.dirfd)
		g.dirfd = -1
	}
}

// members returns the PIDs in cgroup.procs.
func (g *cgroup) members() []int {
	data, err := os.ReadFile(filepath.Join(g.path, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for line := range strings.Lines(string(data)) {
		if pid, err := strconv.Atoi(strings.TrimSpace(line)); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// kill SIGKILLs every member. cgroup.kill does it atomically, including
// processes forked while it runs. Without it (before Linux 5.14) the cgroup
// is frozen first, so that no member can fork or exit while each is killed
// by PID, and thawed after: a frozen PID cannot be reused, so killing by
// number is safe.
func (g *cgroup) kill() {
	if g.hasKill {
		if err := os.WriteFile(filepath.Join(g.path, "cgroup.kill"), []byte("1"), 0); err == nil {
			return
		}
	}
	freeze := filepath.Join(g.path, "cgroup.freeze")
	if err := os.WriteFile(freeze, []byte("1"), 0); err == nil {
		defer func() { _ = os.WriteFile(freeze, []byte("0"), 0) }()
		g.waitEvent("frozen", "1", time.Second)
	}
	for _, pid := range g.members() {
		_ = unix.Kill(pid, unix.SIGKILL)
	}
}

// waitEvent waits up to timeout until cgroup.events says key is value.
// The kernel wakes pollers of cgroup.events (POLLPRI) on every change, so
// this blocks without a poll timer.
func (g *cgroup) waitEvent(key, value string, timeout time.Duration) bool {
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

// usage returns the tree's CPU time from cpu.stat (kept for every cgroup
// v2, controller or not) and its peak memory from memory.peak (only there
// when the parent enables the memory controller for its children, Linux
// 5.19+). Each ok is false when the value is unknown.
func (g *cgroup) usage() (cpu time.Duration, cpuOK bool, peak int64, peakOK bool) {
	if data, err := os.ReadFile(filepath.Join(g.path, "cpu.stat")); err == nil {
		for line := range strings.Lines(string(data)) {
			if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
				if us, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
					cpu, cpuOK = time.Duration(us)*time.Microsecond, true
				}
			}
		}
	}
	if data, err := os.ReadFile(filepath.Join(g.path, "memory.peak")); err == nil {
		if b, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64); err == nil {
			peak, peakOK = b, true
		}
	}
	return cpu, cpuOK, peak, peakOK
}

// remove deletes the cgroup. rmdir fails with EBUSY while a member is still
// dying; it is retried as the cgroup empties, for at most cgroupRemoveWait.
func (g *cgroup) remove() error {
	g.closeDir()
	deadline := time.Now().Add(cgroupRemoveWait)
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

// cpuPeriod is the cpu.max period in microseconds: the kernel's default.
// Over each period the tree may run for CPU × cpuPeriod.
const cpuPeriod = 100_000

// minCPUQuota is the smallest quota the kernel accepts (1 ms).
const minCPUQuota = 1000

// limitControllers lists, for each field of l that is set, the cgroup v2
// controller that enforces it.
func limitControllers(l Limits) []struct{ field, controller string } {
	var need []struct{ field, controller string }
	if l.Memory > 0 {
		need = append(need, struct{ field, controller string }{"Limits.Memory", "memory"})
	}
	if l.Procs > 0 {
		need = append(need, struct{ field, controller string }{"Limits.Procs", "pids"})
	}
	if l.CPU > 0 {
		need = append(need, struct{ field, controller string }{"Limits.CPU", "cpu"})
	}
	return need
}

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
func (g *cgroup) setLimits(l Limits) error {
	parent := filepath.Dir(g.path)
	avail := cgroupList(filepath.Join(parent, "cgroup.controllers"))
	enabled := cgroupList(filepath.Join(parent, "cgroup.subtree_control"))
	var add []string
	for _, n := range limitControllers(l) {
		if !avail[n.controller] {
			return xerrors.Errorf("%s needs the %s controller, which cgroup %q does not have (its cgroup.controllers lists %q; "+
				"the cgroup above it must enable %s in cgroup.subtree_control, and a cgroup v1 hierarchy may hold it instead): %w",
				n.field, n.controller, parent, listNames(avail), n.controller, ErrUnsupported)
		}
		if !enabled[n.controller] {
			add = append(add, "+"+n.controller)
		}
	}
	if len(add) > 0 {
		err := os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte(strings.Join(add, " ")), 0)
		if err != nil {
			why := err.Error()
			if errors.Is(err, unix.EBUSY) {
				// The no-internal-process rule: a non-root cgroup with
				// member processes cannot pass controllers on.
				why = "the cgroup has processes of its own, and cgroup v2 lets only a cgroup without member processes " +
					"enable controllers for its children; use a parent that holds no process"
			}
			return xerrors.Errorf("enable %s in %q: %s: %w",
				strings.Join(add, " "), filepath.Join(parent, "cgroup.subtree_control"), why, ErrUnsupported)
		}
	}
	// With any limit the tree also becomes one CPU scheduling group where
	// the cpu controller is there to be had, even without Limits.CPU: a
	// fork bomb held at pids.max then competes with the host as one entity
	// of weight 100, not as dozens of busy processes. Best effort: without
	// the controller the other limits still hold.
	if l.CPU == 0 && avail["cpu"] && !enabled["cpu"] {
		_ = os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+cpu"), 0)
	}
	write := func(file, value string) error {
		if err := os.WriteFile(filepath.Join(g.path, file), []byte(value), 0); err != nil {
			return xerrors.Errorf("set %s of cgroup %q to %s: %w", file, g.path, value, err)
		}
		return nil
	}
	if l.Memory > 0 {
		if err := write("memory.max", strconv.FormatInt(l.Memory, 10)); err != nil {
			return err
		}
		// Without swap accounting (no memory.swap.max) the kernel cannot
		// hold swap to a limit; with it, the tree may not swap at all, so
		// that Memory is the tree's footprint and a hog ends in an OOM kill
		// rather than in the host thrashing.
		if g.has("memory.swap.max") {
			if err := write("memory.swap.max", "0"); err != nil {
				return err
			}
		}
		// One OOM kill ends the whole tree: a shell whose command was
		// killed would otherwise run on with half its work gone.
		if g.has("memory.oom.group") {
			if err := write("memory.oom.group", "1"); err != nil {
				return err
			}
		}
	}
	if l.Procs > 0 {
		if err := write("pids.max", strconv.Itoa(l.Procs)); err != nil {
			return err
		}
	}
	if l.CPU > 0 {
		quota := max(int64(math.Ceil(l.CPU*cpuPeriod)), minCPUQuota)
		if err := write("cpu.max", fmt.Sprintf("%d %d", quota, cpuPeriod)); err != nil {
			return err
		}
	}
	return nil
}

// has reports whether g has the interface file name.
func (g *cgroup) has(name string) bool {
	_, err := os.Stat(filepath.Join(g.path, name))
	return err == nil
}

// oomKills returns how many processes of g the kernel's OOM killer has
// killed (memory.events oom_kill, counted by the memory controller for the
// cgroup and its descendants). ok is false without the memory controller,
// when the kernel does not count them for g.
func (g *cgroup) oomKills() (n int64, ok bool) {
	data, err := os.ReadFile(filepath.Join(g.path, "memory.events"))
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(data)) {
		if v, found := strings.CutPrefix(line, "oom_kill "); found {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// cgroupList reads a space-separated cgroup list file such as
// cgroup.controllers; a missing file is an empty list.
func cgroupList(path string) map[string]bool {
	set := make(map[string]bool)
	if data, err := os.ReadFile(path); err == nil {
		for _, f := range strings.Fields(string(data)) {
			set[f] = true
		}
	}
	return set
}

// listNames renders a set as a sorted space-separated list.
func listNames(set map[string]bool) string {
	return strings.Join(slices.Sorted(maps.Keys(set)), " ")
}
