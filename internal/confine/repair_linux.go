package confine

import (
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/quartz"
	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"

	"github.com/agentproc/agentproc/internal/osthread"
	"github.com/agentproc/agentproc/internal/procfs"
)

// The live repair of a policy's mount namespace. The check at each Start
// (MountWatch.Changed) protects the trees started after a change; a tree
// already running in the namespace would still see a hidden file the host
// makes, or replaces by a rename (which detaches its cover), while it runs.
// So a goroutine per DirWatcher (per Manager) waits on the DirWatcher's
// inotify instance and on a mountinfo descriptor of each live namespace,
// all in one epoll instance (no timer, no polling), and on an event
// covers what is bare in that namespace at once, on a throwaway thread
// that joins it (enterNamespace, coverNamespace). The Start-time check
// stays as the backstop: it sees the same events on its own descriptors
// and builds the policy afresh for the next Start.
//
// A tree may race the repair wherever it can write: a read-only path lies
// inside Write (.git), and a hidden path may lie in another policy's
// Write. So the repair never
// mounts by a path: it opens each path in the namespace without following
// any symbolic link (openat2, RESOLVE_NO_SYMLINKS, O_PATH|O_NOFOLLOW),
// checks what it opened, and mounts onto that descriptor with the new
// mount API (open_tree or fsmount, then move_mount with
// MOVE_MOUNT_T_EMPTY_PATH): a link put in place before the open is
// refused, and a rename after it moves the dentry the mount lands on, not
// the mount. A tree can also make events in a loop (a name made and
// removed in a watched directory of Write): events that arrive during a
// pass are coalesced into the next one, and passes are rate limited
// (repairRate, repairBurst), so that a tree cannot spend more than a few
// per cent of one of the host's cores on its repairs.

// Repair rate limit: a token bucket of repairBurst passes, refilled at
// repairRate per second. A pass costs a thread, a setns and a few system
// calls per path: about half a millisecond here, from the event to the
// covers, with WorkspaceSandbox's paths (docs/measurements.md).
const (
	repairBurst = 16
	repairRate  = 64
)

// RepairPasses reports how many live repair passes d's repairer ran.
func (d *DirWatcher) RepairPasses() int64 { return d.passes.Load() }

// liveView is a namespace the repairer keeps covered: its own descriptors
// (a duplicate of the namespace's, and a mountinfo of its own, so that
// its poll does not take the Start-time check's events), and what to cover.
type liveView struct {
	key      uint64
	w        *MountWatch
	ns, info int
	covers   *coverSet
	pending  atomic.Bool // an event matters to it: the loop runs a pass
	retries  int         // passes run again in a row for a path gone or found (the loop's)
}

// maxRetries bounds the passes run again in a row for one view without an
// event: past it the view is left to the Start-time check (stale).
const maxRetries = 8

// coverSet is what coverNamespace covers.
type coverSet struct {
	hide     []string // covered: a directory by an empty tmpfs, else by empty; parents first
	readOnly []string
	// pin is each directory between a Write directory and a ReadOnly path
	// in it, parents first: each is made a mount point (a bind of
	// itself), which a tree cannot rename or remove. A read-only bind
	// moves with its directory, so a tree that renamed ws/repo away
	// made ws/repo/.git again, writable (TestAttackReadOnlyParentRenamed).
	pin      []string
	write    []string // never covered, nor a directory above one (withBlind)
	empty    string
	emptyID  fileID // empty's; zero if it could not be found (then no file is covered)
	emptyErr error
}

// newCoverSet returns spec's coverSet.
func newCoverSet(spec MountSpec) *coverSet {
	cs := &coverSet{hide: slices.Clone(spec.Hide), readOnly: slices.Clone(spec.ReadOnly), write: spec.Write, empty: spec.Empty}
	// Parents before their children: a child of a directory covered
	// first is hidden by that cover already (and found missing).
	slices.SortStableFunc(cs.hide, func(a, b string) int { return len(a) - len(b) })
	for _, r := range spec.ReadOnly {
		top := ""
		for _, w := range spec.Write {
			if r != w && within(r, w) && len(w) > len(top) {
				top = w
			}
		}
		if top == "" {
			continue
		}
		for d := filepath.Dir(r); d != top && within(d, top); d = filepath.Dir(d) {
			if !slices.Contains(cs.pin, d) {
				cs.pin = append(cs.pin, d)
			}
		}
	}
	slices.SortStableFunc(cs.pin, func(a, b string) int { return len(a) - len(b) })
	var st unix.Stat_t
	if cs.emptyErr = unix.Stat(spec.Empty, &st); cs.emptyErr == nil {
		cs.emptyID = fileID{uint64(st.Dev), st.Ino}
	}
	return cs
}

// withBlind returns cs, or where a hidden path's nearest existing
// directory could not be watched, a copy that covers that directory as
// well: the path may be made there unseen (a tree can use up the watches
// of the user it shares with the host), so the directory is hidden whole
// while it is not watched, rather than left open until the next Start.
// A directory that is or holds a Write path is left alone (a tree's work
// is never covered); so is "/".
func (cs *coverSet) withBlind(blind []unwatched) *coverSet {
	var dirs []string
	for _, u := range blind {
		if !slices.Contains(cs.hide, u.path) || u.dir == "/" || slices.Contains(dirs, u.dir) ||
			slices.ContainsFunc(cs.write, func(w string) bool { return within(w, u.dir) }) {
			continue
		}
		dirs = append(dirs, u.dir)
	}
	if len(dirs) == 0 {
		return cs
	}
	out := *cs
	out.hide = slices.Concat(dirs, cs.hide)
	slices.SortStableFunc(out.hide, func(a, b string) int { return len(a) - len(b) })
	return &out
}

// fileID is a file's device and inode.
type fileID struct{ dev, ino uint64 }

// repairer is a DirWatcher's repair loop.
type repairer struct {
	d     *DirWatcher
	epfd  int // the epoll instance, closed by the loop as it ends
	wake  int // an eventfd: a pass is pending, a view went, or stop
	clock quartz.Clock

	closing chan struct{} // closed by stop

	mu    sync.Mutex
	views map[uint64]*liveView
	gone  []*liveView // removed, for the loop to close between passes
	next  uint64
	done  chan struct{} // closed when the loop has ended

	tokens float64
	filled time.Time
}

// epoll keys besides the views'.
const (
	keyInotify uint64 = 1
	keyWake    uint64 = 2
	firstView  uint64 = 3
)

// Live keeps v's namespace covered while trees run in it: from now on, a
// path of spec that appears or whose cover goes is covered in it at once
// (see the top of this file). It takes over v.Live. Without a DirWatcher
// (no inotify: the caller's warning says so) it returns ErrNoLiveRepair,
// and the Start-time check alone holds.
func (w *MountWatch) Live(v *MountView, spec MountSpec) error {
	if v.Live < 0 || v.NS < 0 {
		return nil
	}
	if w.dirs == nil {
		return ErrNoLiveRepair
	}
	cs := newCoverSet(spec)
	if cs.emptyErr != nil {
		return xerrors.Errorf("live repair: %w", cs.emptyErr)
	}
	ns, err := unix.FcntlInt(uintptr(v.NS), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return xerrors.Errorf("live repair: dup: %w", err)
	}
	lv := &liveView{w: w, ns: ns, info: v.Live, covers: cs}
	v.Live = -1
	if err := w.dirs.addLive(lv); err != nil {
		_ = unix.Close(lv.ns)
		_ = unix.Close(lv.info)
		return err
	}
	return nil
}

// addLive registers lv with d's repairer, starting it on first use.
func (d *DirWatcher) addLive(lv *liveView) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.made || d.ino < 0 || d.ended {
		return xerrors.New("live repair: no inotify instance")
	}
	if d.rep == nil {
		r, err := newRepairer(d)
		if err != nil {
			return err
		}
		d.rep = r
	}
	r := d.rep
	r.mu.Lock()
	lv.key = r.next
	r.next++
	r.views[lv.key] = lv
	r.mu.Unlock()
	lv.w.live = lv
	ev := unix.EpollEvent{Events: unix.EPOLLPRI | unix.EPOLLERR}
	setEpollKey(&ev, lv.key)
	if err := unix.EpollCtl(r.epfd, unix.EPOLL_CTL_ADD, lv.info, &ev); err != nil {
		r.mu.Lock()
		delete(r.views, lv.key)
		r.mu.Unlock()
		lv.w.live = nil
		return xerrors.Errorf("live repair: epoll: %w", err)
	}
	// A change between the namespace's making and this registration
	// has been reported on v.Events only: look once.
	lv.pending.Store(true)
	r.poke()
	return nil
}

// newRepairer makes d's epoll instance and starts its loop; d.mu is held.
func newRepairer(d *DirWatcher) (*repairer, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, xerrors.Errorf("live repair: epoll: %w", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		_ = unix.Close(epfd)
		return nil, xerrors.Errorf("live repair: eventfd: %w", err)
	}
	for _, f := range []struct {
		fd  int
		key uint64
	}{{d.ino, keyInotify}, {wake, keyWake}} {
		ev := unix.EpollEvent{Events: unix.EPOLLIN}
		setEpollKey(&ev, f.key)
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, f.fd, &ev); err != nil {
			_ = unix.Close(epfd)
			_ = unix.Close(wake)
			return nil, xerrors.Errorf("live repair: epoll: %w", err)
		}
	}
	clock := d.clock
	if clock == nil {
		clock = quartz.NewReal()
	}
	r := &repairer{d: d, epfd: epfd, wake: wake, clock: clock,
		views: map[uint64]*liveView{}, next: firstView, done: make(chan struct{}), closing: make(chan struct{}),
		tokens: repairBurst, filled: clock.Now()}
	go r.loop()
	return r, nil
}

// setEpollKey stores key in ev's data (Fd and Pad are its two halves).
func setEpollKey(ev *unix.EpollEvent, key uint64) {
	ev.Fd = int32(uint32(key))
	ev.Pad = int32(uint32(key >> 32))
}

func epollKey(ev *unix.EpollEvent) uint64 {
	return uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
}

// poke wakes the loop.
func (r *repairer) poke() {
	one := [8]byte{1}
	_, _ = unix.Write(r.wake, one[:])
}

// dropLiveLocked takes lv out of the repairer; the loop closes its descriptors
// between passes, so that none is closed under a pass using it.
func (d *DirWatcher) dropLiveLocked(lv *liveView) {
	r := d.rep
	if r == nil {
		return
	}
	r.mu.Lock()
	if _, ok := r.views[lv.key]; ok {
		delete(r.views, lv.key)
		r.gone = append(r.gone, lv)
	}
	r.mu.Unlock()
	r.poke()
}

// stop ends the loop and waits for it; d.mu is not held (the loop takes
// it to read the inotify instance).
func (r *repairer) stop() {
	close(r.closing)
	r.poke()
	<-r.done
}

// loop waits for events and runs the passes they call for, until stop.
//
// It blocks in epoll_wait, holding a thread, rather than parking in the
// runtime's poller: nested in the poller's epoll, a mountinfo's event is
// lost, because the poll that tells the outer instance the inner one is
// ready is the one that reports (and so consumes) it, and the loop's own
// epoll_wait then finds nothing.
func (r *repairer) loop() {
	defer close(r.done)
	defer r.closeAll()
	var evs [32]unix.EpollEvent
	for {
		n, err := unix.EpollWait(r.epfd, evs[:], -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			// Not expected. The Start-time check still holds: mark every
			// view stale, and keep the descriptors until stop.
			r.mu.Lock()
			for _, lv := range r.views {
				lv.w.stale.Store(true)
			}
			r.mu.Unlock()
			<-r.closing
			return
		}
		inotify := false
		r.mu.Lock()
		for i := range evs[:n] {
			switch k := epollKey(&evs[i]); k {
			case keyInotify:
				inotify = true
			case keyWake:
				var b [8]byte
				_, _ = unix.Read(r.wake, b[:])
			default:
				if lv := r.views[k]; lv != nil {
					lv.pending.Store(true) // a mount came or went: one may be a cover
				}
			}
		}
		r.mu.Unlock()
		// After the eventfd's read: stop closes closing before it
		// pokes, so a poke this read took is never lost.
		select {
		case <-r.closing:
			return
		default:
		}
		if inotify {
			r.d.read(false) // marks the watches it matters to pending
		}
		r.closeGone(true)
		r.passes()
	}
}

// passes runs one pass for each pending view, within the rate limit.
func (r *repairer) passes() {
	r.mu.Lock()
	var todo []*liveView
	for _, lv := range r.views {
		if lv.pending.Swap(false) {
			todo = append(todo, lv)
		}
	}
	r.mu.Unlock()
	for _, lv := range todo {
		if !r.take() {
			return // closed while waiting
		}
		r.pass(lv)
	}
}

// take takes a token from the rate limit's bucket, waiting for one when
// it is empty; false if the repairer was closed meanwhile.
func (r *repairer) take() bool {
	now := r.clock.Now()
	r.tokens = min(repairBurst, r.tokens+now.Sub(r.filled).Seconds()*repairRate)
	r.filled = now
	if r.tokens >= 1 {
		r.tokens--
		return true
	}
	wait := time.Duration((1 - r.tokens) / repairRate * float64(time.Second))
	t := r.clock.NewTimer(wait, "repair", "rate")
	defer t.Stop()
	// Events meanwhile are coalesced into the passes that follow.
	select {
	case <-t.C:
	case <-r.closing:
		return false
	}
	r.tokens = 0
	r.filled = r.clock.Now()
	return true
}

// pass re-watches lv's missing paths and covers what is bare in its
// namespace. A failure leaves the watch stale: the next Start builds the
// policy afresh (the backstop).
func (r *repairer) pass(lv *liveView) {
	blind, ok := r.d.rewatch(lv.w, lv)
	if !ok {
		return // dropped meanwhile
	}
	covers := lv.covers.withBlind(blind)
	r.d.passes.Add(1)
	var made int
	var missing []string
	busy := false // still mounting after three looks
	err := osthread.Throwaway(func() error {
		if err := enterNamespace(lv.ns); err != nil {
			return err
		}
		// The pass's own mounts are mount events too: take them now and
		// look once more, on this thread, rather than wake for them and
		// spend a pass of the rate limit. A change of the host's before
		// this poll is seen by the next look; one after it wakes the loop.
		for range 3 {
			n, miss, err := coverNamespace(covers)
			made, missing = made+n, miss
			if err != nil || n == 0 {
				return err
			}
			fds := []unix.PollFd{{Fd: int32(lv.info), Events: unix.POLLPRI}}
			_, _ = unix.Poll(fds, 0)
		}
		busy = true
		return nil
	})
	if err != nil {
		err = xerrors.Errorf("live repair: %w", err)
	}
	if r.d.afterPass != nil {
		r.d.afterPass(made, err)
	}
	// Once more, within the rate limit, if a path went while the pass
	// covered it, or the pass was still mounting after three looks.
	again := errors.Is(err, errGone) || busy
	if err == nil && len(missing) > 0 {
		// Watched only now: a path made between the pass's look and its
		// watch is reported by neither, so look for it here.
		blind, ok := r.d.watchMissing(lv.w, lv, missing)
		if !ok {
			return
		}
		if len(lv.covers.withBlind(blind).hide) > len(lv.covers.hide) {
			again = true // the next pass covers what is not watched
		}
		for _, p := range missing {
			var st unix.Stat_t
			if unix.Lstat(p, &st) == nil {
				again = true
				break
			}
		}
	}
	switch {
	case again && lv.retries < maxRetries:
		lv.retries++
		lv.pending.Store(true) // once more, within the rate limit
		r.poke()
	case again || (err != nil && !errors.Is(err, errGone)):
		lv.w.stale.Store(true)
		lv.retries = 0
	default:
		lv.retries = 0
	}
}

// ErrNoLiveRepair is Live's error where paths cannot be watched (no
// inotify instance, or its limits reached).
var ErrNoLiveRepair = xerrors.New("no inotify instance to watch the paths with")

// errMissing is openBare's: the path does not exist.
var errMissing = xerrors.New("missing")

// errGone is a repair that found a path gone between its open and its
// mount (the dentry is being removed).
var errGone = xerrors.New("a path went while it was being covered")

// goneErr turns a mount's failure on a path being removed into errGone.
func goneErr(err error) error {
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESTALE) {
		return errGone
	}
	return err
}

// closeGone closes the descriptors of the views removed, taking them out
// of the epoll instance first while it is open (del).
func (r *repairer) closeGone(del bool) {
	r.mu.Lock()
	gone := r.gone
	r.gone = nil
	r.mu.Unlock()
	for _, lv := range gone {
		if del {
			_ = unix.EpollCtl(r.epfd, unix.EPOLL_CTL_DEL, lv.info, nil)
		}
		_ = unix.Close(lv.info)
		_ = unix.Close(lv.ns)
	}
}

// closeAll closes every view's descriptors and the eventfd (the loop's end).
func (r *repairer) closeAll() {
	r.closeGone(false) // the epoll instance may be closed already
	r.mu.Lock()
	views := r.views
	r.views = map[uint64]*liveView{}
	r.mu.Unlock()
	for _, lv := range views {
		_ = unix.Close(lv.info)
		_ = unix.Close(lv.ns)
	}
	_ = unix.Close(r.wake)
	_ = unix.Close(r.epfd)
}

// enterNamespace takes the calling, locked (throwaway) thread into the
// mount namespace ns and checks that it is there: never a mount in the
// host's namespace.
func enterNamespace(ns int) error {
	if err := EnterMountns(ns); err != nil {
		return err
	}
	var want, got, host unix.Stat_t
	if err := unix.Fstat(ns, &want); err != nil {
		return xerrors.Errorf("live repair: %w", err)
	}
	if err := unix.Stat(procfs.ThreadSelfFile("ns/mnt"), &got); err != nil {
		return xerrors.Errorf("live repair: %w", err)
	}
	if err := unix.Stat(procfs.Path+"/self/ns/mnt", &host); err != nil {
		return xerrors.Errorf("live repair: %w", err)
	}
	if got.Ino != want.Ino || got.Dev != want.Dev || got.Ino == host.Ino {
		return xerrors.New("live repair: not in the policy's mount namespace")
	}
	return nil
}

// coverNamespace covers, in the calling thread's mount namespace (a
// namespace being made, or a live one: enterNamespace), what of cs's
// paths exists uncovered: each read-only path not on a read-only mount is
// bound read-only onto itself, then each hidden path not covered is
// covered. It returns how many mounts it made, and the paths it found
// missing (not those below a hidden directory, which its cover hides).
func coverNamespace(lv *coverSet) (made int, missing []string, err error) {
	note := func(p string) {
		for _, h := range lv.hide {
			if h != p && within(p, h) {
				return
			}
		}
		missing = append(missing, p)
	}
	for _, p := range lv.pin {
		n, err := pinDir(p)
		made += n
		if err != nil {
			return made, missing, xerrors.Errorf("pin %s: %w", p, goneErr(err))
		}
	}
	// open opens p for a mount onto it; ok is false when there is nothing
	// to do: p missing (noted) or reached through a link.
	open := func(p string) (fd int, ok bool, err error) {
		fd, ok, err = openBare(p)
		if err == errMissing {
			note(p)
			return -1, false, nil
		}
		return fd, ok, err
	}
	for _, p := range lv.readOnly {
		fd, ok, err := open(p)
		if err != nil {
			return made, missing, err
		}
		if !ok {
			continue
		}
		var st unix.Stat_t
		var sfs unix.Statfs_t
		err = unix.Fstat(fd, &st)
		if err == nil && st.Mode&unix.S_IFMT != unix.S_IFLNK { // a link is left alone, as in hide
			err = unix.Fstatfs(fd, &sfs)
		}
		if err == nil && st.Mode&unix.S_IFMT != unix.S_IFLNK && sfs.Flags&unix.ST_RDONLY == 0 {
			err = bindReadOnly(fd)
			if err == nil {
				made++
			}
		}
		_ = unix.Close(fd)
		if err != nil {
			return made, missing, xerrors.Errorf("read-only %s: %w", p, goneErr(err))
		}
	}
	efd := -1
	defer func() {
		if efd >= 0 {
			_ = unix.Close(efd)
		}
	}()
	for _, p := range lv.hide {
		fd, ok, err := open(p)
		if err != nil {
			return made, missing, err
		}
		if !ok {
			continue
		}
		err = func() error {
			defer unix.Close(fd)
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil {
				return err
			}
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFLNK:
				return nil // a link: its target is hidden by its own path (resolvePaths)
			case unix.S_IFDIR:
				var sfs unix.Statfs_t
				if err := unix.Fstatfs(fd, &sfs); err != nil {
					return err
				}
				if sfs.Type == unix.TMPFS_MAGIC && sfs.Flags&unix.ST_RDONLY != 0 && st.Mode&0o7777 == 0 {
					return nil // an empty tmpfs of mode 000: a cover
				}
				if err := coverDir(fd); err != nil {
					return err
				}
			default:
				if (fileID{uint64(st.Dev), st.Ino}) == lv.emptyID {
					return nil // the empty file: a cover
				}
				if efd < 0 {
					var err error
					if efd, err = openEmpty(lv); err != nil {
						return err
					}
				}
				if err := coverFile(fd, efd); err != nil {
					return err
				}
			}
			made++
			return nil
		}()
		if err != nil {
			return made, missing, xerrors.Errorf("cover %s: %w", p, goneErr(err))
		}
	}
	return made, missing, nil
}

// openBare opens p in the calling thread's namespace as a location only
// (O_PATH), following no symbolic link on the way or at the end, for a
// mount onto the descriptor: a link a tree swaps in before the open is
// refused, and what the descriptor names cannot change after. ok is false
// when there is nothing to cover: p missing, or reached through a link.
func openBare(p string) (fd int, ok bool, err error) {
	fd, err = unix.Openat2(unix.AT_FDCWD, p, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	switch err {
	case nil:
		return fd, true, nil
	case unix.ENOENT:
		return -1, false, errMissing // the watch sees it appear
	case unix.ENOTDIR, unix.ELOOP, unix.EACCES:
		// Below a cover or a file, or through a link, which may be a
		// tree's: never followed.
		return -1, false, nil
	}
	return -1, false, xerrors.Errorf("open %s: %w", p, err)
}

// openEmpty opens lv's empty file in the namespace (open_tree takes a
// source in the caller's namespace only) and checks it is the one.
func openEmpty(lv *coverSet) (int, error) {
	if lv.emptyErr != nil {
		return -1, xerrors.Errorf("the empty file to cover with: %w", lv.emptyErr)
	}
	fd, ok, err := openBare(lv.empty)
	if err != nil && err != errMissing {
		return -1, err
	}
	if !ok {
		return -1, xerrors.Errorf("%s not found in the namespace", lv.empty)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || (fileID{uint64(st.Dev), st.Ino}) != lv.emptyID {
		_ = unix.Close(fd)
		return -1, xerrors.Errorf("%s is not the empty file", lv.empty)
	}
	return fd, nil
}

// coverAttrs are a cover's mount flags.
const coverAttrs = unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC

// moveOnto attaches the detached mount mnt onto the location target.
func moveOnto(mnt, target int) error {
	return unix.MoveMount(mnt, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
}

// coverDir mounts an empty read-only tmpfs of mode 000 onto target.
func coverDir(target int) error {
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return xerrors.Errorf("fsopen: %w", err)
	}
	defer unix.Close(fs)
	for _, kv := range [][2]string{{"size", "4k"}, {"nr_inodes", "1"}, {"mode", "000"}} {
		if err := unix.FsconfigSetString(fs, kv[0], kv[1]); err != nil {
			return xerrors.Errorf("fsconfig %s: %w", kv[0], err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return xerrors.Errorf("fsconfig: %w", err)
	}
	mnt, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, coverAttrs)
	if err != nil {
		return xerrors.Errorf("fsmount: %w", err)
	}
	defer unix.Close(mnt)
	return moveOnto(mnt, target)
}

// coverFile binds the empty file efd, read-only, onto target.
func coverFile(target, efd int) error {
	tree, err := unix.OpenTree(efd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		return xerrors.Errorf("open_tree: %w", err)
	}
	defer unix.Close(tree)
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: coverAttrs}); err != nil {
		return xerrors.Errorf("mount_setattr: %w", err)
	}
	return moveOnto(tree, target)
}

// pinDir makes the directory p a mount point, a bind of itself
// (recursive), unless it is one already, or missing, or not a directory,
// or reached through a link; it returns the mounts it made.
func pinDir(p string) (int, error) {
	fd, ok, err := openBare(p)
	if err == errMissing || (err == nil && !ok) {
		return 0, nil // the ReadOnly path below is missing too, or not ours to follow
	}
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	var stx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_TYPE, &stx); err != nil {
		return 0, err
	}
	if stx.Mode&unix.S_IFMT != unix.S_IFDIR || stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		return 0, nil
	}
	tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
	if err != nil {
		return 0, xerrors.Errorf("open_tree: %w", err)
	}
	defer unix.Close(tree)
	if err := moveOnto(tree, fd); err != nil {
		return 0, err
	}
	return 1, nil
}

// bindReadOnly binds target onto itself, recursively, read-only.
func bindReadOnly(target int) error {
	tree, err := unix.OpenTree(target, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
	if err != nil {
		return xerrors.Errorf("open_tree: %w", err)
	}
	defer unix.Close(tree)
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE,
		&unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return xerrors.Errorf("mount_setattr: %w", err)
	}
	return moveOnto(tree, target)
}
