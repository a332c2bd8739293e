package cgroup

import (
	"os"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/agentproc/agentproc/internal/procfs"
)

// mount is one cgroup hierarchy mounted in this mount namespace, from a
// line of /proc/self/mountinfo.
type mount struct {
	point string // where it is mounted
	root  string // the cgroup the mount shows, relative to the hierarchy (and cgroup namespace) root
	v2    bool
	// controllers are the v1 controllers bound to the hierarchy, from the
	// superoptions ("rw,cpu,cpuacct" holds cpu and cpuacct); empty for v2
	// and for named hierarchies such as name=systemd.
	controllers []string
}

// readMounts lists the cgroup mounts in /proc/self/mountinfo. Where a
// hierarchy is mounted twice (a bind mount), the first mount whose root is
// the hierarchy's root comes first.
func readMounts() []mount {
	data, err := os.ReadFile(procfs.SelfFile("mountinfo"))
	if err != nil {
		return nil
	}
	var mounts []mount
	procfs.ParseMountinfo(data, func(pm procfs.Mount) {
		m := mount{root: pm.Root, point: pm.Point}
		switch pm.FSType {
		case "cgroup2":
			m.v2 = true
		case "cgroup":
			for _, opt := range strings.Split(pm.Super, ",") {
				if opt == "rw" || opt == "ro" || strings.Contains(opt, "=") || !v1Controller[opt] {
					continue
				}
				m.controllers = append(m.controllers, opt)
			}
			if len(m.controllers) == 0 {
				return // name=systemd and the like: no controller to use
			}
		default:
			return
		}
		mounts = append(mounts, m)
	})
	return mounts
}

// v1Controller lists the v1 controllers a superoptions field may name;
// anything else there (xattr, clone_children, noprefix, ...) is an option.
var v1Controller = map[string]bool{
	"blkio": true, "cpu": true, "cpuacct": true, "cpuset": true, "devices": true,
	"freezer": true, "hugetlb": true, "memory": true, "misc": true, "net_cls": true,
	"net_prio": true, "perf_event": true, "pids": true, "rdma": true,
}

// membership is what a /proc/.../cgroup file says: the cgroup path (as the
// reader's cgroup namespace sees it) per v1 controller, and the v2 path.
type membership struct {
	v1    map[string]string // controller -> path
	v2    string
	hasV2 bool
}

// readMembership parses /proc/self/cgroup, /proc/thread-self/cgroup or
// another such file.
func readMembership(file string) membership {
	ms := membership{v1: make(map[string]string)}
	data, err := os.ReadFile(file)
	if err != nil {
		return ms
	}
	for line := range strings.Lines(string(data)) {
		// hierarchy-ID:controller-list:path
		id, rest, ok := strings.Cut(strings.TrimRight(line, "\n"), ":")
		if !ok {
			continue
		}
		ctls, p, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		if id == "0" && ctls == "" {
			ms.v2, ms.hasV2 = p, true
			continue
		}
		for _, c := range strings.Split(ctls, ",") {
			if c != "" {
				ms.v1[c] = p
			}
		}
	}
	return ms
}

// dirOf turns a cgroup path as /proc/PID/cgroup gives it into a directory
// under m, or "" when m does not show that cgroup (a mount of a subtree that
// does not contain it).
func (m mount) dirOf(cgroupPath string) string {
	rel, ok := strings.CutPrefix(cgroupPath, m.root)
	if m.root == "/" {
		rel, ok = cgroupPath, true
	}
	if !ok || (rel != "" && !strings.HasPrefix(rel, "/")) {
		return ""
	}
	return path.Join(m.point, rel)
}

// has reports whether m binds controller c.
func (m mount) has(c string) bool {
	for _, x := range m.controllers {
		if x == c {
			return true
		}
	}
	return false
}

// NSDelegate reports whether cgroup2 is mounted with nsdelegate, which
// makes a cgroup namespace a delegation boundary: the kernel then refuses
// a move (clone3's CLONE_INTO_CGROUP, a write to cgroup.procs) from or to
// a cgroup outside the mover's namespace. cgroup2 has one superblock, so
// any of its mounts shows the flag. It is read once per process: the init
// system sets it at boot, and a remount after that is not seen.
func NSDelegate() bool { return nsDelegate() }

var nsDelegate = sync.OnceValue(func() bool {
	data, err := os.ReadFile(procfs.SelfFile("mountinfo"))
	if err != nil {
		return false
	}
	found := false
	procfs.ParseMountinfo(data, func(pm procfs.Mount) {
		if pm.FSType == "cgroup2" && slices.Contains(strings.Split(pm.Super, ","), "nsdelegate") {
			found = true
		}
	})
	return found
})
