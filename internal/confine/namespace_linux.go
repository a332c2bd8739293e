package confine

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/coder/quartz"
	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"

	"github.com/agentproc/agentproc/internal/osthread"
	"github.com/agentproc/agentproc/internal/procfs"
)

// MakeNetns makes a network namespace on a throwaway thread and returns a
// descriptor of it; up brings its loopback up.
func MakeNetns(up bool) (int, error) {
	fd := -1
	err := osthread.Throwaway(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return xerrors.Errorf("unshare: %w", err)
		}
		if up {
			if err := loopbackUp(); err != nil {
				return err
			}
		}
		var err error
		fd, err = unix.Open(procfs.ThreadSelfFile("ns/net"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		return err
	})
	return fd, err
}

// loopbackUp sets IFF_UP on lo in the calling thread's network namespace.
func loopbackUp() error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return xerrors.Errorf("loopback socket: %w", err)
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return xerrors.Errorf("lo flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
		return xerrors.Errorf("lo up: %w", err)
	}
	return nil
}

// MountSpec is what a policy's mount namespace is made of.
type MountSpec struct {
	Write, ReadOnly, Hide []string
	Empty                 string // the empty file hidden files are covered with
}

// MountView is a policy's mount namespace: a descriptor of it to join, and
// one of its mountinfo, which poll(2) reports as changed (POLLPRI) when a
// mount in it comes or goes. Both kinds of change unprotect a path: a
// mount the host makes later propagates in writable, and a cover whose
// path the host replaces (a rename over a hidden file, a .git removed and
// made again) is detached from this namespace too.
//
// Live is a second mountinfo of the namespace, for the live repair
// (MountWatch.Live), which takes it over: each descriptor reports a
// change once, so the Start-time check and the repair each need their own.
type MountView struct {
	NS, Events, Live int // -1: none
}

// MakeMountns makes the mount namespace of spec on a throwaway thread:
//
//   - every mount read-only (mount_setattr, recursive), so that nothing
//     outside Write changes, metadata included (chmod, chown, utimes,
//     xattrs, mknod): Landlock has no right for those;
//   - each of write a writable bind of itself (recursive), and each of
//     readOnly, inside write, a read-only bind of itself;
//   - each of hide covered, a directory by an empty read-only tmpfs of
//     mode 000, anything else by empty (an empty file of mode 000). A
//     symbolic link is left alone: its target is in hide too
//     (resolvePaths), and a mount would land on the target anyway. So is
//     a path reached through a link, here and in the live repair (a
//     tree's link is never followed): the policy lists each path
//     resolved as well.
//
// Device nodes stay usable on a read-only mount (the kernel checks the
// mount for regular files, directories and links only), so /dev/null and
// the pty of a TTY request still take writes. Mounts the host makes later
// propagate in (a slave of the host's), writable: the view's events tell
// the next Start to build the namespace again. A tree in it cannot undo a
// mount: it has no capabilities.
func MakeMountns(spec MountSpec) (MountView, error) {
	v := MountView{NS: -1, Events: -1, Live: -1}
	err := osthread.Throwaway(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			return xerrors.Errorf("unshare: %w", err)
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
			return xerrors.Errorf("make mounts slaves: %w", err)
		}
		// Mounts below a Write directory that the host made read-only stay
		// so: the writable binds below clear the flag on whole trees.
		hostRO, rerr := readOnlyMountsWithin(spec.Write)
		if rerr != nil {
			return rerr
		}
		if err := unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE,
			&unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
			return xerrors.Errorf("make every mount read-only: %w", err)
		}
		for _, p := range spec.Write {
			if _, err := os.Stat(p); err != nil {
				continue // nothing to grant
			}
			if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
				return xerrors.Errorf("bind %s: %w", p, err)
			}
			if err := unix.MountSetattr(unix.AT_FDCWD, p, unix.AT_RECURSIVE,
				&unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}); err != nil {
				return xerrors.Errorf("make %s writable: %w", p, err)
			}
		}
		for _, p := range hostRO {
			if err := unix.MountSetattr(unix.AT_FDCWD, p, 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
				return xerrors.Errorf("keep %s read-only: %w", p, err)
			}
		}
		// ReadOnly binds, then covers, each mounted onto a descriptor of
		// the path opened without following links, as the live repair does
		// (a ReadOnly path lies inside Write, where a tree of the policy's
		// last namespace may have put a link, or swap one in and out
		// while this runs).
		if _, _, err := coverNamespace(newCoverSet(spec)); err != nil {
			return err
		}
		// Every mount shared too (each still a slave of the host's): a
		// tree's own copy (PrivateTemp) is made a slave of these, so that
		// what the live repair mounts here reaches the trees already
		// running in copies, and nothing a copy mounts comes back.
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SHARED, ""); err != nil {
			return xerrors.Errorf("make mounts shared: %w", err)
		}
		var err error
		if v.NS, err = unix.Open(procfs.ThreadSelfFile("ns/mnt"), unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
			return err
		}
		// Opened last: they report the changes after these mounts.
		if v.Events, err = unix.Open(procfs.ThreadSelfFile("mountinfo"), unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
			return err
		}
		v.Live, err = unix.Open(procfs.ThreadSelfFile("mountinfo"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		v.Close()
		return MountView{NS: -1, Events: -1, Live: -1}, err
	}
	return v, nil
}

// readOnlyMountsWithin lists the mount points of the calling thread's
// namespace that lie within one of dirs (or are one) and are mounted
// read-only.
func readOnlyMountsWithin(dirs []string) ([]string, error) {
	data, err := os.ReadFile(procfs.ThreadSelfFile("mountinfo"))
	if err != nil {
		return nil, xerrors.Errorf("read mountinfo: %w", err)
	}
	var out []string
	procfs.ParseMountinfo(data, func(m procfs.Mount) {
		if m.ReadOnly() && slices.ContainsFunc(dirs, func(d string) bool { return within(m.Point, d) }) {
			out = append(out, m.Point)
		}
	})
	return out, nil
}

// Close closes v's descriptors.
func (v *MountView) Close() {
	for _, fd := range []*int{&v.NS, &v.Events, &v.Live} {
		if *fd >= 0 {
			_ = unix.Close(*fd)
			*fd = -1
		}
	}
}

// Changed reports whether a mount came or went in v since it was made or
// last asked (poll with no wait: one system call per Start).
func (v *MountView) Changed() bool {
	if v.Events < 0 {
		return false
	}
	fds := []unix.PollFd{{Fd: int32(v.Events), Events: unix.POLLPRI}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents&(unix.POLLPRI|unix.POLLERR) != 0
}

// MountWatch is what a built mount namespace was made from, to find out at
// each Start whether it still protects what its policy names: hiding and
// ReadOnly are rules, not a snapshot of the paths that existed at the
// first Start. A path that was covered is watched through the view's
// mount events, since replacing it detaches its cover. A path missing when
// the namespace was made could not be covered: the Manager's DirWatcher
// watches the nearest existing directory above each such path for the one
// name that matters there, so that each Start reads one inotify instance
// (a read that finds nothing) instead of looking up every missing path,
// which measured an order of magnitude dearer under WorkspaceSandbox
// (docs/measurements.md). Without inotify each Start looks up the missing
// paths.
type MountWatch struct {
	missing []string
	// links are the ReadOnly paths that were symbolic links when the
	// namespace was made: a link is never bound (nor followed), so a
	// directory or file put in its place later is unprotected as a
	// missing path is, and watched as one.
	links []string
	// hideLinks are the Hide paths that were symbolic links when the
	// namespace was made, with their targets then. A link is left
	// alone, its target resolved and covered by the policy; a link the
	// host points elsewhere later (/dev/log from one log daemon's socket
	// to another's) has a target nothing covers, so its name is watched
	// as a missing path's is, and the next Start builds afresh
	// (seventeenth attack review, TestAttackLogSocketsMadeLater); so is
	// each link such a link leads to in turn (linkChain).
	hideLinks []hideLink
	paths     []string    // every path of the spec, for the live repair to watch again
	dirs      *DirWatcher // nil: look up every missing path
	regs      []dirReg    // what dirs holds for w, dropped by close
	stale     atomic.Bool
	live      *liveView // the live repair's view (Live); guarded by dirs.mu
}

// hideLink is a hidden path that was a symbolic link, or a link its
// target led to, and its target.
type hideLink struct{ path, target string }

// maxLinkChain bounds how many links linkChain follows (the kernel's
// ELOOP limit, 40): a loop opens nothing, so it reaches nothing more.
const maxLinkChain = 40

// linkChain returns each symbolic link met in resolving p, a link, as
// the kernel does at an open (its directories' links, p, and the links
// its target leads to in turn, theirs too), each with its target then:
// the policy covers the name as written and the resolved target, so a
// link on the way that the host points elsewhere later (/dev/log to a
// stable name, or into a directory through a stable link, that the log
// daemon in charge points at its own) leaves the new target covered by
// nothing, and each link met is watched as p is (eighteenth attack
// review, TestAttackLogSocketLinkChain).
func linkChain(p string) []hideLink {
	var chain []hideLink
	done, rest, followed := "/", p, 0
	for rest != "" {
		var name string
		name, rest, _ = strings.Cut(rest, "/")
		switch name {
		case "", ".":
			continue
		case "..":
			done = filepath.Dir(done)
			continue
		}
		next := filepath.Join(done, name)
		var st unix.Stat_t
		if unix.Lstat(next, &st) != nil {
			break // nothing there to follow yet: the policy's missing path
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			done = next
			continue
		}
		target, err := os.Readlink(next)
		if followed++; err != nil || followed > maxLinkChain {
			break
		}
		chain = append(chain, hideLink{next, target})
		if filepath.IsAbs(target) {
			done = "/"
		}
		if rest != "" {
			target += "/" + rest
		}
		rest = target
	}
	return chain
}

// dirReg is one name watched for in one directory.
type dirReg struct {
	wd   int32
	name string
}

// DirWatcher is a Manager's one inotify instance, shared by its built
// policies (inotify's per-user limit on instances is 128 by default, and
// the host may need its own). Each watched directory reports a name
// appearing in it (created or renamed in) or itself going.
type DirWatcher struct {
	mu    sync.Mutex
	made  bool // ino has been made (or failed, or closed)
	ino   int  // -1: failed or closed
	names map[int32]map[string][]*MountWatch
	rep   *repairer    // the live repair (repair_linux.go); nil until its first view
	ended bool         // closed: no live repair starts again
	clock quartz.Clock // the repair's rate limit's; nil: the real one
	// afterPass, if not nil, is called after each live repair pass with
	// the mounts it made (tests).
	afterPass func(made int, err error)
	passes    atomic.Int64 // the live repair's passes (RepairPasses)
	// addWatch, if not nil, stands for inotify_add_watch (tests: a limit
	// reached).
	addWatch func(ino int, dir string, mask uint32) (int, error)
	// initInotify, if not nil, stands for inotify_init1 (tests: the
	// instances used up).
	initInotify func(flags int) (int, error)
}

const dirWatchEvents = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

// NewMountWatch lists what of spec's paths does not exist now
// and, with dirs, watches for it. It runs before the namespace is made: a
// path that appears in between is either covered by it or reported.
func NewMountWatch(spec MountSpec, dirs *DirWatcher) *MountWatch {
	w := &MountWatch{}
	// A Write directory made later must be bound writable too, or it would
	// stay read-only in the view.
	w.paths = slices.Concat(spec.ReadOnly, spec.Hide, spec.Write)
	for i, p := range w.paths {
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil {
			w.missing = append(w.missing, p)
		} else if i < len(spec.ReadOnly) && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			w.links = append(w.links, p)
		} else if i < len(spec.ReadOnly)+len(spec.Hide) && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			if _, err := os.Readlink(p); err == nil {
				w.hideLinks = append(w.hideLinks, linkChain(p)...)
			} else {
				w.missing = append(w.missing, p) // gone meanwhile: watched as missing
			}
		}
	}
	if dirs != nil && dirs.add(w) {
		w.dirs = dirs
	} else if dirs != nil {
		// No instance, or a directory it could not watch (ENOSPC: uid
		// 0's fs.inotify.max_user_watches, which a root tree shares with
		// the host and can use up while the policy is built): the next
		// Start builds afresh, which tries again, rather than keep a
		// namespace without live repair for the Manager's life
		// (eighteenth attack review, TestDirWatcherWatchRefusedOnce).
		w.stale.Store(true)
	}
	// A path made between the lookup above and its watch is looked up
	// once more by the namespace's making, which covers it.
	return w
}

// add watches the directories above w's missing paths and reports whether
// it could watch them all; if not, it holds nothing for w.
func (d *DirWatcher) add(w *MountWatch) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.made {
		initInotify := unix.InotifyInit1
		if d.initInotify != nil {
			initInotify = d.initInotify
		}
		ino, err := initInotify(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
		if err != nil {
			// Refused (EMFILE: the user's fs.inotify.max_user_instances,
			// 128, which a root tree shares with the host and can hold
			// all of): tried again at the next add. Kept, the refusal
			// took the live repair from every later namespace of the
			// Manager for its life, after the instances were let go
			// (seventeenth attack review, TestDirWatcherInstanceRefusedOnce;
			// the hide watch's the same, fifteenth).
			return false
		}
		d.made, d.ino = true, ino
		d.names = map[int32]map[string][]*MountWatch{}
	}
	if d.ino < 0 {
		return false
	}
	watched := slices.Concat(w.missing, w.links)
	for _, l := range w.hideLinks {
		watched = append(watched, l.path)
	}
	for _, p := range watched {
		if _, ok := d.watchLocked(w, p); !ok {
			d.dropLocked(w)
			return false
		}
	}
	return true
}

// watchLocked watches the nearest existing directory above p for the next
// component of p, for w, once, and reports whether it could; where it
// could not, dir is the directory it could not watch.
func (d *DirWatcher) watchLocked(w *MountWatch, p string) (dir string, ok bool) {
	dir, name := filepath.Dir(p), filepath.Base(p)
	add := unix.InotifyAddWatch
	if d.addWatch != nil {
		add = d.addWatch
	}
	for {
		wd, err := add(d.ino, dir, dirWatchEvents)
		if err == nil {
			r := dirReg{int32(wd), name}
			if d.names[r.wd] == nil {
				d.names[r.wd] = map[string][]*MountWatch{}
			}
			if !slices.Contains(d.names[r.wd][name], w) {
				d.names[r.wd][name] = append(d.names[r.wd][name], w)
				w.regs = append(w.regs, r)
			}
			return dir, true
		}
		if (err != unix.ENOENT && err != unix.ENOTDIR) || dir == "/" {
			return dir, false
		}
		dir, name = filepath.Dir(dir), filepath.Base(dir)
	}
}

// rewatch watches again, for each of w's paths missing now, the nearest
// existing directory above it for its next component: one whose directory
// above appeared is then watched one level deeper, one whose directory
// went one level higher. The live repair calls it before each pass, and
// watchMissing after it for what the pass found missing. It reports
// false, watching nothing, once w is closed (its live view dropped): the
// pass then has nothing to do. blind is what it could not watch.
func (d *DirWatcher) rewatch(w *MountWatch, lv *liveView) (blind []unwatched, ok bool) {
	var missing []string
	for _, p := range w.paths {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil ||
			(st.Mode&unix.S_IFMT == unix.S_IFLNK && slices.Contains(w.links, p)) {
			missing = append(missing, p)
		}
	}
	return d.watchMissing(w, lv, missing)
}

// unwatched is a missing path whose nearest existing directory could not
// be watched (inotify's per-user limit on watches reached: a tree running
// as the host's user can reach it).
type unwatched struct{ path, dir string }

// watchMissing watches the nearest existing directory above each of
// paths for w, and returns those it could not watch; false once w is
// closed.
func (d *DirWatcher) watchMissing(w *MountWatch, lv *liveView, paths []string) (blind []unwatched, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ino < 0 || w.live != lv {
		return nil, false
	}
	for _, p := range paths {
		if dir, ok := d.watchLocked(w, p); !ok {
			w.stale.Store(true) // not watched: the next Start builds afresh
			blind = append(blind, unwatched{p, dir})
		}
	}
	return blind, true
}

// dropLocked forgets w. The kernel's watches stay: another policy may
// share them, and they are few (one per directory).
func (d *DirWatcher) dropLocked(w *MountWatch) {
	for _, r := range w.regs {
		d.names[r.wd][r.name] = slices.DeleteFunc(d.names[r.wd][r.name], func(o *MountWatch) bool { return o == w })
	}
	w.regs = nil
}

// read drains the instance and marks stale every watch an event matters
// to, and its live view (if any) due for a repair pass; with poke (a
// Start's read, not the repair loop's own) it wakes the repair loop for
// them. The lock is held across the reads, which never block (the
// instance is non-blocking): a Start that finds the queue emptied by a
// concurrent Start must also find the verdict that Start reached.
func (d *DirWatcher) read(poke bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.made || d.ino < 0 {
		return
	}
	woke := false
	defer func() {
		if woke && poke && d.rep != nil {
			d.rep.poke()
		}
	}()
	mark := func(hit []*MountWatch) {
		for _, w := range hit {
			w.stale.Store(true)
			if w.live != nil {
				w.live.pending.Store(true)
				woke = true
			}
		}
	}
	overflow := ReadInotify(d.ino, func(mask uint32, wd int32, name string) {
		if mask&(unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 { // the directory went
			for _, ws := range d.names[wd] {
				mark(ws)
			}
			return
		}
		mark(d.names[wd][name])
	})
	if overflow { // events lost: any may matter
		for _, byName := range d.names {
			for _, ws := range byName {
				mark(ws)
			}
		}
	}
}

// Close ends the live repair and closes the instance (the Manager's
// Close).
func (d *DirWatcher) Close() {
	d.mu.Lock()
	r := d.rep
	d.rep, d.ended = nil, true
	d.mu.Unlock()
	if r != nil {
		r.stop() // without the lock: the loop takes it to read
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.made && d.ino >= 0 {
		_ = unix.Close(d.ino)
	}
	d.made, d.ino, d.names = true, -1, nil
}

// Close lets go of what w holds in its DirWatcher.
func (w *MountWatch) Close() {
	if w.dirs != nil {
		w.dirs.mu.Lock()
		if w.dirs.names != nil {
			w.dirs.dropLocked(w)
		}
		if w.live != nil {
			w.dirs.dropLiveLocked(w.live)
			w.live = nil
		}
		w.dirs.mu.Unlock()
		w.dirs = nil
	}
}

// Changed reports whether v no longer covers what w was made for: a mount
// event in v, or a path then missing that exists now or may (a directory
// above it appeared or went). Once it has said so it keeps saying so.
func (w *MountWatch) Changed(v *MountView) bool {
	if w.stale.Load() {
		return true
	}
	if v.Changed() {
		w.stale.Store(true)
		return true
	}
	if w.dirs != nil {
		w.dirs.read(true)
		return w.stale.Load()
	}
	for _, p := range w.missing {
		var st unix.Stat_t
		if unix.Lstat(p, &st) == nil {
			w.stale.Store(true)
			return true
		}
	}
	for _, p := range w.links {
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFLNK {
			w.stale.Store(true)
			return true
		}
	}
	for _, l := range w.hideLinks {
		if target, err := os.Readlink(l.path); err != nil || target != l.target {
			w.stale.Store(true)
			return true
		}
	}
	return false
}

// LinkedReadOnly is the ReadOnly paths that were symbolic links when the
// namespace was made, left alone (writes through one reach a target
// outside the writable directory): a tree may replace one with a
// directory, which the namespace then does not protect until the watch
// sees it (as a missing path made).
func (w *MountWatch) LinkedReadOnly() []string { return slices.Clone(w.links) }

// MissingReadOnly is the ReadOnly paths that did not exist when the
// namespace was made, which it cannot protect: a tree may create them.
func (w *MountWatch) MissingReadOnly(readOnly []string) []string {
	var out []string
	for _, p := range w.missing {
		if slices.Contains(readOnly, p) {
			out = append(out, p)
		}
	}
	return out
}

// PrivateTemp gives the calling thread, which is in a policy's mount
// namespace (EnterMountns) with CAP_SYS_ADMIN, a mount namespace of its
// own, a copy of that one, in which parent (the directory holding the
// temp dirs of every tree: the Manager's temp parent, or the one shared
// by the user's Managers) shows tmp, this tree's temp dir, and nothing
// else: parent is covered by an empty read-only tmpfs holding a writable
// bind of tmp at its path. Another tree's temp dir is then not
// there to read, write, list or chmod, as root or not (Landlock has no
// right for metadata, and the policy's namespace binds the whole parent
// writable, as its ruleset grants it, since both are built once per
// policy). tmp "" covers parent whole. tmp must lie below parent.
//
// It returns a descriptor of the new namespace. The copy costs a
// namespace per tree, made on the ready thread ahead of its Start where
// there is one; its unmaking (an RCU grace period to wait for) falls on
// whoever lets go of it last, which the caller, holding this descriptor
// past the tree's end, can make a goroutine of its own rather than the
// tree's last process, whose exit a Wait waits for.
func PrivateTemp(parent, tmp string) (int, error) {
	tree := -1
	if tmp != "" {
		if !within(tmp, parent) || tmp == parent {
			return -1, xerrors.Errorf("private temp dir %s is not in %s", tmp, parent)
		}
		// Taken from the policy's view, before parent is covered: a
		// detached copy of the mount at tmp, rooted at tmp.
		fd, err := unix.OpenTree(unix.AT_FDCWD, tmp, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_SYMLINK_NOFOLLOW)
		if err != nil {
			return -1, xerrors.Errorf("open tree %s: %w", tmp, err)
		}
		tree = fd
		defer unix.Close(tree)
	}
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return -1, xerrors.Errorf("unshare mount namespace for the temp dir: %w", err)
	}
	// Slaves of the policy's namespace, whose mounts are shared: the live
	// repair's covers there reach this copy, and the cover of parent
	// below stays in it.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return -1, xerrors.Errorf("make the temp dir's mounts slaves: %w", err)
	}
	if err := unix.Mount("tmpfs", parent, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,nr_inodes=4,mode=0711"); err != nil {
		return -1, xerrors.Errorf("cover %s: %w", parent, err)
	}
	if tree >= 0 {
		// The directories between parent and tmp, then tmp's mount point.
		at := parent
		for name := range strings.SplitSeq(tmp[len(parent)+1:], "/") {
			at = filepath.Join(at, name)
			if err := unix.Mkdir(at, 0o711); err != nil {
				return -1, xerrors.Errorf("mount point %s: %w", at, err)
			}
		}
		if err := unix.MoveMount(tree, "", unix.AT_FDCWD, tmp, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return -1, xerrors.Errorf("bind %s: %w", tmp, err)
		}
	}
	// The cover itself read-only (not recursive: the bind stays writable),
	// so that the tree cannot make names beside its own dir.
	if err := unix.MountSetattr(unix.AT_FDCWD, parent, 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return -1, xerrors.Errorf("make the cover of %s read-only: %w", parent, err)
	}
	ns, err := unix.Open(procfs.ThreadSelfFile("ns/mnt"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, xerrors.Errorf("open the temp dir's mount namespace: %w", err)
	}
	return ns, nil
}
