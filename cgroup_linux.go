package agentproc

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
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
			parent, errors.ErrUnsupported)
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
