package agentproc

import (
	"path/filepath"
	"slices"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc/internal/confine"
)

// hideWatch tells a Manager's policy cache (cachedPolicy) when a resolved
// policy's hidden-link walk (hiddenLinkTargets) is out of date: a link
// added to a hidden directory after the walk (a dotfile manager's `stow`
// or `chezmoi apply` into an existing ~/.aws) was read at its target by
// every later tree of the Manager, which kept the policy (fourth mend,
// TestHiddenDirLinkAddedLater). One inotify instance per Manager watches
// each directory the walk read, for any entry made in it, and the nearest
// existing directory above each missing hidden path, for the one name
// that matters there. Each Start reads the instance without blocking (a
// read that finds nothing, ~1 µs), and only a policy an event matters to
// is resolved again. The zero value is ready; close releases it.
type hideWatch struct {
	mu   sync.Mutex
	made bool // ino has been made (or closed); a failed make is tried again
	ino  int  // -1: closed
	// keys holds, by watch descriptor, the policies (rawPolicyKey) that
	// depend on a name in that directory; anyName for every entry of a
	// directory the walk read.
	keys map[int32]map[string][]string
	dirs map[int32]string // the watched directory, to look up an entry
	// gen counts the drains that found a policy stale and the resets
	// (generation); full is set when a watch was refused at
	// maxHideWatches (filled).
	gen  uint64
	full bool
}

// maxHideWatches bounds the watches one Manager holds. Each pins its
// directory's inode in kernel memory and counts against the user's
// fs.inotify.max_user_watches (8,192 on a small machine), which every
// other program of the user shares: an httpapi client naming new hidden
// directories at each request (Sandbox.Hide, 1,024 walked to 256 entries
// each) had the host hold 3,200 more watches a request, never let go,
// until the user's editors and builds could watch nothing (thirteenth
// attack review, TestAttackHideWatchGrowsWithoutBound). WorkspaceSandbox
// takes a few hundred. At the bound a policy is not kept (as where the
// kernel's limits refuse a watch) and the cache starts over (cachedPolicy).
var maxHideWatches = 4096 // a variable for tests (SetMaxHideWatches)

// anyName registers a policy for every entry made in a directory; a name
// after linkOnly, for a link or a directory made at that name (a hidden
// file's).
const (
	anyName  = "\x00"
	linkOnly = "\x01"
)

// hideWatchEvents are the changes a walk's answer may depend on: an entry
// made or renamed in, or the directory itself gone or moved.
const hideWatchEvents = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF |
	unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW

// watch registers key's dependence on the directory p, about to be read
// by the walk: on every entry made in it, or, where p is missing, on p
// appearing, through the nearest existing directory above it, and where
// p is a file (a hidden file), on a link or directory made at its name.
// It reports false where it could not watch (inotify's limits): the
// caller does not keep the policy then.
func (w *hideWatch) watch(key, p string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.made {
		// A refusal (EMFILE, the user's fs.inotify.max_user_instances
		// spent, by a tree of the same user without root among others)
		// is tried again at the next watch: taken as the answer, it had
		// every later Start resolve its policy again for the Manager's
		// life (fifteenth attack review,
		// TestAttackHideWatchInstanceRefusedOnce). close marks the
		// instance gone with made set and ino -1.
		ino, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
		if err != nil {
			return false
		}
		w.made, w.ino = true, ino
	}
	if w.ino < 0 {
		return false
	}
	if w.keys == nil {
		w.keys, w.dirs = map[int32]map[string][]string{}, map[int32]string{}
	}
	name := anyName
	for {
		wd, err := unix.InotifyAddWatch(w.ino, p, hideWatchEvents)
		switch {
		case err == nil && w.dirs[int32(wd)] == "" && len(w.dirs) >= maxHideWatches:
			_, _ = unix.InotifyRmWatch(w.ino, uint32(wd))
			w.full = true
			return false
		case err == nil:
			w.addLocked(int32(wd), p, name, key)
			return true
		case err == unix.EACCES:
			// Not the host's to read (a root-only /etc/ssl/private
			// without root): the walk reads nothing there either, and
			// neither may the tree.
			return true
		case err == unix.ENOTDIR && name == anyName:
			// A hidden file: nothing below it to walk, but a link made
			// at its name (a dotfile manager adopting it: the file moved
			// into a repository, a link left in its place) moves it
			// where the policy does not hide it (thirteenth attack
			// review, TestAttackHiddenFileSwappedForLink). A file made
			// there is not (~/.claude.json and the histories are
			// rewritten by a rename all the time): a lstat, no resolve.
			p, name = filepath.Dir(p), linkOnly+filepath.Base(p)
		case (err == unix.ENOENT || err == unix.ENOTDIR) && p != "/":
			// Gone since the walk looked, or missing: the name above.
			p, name = filepath.Dir(p), filepath.Base(p)
		default:
			return false
		}
	}
}

// addLocked records key under wd's name, once.
func (w *hideWatch) addLocked(wd int32, dir, name, key string) {
	if w.keys[wd] == nil {
		w.keys[wd] = map[string][]string{}
	}
	w.dirs[wd] = dir
	if !slices.Contains(w.keys[wd][name], key) {
		w.keys[wd][name] = append(w.keys[wd][name], key)
	}
}

// changed drains the instance and returns the policies an event matters
// to, each once; all where events were lost. An entry made in a read
// directory matters only as a link or a directory (which may hold
// links): a busy hidden directory's files (a browser profile's caches)
// cost a lstat each here, not a resolve. A name's registrations are
// dropped when it fires: the policy's next resolve makes them again. The
// lock is held across the reads, which never block, so that a Start that
// finds the queue emptied by a concurrent Start also finds its verdict;
// the lstat is made without it.
func (w *hideWatch) changed() (keys []string, all bool) {
	w.mu.Lock()
	if !w.made || w.ino < 0 {
		w.mu.Unlock()
		return nil, false
	}
	var made []madeEntry
	all = confine.ReadInotify(w.ino, func(mask uint32, wd int32, name string) {
		byName := w.keys[wd]
		if mask&(unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 { // the directory went
			for _, ks := range byName {
				keys = append(keys, ks...)
			}
			delete(w.keys, wd)
			delete(w.dirs, wd)
			return
		}
		keys = append(keys, byName[name]...)
		delete(byName, name)
		if len(byName[anyName]) > 0 || len(byName[linkOnly+name]) > 0 {
			made = append(made, madeEntry{wd, filepath.Join(w.dirs[wd], name), mask&unix.IN_ISDIR != 0})
		}
	})
	if all {
		// The kernel's watches stay: dirs keeps counting them
		// (maxHideWatches) and reset lets them go.
		w.keys = nil
	}
	// The generation moves with the registrations dropped, under the one
	// lock: a resolve that reads it after this drain finds it moved.
	if len(keys) > 0 || all {
		w.gen++
	}
	w.mu.Unlock()
	for _, e := range made {
		if e.isDir || isLink(e.path) {
			w.mu.Lock()
			for _, n := range []string{anyName, linkOnly + filepath.Base(e.path)} {
				if ks := w.keys[e.wd][n]; len(ks) > 0 {
					keys = append(keys, ks...)
					delete(w.keys[e.wd], n)
					w.gen++
				}
			}
			w.mu.Unlock()
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys), all
}

// generation changes whenever changed drops a policy's registration, or
// reset drops them all: a policy resolved across such a drain may have
// lost its registration to it, and the drain's caller could not drop a
// policy not yet kept (cachedPolicy does not keep it then).
func (w *hideWatch) generation() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gen
}

// madeEntry is an entry made in a directory the walk read.
type madeEntry struct {
	wd    int32
	path  string
	isDir bool
}

// isLink reports whether p is a link now. An entry already gone needs no
// resolve: nothing links from there any more, and one made again at that
// name, or renamed to another, is an event of its own. Counting it made
// every Start beside a browser resolve its policy again (a profile's
// SQLite journals are made and removed many times a second).
func isLink(p string) bool {
	var st unix.Stat_t
	return unix.Lstat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

// reset forgets every registration (the policy cache started over) and
// lets the kernel's watches go: kept, they would count against
// maxHideWatches and the user's limit with nothing depending on them. The
// caller holds the cache's lock, so that no policy resolved meanwhile is
// kept without its registrations (generation); inotify_rm_watch touches
// no disk.
func (w *hideWatch) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.made && w.ino >= 0 {
		for wd := range w.dirs {
			_, _ = unix.InotifyRmWatch(w.ino, uint32(wd))
		}
	}
	w.keys, w.dirs, w.full = nil, nil, false
	w.gen++
}

// filled reports whether a watch was refused at maxHideWatches since the
// last reset.
func (w *hideWatch) filled() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.full
}

// close releases the instance (the Manager's Close).
func (w *hideWatch) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.made && w.ino >= 0 {
		_ = unix.Close(w.ino)
	}
	w.made, w.ino, w.keys, w.dirs = true, -1, nil, nil
}
