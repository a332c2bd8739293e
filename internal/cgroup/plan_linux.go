package cgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"

	"github.com/agentproc/agentproc/internal/errdefs"
	"github.com/agentproc/agentproc/internal/procfs"
)

// host is what plan needs to know of this machine: the cgroup mounts and
// the host process's own cgroups.
type host struct {
	mounts []mount
	own    membership
	self   int
	// delegated is the v2 cgroup that Auto freed of the host (see
	// delegate), "" until then.
	delegated string
}

// mounts is read once: hierarchies are mounted at boot.
var mounts = sync.OnceValue(readMounts)

// own caches the host's own cgroups, read from /proc/self/cgroup before
// any thread of the host is ever moved by EnterThread (so it is never
// seen inside a tree's cgroup); delegate updates it when it moves the
// host.
var own struct {
	sync.Mutex
	read      bool
	m         membership
	delegated string
}

func currentHost() host {
	own.Lock()
	defer own.Unlock()
	if !own.read {
		own.m, own.read = readMembership(procfs.SelfFile("cgroup")), true
	}
	return host{mounts: mounts(), own: own.m, self: os.Getpid(), delegated: own.delegated}
}

// v1Place is one v1 hierarchy a Group uses and the parent of its
// directory there.
type v1Place struct {
	m        mount
	parent   string
	optional bool   // only for accounting (cpuacct): skipped if it cannot be made
	mkdir    bool   // WithCgroup named the parent: create it if missing
	home     string // the host's own cgroup in the hierarchy
}

// planned is where New makes a Group's cgroups and which limits each holds.
type planned struct {
	v2Parent   string
	v2Optional bool // a controller-less v2 cgroup beside v1 ones
	v2Limits   Limits
	v1         []v1Place
	v1Limits   Limits
}

// remedy ends every "no cgroup can hold this limit" error.
const remedy = "run the host as root, or under `systemd-run --user --scope -p Delegate=yes` with WithCgroup(CgroupAuto), " +
	"or name a writable parent cgroup with WithCgroup"

// v1For maps each limit to the v1 controller that enforces it.
var v1For = map[string]string{"Limits.Memory": "memory", "Limits.Procs": "pids", "Limits.CPU": "cpu"}

// plan decides, without writing anything, where the cgroups of s go.
func plan(h host, s Spec) (planned, error) {
	var p planned
	fields := s.Limits.fields()
	v2m := h.v2Mount()
	ownV2 := ""
	if v2m != nil && h.own.hasV2 {
		ownV2 = v2m.dirOf(h.own.v2)
	}
	var v1fields []string
	var named *mount // the v1 hierarchy WithCgroup named
	namedRel := ""
	switch s.Parent {
	case "", Auto:
		if len(fields) == 0 {
			// WithCgroup(CgroupAuto) without limits: a cgroup for
			// containment alone, which any v2 cgroup gives.
			if ownV2 == "" {
				return p, xerrors.Errorf("WithCgroup(CgroupAuto): no cgroup v2 hierarchy shows the host's cgroup: %w", errdefs.ErrUnsupported)
			}
			p.v2Parent = h.autoParent(ownV2)
			return p, nil
		}
		availV2 := map[string]bool{}
		if ownV2 != "" {
			availV2 = listFile(filepath.Join(ownV2, "cgroup.controllers"))
		}
		var v2fields []string
		for _, f := range fields {
			if availV2[v2Controller[f]] {
				v2fields = append(v2fields, f)
			} else {
				v1fields = append(v1fields, f)
			}
		}
		if len(v2fields) > 0 {
			parent, err := h.v2Default(ownV2, v2fields, s.Parent == Auto)
			if err != nil {
				return p, err
			}
			p.v2Parent, p.v2Limits = parent, s.Limits.only(v2fields)
		} else if ownV2 != "" && unix.Access(ownV2, unix.W_OK|unix.X_OK) == nil {
			p.v2Parent, p.v2Optional = ownV2, true
		}
	default:
		parent := s.Parent
		if !filepath.IsAbs(parent) {
			return p, xerrors.Errorf("cgroup parent %q is not an absolute path: %w", parent, errdefs.ErrInvalidRequest)
		}
		where := h.describeMounts()
		var fs unix.Statfs_t
		if err := unix.Statfs(parent, &fs); err != nil {
			return p, xerrors.Errorf("cgroup parent %q: %v (%s): %w", parent, err, where, errdefs.ErrInvalidRequest)
		}
		switch fs.Type {
		case unix.CGROUP2_SUPER_MAGIC:
			p.v2Parent = parent
			avail := listFile(filepath.Join(parent, "cgroup.controllers"))
			var v2fields []string
			for _, f := range fields {
				if avail[v2Controller[f]] || !h.hasV1(v1For[f]) {
					// Where no v1 hierarchy has it either, setLimits
					// names what the parent lacks.
					v2fields = append(v2fields, f)
				} else {
					v1fields = append(v1fields, f)
				}
			}
			p.v2Limits = s.Limits.only(v2fields)
		case unix.CGROUP_SUPER_MAGIC:
			m := h.mountOf(parent)
			if m == nil {
				return p, xerrors.Errorf("cgroup parent %q is in no cgroup v1 hierarchy of /proc/self/mountinfo (%s): %w",
					parent, where, errdefs.ErrInvalidRequest)
			}
			named = m
			rel, _ := filepath.Rel(m.point, parent)
			namedRel = filepath.Join(m.root, rel)
			v1fields = fields
			if len(fields) == 0 {
				home := m.dirOf(h.own.v1[m.controllers[0]])
				if home == "" {
					return p, xerrors.Errorf("cgroup parent %q: its cgroup v1 hierarchy does not show the host's cgroup: %w", parent, errdefs.ErrUnsupported)
				}
				p.v1 = append(p.v1, v1Place{m: *m, parent: parent, home: home})
			}
			if ownV2 != "" && unix.Access(ownV2, unix.W_OK|unix.X_OK) == nil {
				p.v2Parent, p.v2Optional = ownV2, true
			}
		default:
			return p, xerrors.Errorf("cgroup parent %q is not in a cgroup hierarchy (%s): %w", parent, where, errdefs.ErrInvalidRequest)
		}
	}
	p.v1Limits = s.Limits.only(v1fields)
	for _, f := range v1fields {
		ctl := v1For[f]
		m := h.v1Mount(ctl)
		if m == nil {
			return p, xerrors.Errorf("%s needs the %s controller: %s, and no cgroup v1 hierarchy binds %s; %s: %w",
				f, ctl, h.v2Tried(v2m, ownV2, ctl), ctl, remedy, errdefs.ErrUnsupported)
		}
		if slices.ContainsFunc(p.v1, func(v v1Place) bool { return v.m.point == m.point }) {
			continue
		}
		place := v1Place{m: *m, home: m.dirOf(h.own.v1[ctl])}
		if place.home == "" {
			return p, xerrors.Errorf("%s needs the %s controller: the cgroup v1 hierarchy at %s does not show the host's cgroup %q; %s: %w",
				f, ctl, m.point, h.own.v1[ctl], remedy, errdefs.ErrUnsupported)
		}
		if named != nil {
			place.parent, place.mkdir = m.dirOf(namedRel), true
			if m.point == named.point {
				place.mkdir = false
			}
		} else {
			place.parent = place.home
			if err := unix.Access(place.parent, unix.W_OK|unix.X_OK); err != nil {
				return p, xerrors.Errorf("%s needs the %s controller: %s, and the host's cgroup %s in the cgroup v1 hierarchy is not writable (%v); %s: %w",
					f, ctl, h.v2Tried(v2m, ownV2, ctl), place.parent, err, remedy, errdefs.ErrUnsupported)
			}
		}
		p.v1 = append(p.v1, place)
	}
	// On a pure v1 host the tree's CPU time comes from cpuacct, which
	// some hosts mount apart from cpu.
	if len(p.v1) > 0 && p.v2Parent == "" {
		if m := h.v1Mount("cpuacct"); m != nil && !slices.ContainsFunc(p.v1, func(v v1Place) bool { return v.m.point == m.point }) {
			place := v1Place{m: *m, optional: true, home: m.dirOf(h.own.v1["cpuacct"])}
			if named != nil {
				place.parent, place.mkdir = m.dirOf(namedRel), true
			} else {
				place.parent = place.home
			}
			if place.parent != "" && place.home != "" {
				p.v1 = append(p.v1, place)
			}
		}
	}
	return p, nil
}

// v2Default is the parent for limits whose controllers the host's own v2
// cgroup has: that cgroup itself, where it can pass them on (the root
// cgroup, or one already enabling them); with auto, after moving the host
// out of it (delegate). The library never goes above the host's cgroup.
func (h host) v2Default(ownV2 string, fields []string, auto bool) (string, error) {
	if h.delegated != "" {
		return h.delegated, nil
	}
	enabled := listFile(filepath.Join(ownV2, "cgroup.subtree_control"))
	var missing []string
	for _, f := range fields {
		if !enabled[v2Controller[f]] {
			missing = append(missing, v2Controller[f])
		}
	}
	if len(missing) == 0 || h.own.v2 == "/" {
		return ownV2, nil
	}
	if auto {
		return delegate(ownV2, h.self)
	}
	return "", xerrors.Errorf("%s: the host's own cgroup %s has the %s controller but holds the host itself, "+
		"and cgroup v2 passes controllers on only from a cgroup without processes; use WithCgroup(CgroupAuto) "+
		"where that cgroup is delegated to the host (it moves the host into %s/agentproc-host), or %s: %w",
		strings.Join(fields, ", "), ownV2, strings.Join(missing, ", "), ownV2, remedy, errdefs.ErrUnsupported)
}

// autoParent is where a limitless WithCgroup(CgroupAuto) tree goes.
func (h host) autoParent(ownV2 string) string {
	if h.delegated != "" {
		return h.delegated
	}
	return ownV2
}

// delegate applies the systemd pattern for a delegated cgroup that holds
// the host: it moves the host into <own>/agentproc-host, after which
// <own> holds no process and may enable controllers for its children. It
// refuses when <own> holds any process but the host.
func delegate(ownV2 string, self int) (string, error) {
	own.Lock()
	defer own.Unlock()
	if own.delegated != "" {
		return own.delegated, nil
	}
	for _, pid := range readPIDs(filepath.Join(ownV2, "cgroup.procs")) {
		if pid != self {
			return "", xerrors.Errorf("WithCgroup(CgroupAuto): the host's cgroup %s holds process %d besides the host, so the host "+
				"cannot make it free of processes; run the host in a cgroup of its own (%s): %w", ownV2, pid, remedy, errdefs.ErrUnsupported)
		}
	}
	leaf := filepath.Join(ownV2, "agentproc-host")
	if err := unix.Mkdir(leaf, 0o755); err != nil && err != unix.EEXIST {
		return "", xerrors.Errorf("WithCgroup(CgroupAuto): create %s: %v: %w", leaf, err, errdefs.ErrUnsupported)
	}
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(fmt.Sprint(self)), 0); err != nil {
		return "", xerrors.Errorf("WithCgroup(CgroupAuto): move the host into %s: %v: %w", leaf, err, errdefs.ErrUnsupported)
	}
	own.m.v2 = strings.TrimSuffix(own.m.v2, "/") + "/agentproc-host"
	own.delegated = ownV2
	return ownV2, nil
}

// only returns l with just the fields named kept.
func (l Limits) only(fields []string) Limits {
	var out Limits
	for _, f := range fields {
		switch f {
		case "Limits.Memory":
			out.Memory = l.Memory
		case "Limits.Procs":
			out.Procs = l.Procs
		case "Limits.CPU":
			out.CPU = l.CPU
		}
	}
	return out
}

// v2Mount is the cgroup v2 mount that shows the host's own cgroup.
func (h host) v2Mount() *mount {
	for i, m := range h.mounts {
		if m.v2 && (!h.own.hasV2 || m.dirOf(h.own.v2) != "") {
			return &h.mounts[i]
		}
	}
	return nil
}

// v1Mount is the mount of the v1 hierarchy that binds ctl and shows the
// host's own cgroup in it.
func (h host) v1Mount(ctl string) *mount {
	for i, m := range h.mounts {
		if !m.v2 && m.has(ctl) && m.dirOf(h.own.v1[ctl]) != "" {
			return &h.mounts[i]
		}
	}
	return nil
}

func (h host) hasV1(ctl string) bool { return h.v1Mount(ctl) != nil }

// mountOf is the v1 mount whose mount point holds path (the longest).
func (h host) mountOf(path string) *mount {
	var best *mount
	for i, m := range h.mounts {
		if m.v2 || (path != m.point && !strings.HasPrefix(path, m.point+"/")) {
			continue
		}
		if best == nil || len(m.point) > len(best.point) {
			best = &h.mounts[i]
		}
	}
	return best
}

// v2Tried says what the v2 hierarchy offered for ctl.
func (h host) v2Tried(v2m *mount, ownV2, ctl string) string {
	if v2m == nil {
		return "no cgroup v2 hierarchy is mounted"
	}
	if ownV2 == "" {
		return fmt.Sprintf("the cgroup v2 hierarchy at %s does not show the host's cgroup", v2m.point)
	}
	return fmt.Sprintf("the host's cgroup v2 %s lacks it (its cgroup.controllers lists %q)",
		ownV2, listNames(listFile(filepath.Join(ownV2, "cgroup.controllers"))))
}

// describeMounts names the cgroup mounts for an error message.
func (h host) describeMounts() string {
	var v2, v1 []string
	for _, m := range h.mounts {
		if m.v2 {
			v2 = append(v2, m.point)
		} else {
			v1 = append(v1, m.point)
		}
	}
	switch {
	case len(v2) == 0 && len(v1) == 0:
		return "no cgroup hierarchy is mounted (none in /proc/self/mountinfo)"
	case len(v1) == 0:
		return "cgroup v2 is mounted at " + strings.Join(v2, ", ")
	case len(v2) == 0:
		return "cgroup v1 hierarchies are mounted at " + strings.Join(v1, ", ")
	}
	return "cgroup v2 is mounted at " + strings.Join(v2, ", ") + ", cgroup v1 hierarchies at " + strings.Join(v1, ", ")
}
