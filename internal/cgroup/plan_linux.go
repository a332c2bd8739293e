package cgroup

import (
	"fmt"
	"maps"
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
	// root is whether the host runs as root (euid 0): only root may use a
	// parent above its own cgroup.
	root bool
	// delegated is the v2 cgroup that the host moved out of (see
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
	return host{mounts: mounts(), own: own.m, self: os.Getpid(), root: os.Geteuid() == 0, delegated: own.delegated}
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
	v2Parent string
	// moveHost is set when v2Parent is the host's own cgroup, which holds
	// the host alone: New moves the host into v2Parent/agentproc-host first
	// (delegate), after which v2Parent may pass controllers on.
	moveHost   bool
	v2Optional bool // a controller-less v2 cgroup beside v1 ones
	v2Limits   Limits
	v1         []v1Place
	v1Limits   Limits
}

// remedy ends the "no cgroup v1 hierarchy can hold this limit" errors: the
// one step that would make it work, which for a root host is never to run
// as root.
func (h host) remedy() string {
	if h.root {
		return "name a writable parent cgroup with WithCgroup"
	}
	return "run the host under `systemd-run --user --scope -p Delegate=yes`, or name a writable parent cgroup with WithCgroup"
}

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
			p.v2Parent = h.v2Base(ownV2)
			return p, nil
		}
		availV2 := map[string]bool{}
		if ownV2 != "" {
			availV2 = listFile(filepath.Join(h.v2Base(ownV2), "cgroup.controllers"))
			if h.root {
				// A root host may go up to the top (see v2Default).
				maps.Copy(availV2, listFile(filepath.Join(v2m.point, "cgroup.controllers")))
			}
		}
		var v2fields []string
		for _, f := range fields {
			if availV2[v2Controller[f]] || (ownV2 != "" && !h.hasV1(v1For[f])) {
				// Where no v1 hierarchy has it either, v2Default names
				// what each v2 parent lacks.
				v2fields = append(v2fields, f)
			} else {
				v1fields = append(v1fields, f)
			}
		}
		if len(v2fields) > 0 {
			parent, move, err := h.v2Default(v2m.point, ownV2, v2fields)
			if err != nil {
				return p, err
			}
			p.v2Parent, p.moveHost, p.v2Limits = parent, move, s.Limits.only(v2fields)
		} else if base := h.v2Base(ownV2); ownV2 != "" && unix.Access(base, unix.W_OK|unix.X_OK) == nil {
			p.v2Parent, p.v2Optional = base, true
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
				f, ctl, h.v2Tried(v2m, ownV2, ctl), ctl, h.remedy(), errdefs.ErrUnsupported)
		}
		if slices.ContainsFunc(p.v1, func(v v1Place) bool { return v.m.point == m.point }) {
			continue
		}
		place := v1Place{m: *m, home: m.dirOf(h.own.v1[ctl])}
		if place.home == "" {
			return p, xerrors.Errorf("%s needs the %s controller: the cgroup v1 hierarchy at %s does not show the host's cgroup %q; %s: %w",
				f, ctl, m.point, h.own.v1[ctl], h.remedy(), errdefs.ErrUnsupported)
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
					f, ctl, h.v2Tried(v2m, ownV2, ctl), place.parent, err, h.remedy(), errdefs.ErrUnsupported)
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

// v2Default is the parent for limits whose controllers the cgroup v2
// hierarchy at top can give, tried in this order (docs/limits.md, "Which
// parent"):
//
//  1. the host's own cgroup, where it can pass the controllers on: the
//     root cgroup, one already enabling them, or the one the host has
//     moved out of (delegate);
//  2. the host's own cgroup when it offers the controllers, holds no
//     process but the host and is writable: move is then true, and New
//     moves the host into <own>/agentproc-host first (the systemd pattern
//     for a delegated cgroup);
//  3. as root, top, the top of the hierarchy the host sees (the root
//     cgroup, or in a container the cgroup namespace's root), where it
//     offers them and can pass them on;
//
// and otherwise ErrUnsupported naming what each step found and the one
// step that would make it work.
func (h host) v2Default(top, ownV2 string, fields []string) (parent string, move bool, err error) {
	var need []string
	for _, f := range fields {
		need = append(need, v2Controller[f])
	}
	base := h.v2Base(ownV2)
	var tried []string
	lacking := missing(listFile(filepath.Join(base, "cgroup.controllers")), need)
	if len(lacking) == 0 {
		if h.delegated != "" || isRootCgroup(base) || len(missing(listFile(filepath.Join(base, "cgroup.subtree_control")), need)) == 0 {
			return base, false, nil
		}
		why := occupiedBy(base, h.self)
		if why == "" {
			return base, true, nil
		}
		tried = append(tried, fmt.Sprintf("the host's cgroup %s offers %s but %s", base, strings.Join(need, ", "), why))
	} else {
		tried = append(tried, fmt.Sprintf("the host's cgroup %s lacks %s (its cgroup.controllers lists %q)",
			base, strings.Join(lacking, ", "), listNames(listFile(filepath.Join(base, "cgroup.controllers")))))
	}
	var step string
	switch {
	case !h.root:
		if len(lacking) == 0 {
			step = "run the host in a cgroup of its own that it may write (`systemd-run --user --scope -p Delegate=yes`), or name one with WithCgroup"
		} else {
			step = "run the host under `systemd-run --user --scope -p Delegate=yes`, which delegates a cgroup with the controllers, or name such a parent with WithCgroup"
		}
	case top == base && isRootCgroup(base):
		step = fmt.Sprintf("boot a kernel with %s in cgroup v2 (not disabled, nor bound to a cgroup v1 hierarchy), or name a parent with WithCgroup",
			strings.Join(lacking, ", "))
	case top == base:
		if len(lacking) == 0 {
			step = fmt.Sprintf("run the host in a cgroup of its own, with no other process in %s, or name a parent with WithCgroup", base)
		} else {
			step = fmt.Sprintf("have the cgroup above %s (the container's, on the host) enable %s in its cgroup.subtree_control",
				base, strings.Join(lacking, ", "))
		}
	default:
		topLacking := missing(listFile(filepath.Join(top, "cgroup.controllers")), need)
		switch {
		case len(topLacking) > 0:
			tried = append(tried, fmt.Sprintf("the top of the hierarchy %s lacks %s too", top, strings.Join(topLacking, ", ")))
			step = fmt.Sprintf("have the cgroup above %s (the container's, on the host) enable %s in its cgroup.subtree_control",
				top, strings.Join(topLacking, ", "))
		case isRootCgroup(top) || len(missing(listFile(filepath.Join(top, "cgroup.subtree_control")), need)) == 0:
			return top, false, nil
		default:
			if pids := readPIDs(filepath.Join(top, "cgroup.procs")); len(pids) == 0 {
				return top, false, nil
			}
			tried = append(tried, fmt.Sprintf("the top of the hierarchy %s holds processes, so cgroup v2 lets it pass no controller on", top))
			step = fmt.Sprintf("move the processes of %s into a child cgroup, or name a parent with WithCgroup", top)
		}
	}
	return "", false, xerrors.Errorf("%s: no cgroup v2 parent can give %s: %s; %s: %w",
		strings.Join(fields, ", "), strings.Join(need, ", "), strings.Join(tried, "; "), step, errdefs.ErrUnsupported)
}

// v2Base is the host's own v2 cgroup as a parent: the one it moved out of,
// if it did (see delegate).
func (h host) v2Base(ownV2 string) string {
	if h.delegated != "" {
		return h.delegated
	}
	return ownV2
}

// missing lists the controllers of need that set lacks.
func missing(set map[string]bool, need []string) []string {
	var out []string
	for _, c := range need {
		if !set[c] && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// isRootCgroup reports whether dir is the root of its cgroup v2 hierarchy,
// which may pass controllers on while it holds processes. A cgroup
// namespace's root reads as "/" in /proc/self/cgroup but is not: only a
// non-root cgroup has cgroup.type.
func isRootCgroup(dir string) bool { return !exists(filepath.Join(dir, "cgroup.type")) }

// occupiedBy says why the host cannot free its own cgroup dir of processes
// (delegate): another process in it, or no right to write it; "" when it
// can.
func occupiedBy(dir string, self int) string {
	for _, pid := range readPIDs(filepath.Join(dir, "cgroup.procs")) {
		if pid != self {
			return fmt.Sprintf("holds process %d besides the host, and cgroup v2 passes controllers on only from a cgroup without processes", pid)
		}
	}
	for _, f := range []string{"", "cgroup.subtree_control"} {
		if err := unix.Access(filepath.Join(dir, f), unix.W_OK); err != nil {
			return fmt.Sprintf("holds the host, which may not write %s (%v) to move itself into a child cgroup", filepath.Join(dir, f), err)
		}
	}
	return ""
}

// delegate applies the systemd pattern for a delegated cgroup that holds
// the host: it moves the host into <own>/agentproc-host, after which
// <own> holds no process and may enable controllers for its children. It
// refuses when <own> holds any process but the host. Trees made in <own>
// before are children of it, not members, so they do not stand in the way.
func delegate(ownV2 string, self int) (string, error) {
	own.Lock()
	defer own.Unlock()
	if own.delegated != "" {
		return own.delegated, nil
	}
	for _, pid := range readPIDs(filepath.Join(ownV2, "cgroup.procs")) {
		if pid != self {
			return "", xerrors.Errorf("the host's cgroup %s holds process %d besides the host, so the host "+
				"cannot make it free of processes; run the host in a cgroup of its own, or name a parent with WithCgroup: %w", ownV2, pid, errdefs.ErrUnsupported)
		}
	}
	leaf := filepath.Join(ownV2, "agentproc-host")
	if err := unix.Mkdir(leaf, 0o755); err != nil && err != unix.EEXIST {
		return "", xerrors.Errorf("create %s: %v: %w", leaf, err, errdefs.ErrUnsupported)
	}
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(fmt.Sprint(self)), 0); err != nil {
		return "", xerrors.Errorf("move the host into %s: %v: %w", leaf, err, errdefs.ErrUnsupported)
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

// CouldHaveMade reports whether New, on this host, could have made path as
// a tree's cgroup, so that a record naming it may be trusted with a kill
// and a removal: a real directory (not a symlink) owned by this user,
// directly under a parent plan may choose in the cgroup hierarchy that
// holds it (the top of the hierarchy, the host's own cgroup there or one
// above it, the host having maybe moved since, or named, WithCgroup's
// parent, "" for none, and in a v1 hierarchy its namesake), and neither
// the host's own cgroup nor one that holds it. The caller has checked the
// name.
func CouldHaveMade(path, named string) bool {
	var st unix.Stat_t
	if unix.Lstat(path, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != uint32(os.Geteuid()) {
		return false
	}
	h := currentHost()
	parent := filepath.Dir(path)
	namedRel, namedOK := "", false
	if named != "" && named != Auto {
		named = filepath.Clean(named)
		if m := h.mountOf(named); m != nil {
			rel, _ := filepath.Rel(m.point, named)
			namedRel, namedOK = filepath.Join(m.root, rel), true
		}
	}
	under := func(dir, p string) bool { return dir == p || strings.HasPrefix(dir, p+"/") }
	for _, m := range h.mounts {
		if !strings.HasPrefix(path, m.point+"/") {
			continue
		}
		own := ""
		switch {
		case m.v2 && h.own.hasV2:
			own = m.dirOf(h.own.v2)
		case !m.v2:
			own = m.dirOf(h.own.v1[m.controllers[0]])
		}
		if own != "" && under(own, path) {
			return false // the host's own cgroup, or one holding it
		}
		if parent == m.point || (own != "" && under(own, parent)) || parent == named ||
			(namedOK && !m.v2 && parent == m.dirOf(namedRel)) {
			return true
		}
	}
	return false
}
