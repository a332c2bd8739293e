package agentproc

import (
	"path/filepath"
	"slices"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
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
	made bool // ino has been made (or failed, or closed)
	ino  int  // -1: failed or closed
	// keys holds, by watch descriptor, the policies (rawPolicyKey) that
	// depend on a name in that directory; anyName for every entry of a
	// directory the walk read.
	keys map[int32]map[string][]string
	dirs map[int32]string // the watched directory, to look up an entry
	// gen counts the drains that dropped a registration (generation).
	gen uint64
}

// anyName registers a policy for every entry made in a directory.
const anyName = "\x00"

// hideWatchEvents are the changes a walk's answer may depend on: an entry
// made or renamed in, or the directory itself gone or moved.
const hideWatchEvents = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF |
	unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW

// watch registers key's dependence on the directory p, about to be read
// by the walk: on every entry made in it, or, where p is missing, on p
// appearing, through the nearest existing directory above it. A p that is
// not a directory (a hidden file, a link) needs nothing. It reports false
// where it could not watch (inotify's limits): the caller does not keep
// the policy then.
func (w *hideWatch) watch(key, p string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.made {
		w.made = true
		ino, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
		if err != nil {
			ino = -1
		}
		w.ino = ino
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
		case err == nil:
			w.addLocked(int32(wd), p, name, key)
			return true
		case err == unix.ENOTDIR && name == anyName:
			return true // a hidden file or link: nothing below it to walk
		case err == unix.EACCES:
			// Not the host's to read (a root-only /etc/ssl/private
			// without root): the walk reads nothing there either, and
			// neither may the tree.
			return true
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
	var buf [4096]byte
	for {
		n, err := unix.Read(w.ino, buf[:])
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			break // EAGAIN: nothing more
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := ""
			if ev.Len > 0 {
				raw := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
				name = string(raw[:max(0, slices.Index(raw, 0))])
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
			switch byName := w.keys[ev.Wd]; {
			case ev.Mask&unix.IN_Q_OVERFLOW != 0:
				all = true
			case ev.Mask&(unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0: // the directory went
				for _, ks := range byName {
					keys = append(keys, ks...)
				}
				delete(w.keys, ev.Wd)
				delete(w.dirs, ev.Wd)
			default:
				keys = append(keys, byName[name]...)
				delete(byName, name)
				if len(byName[anyName]) > 0 {
					made = append(made, madeEntry{ev.Wd, filepath.Join(w.dirs[ev.Wd], name), ev.Mask&unix.IN_ISDIR != 0})
				}
			}
		}
	}
	if all {
		w.keys, w.dirs = nil, nil
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
			if ks := w.keys[e.wd][anyName]; len(ks) > 0 {
				keys = append(keys, ks...)
				delete(w.keys[e.wd], anyName)
				w.gen++
			}
			w.mu.Unlock()
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys), all
}

// generation changes whenever changed drops a policy's registration: a
// policy resolved across such a drain may have lost its registration to
// it, and the drain's caller could not drop a policy not yet kept
// (cachedPolicy does not keep it then).
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

// reset forgets every registration (the policy cache started over); the
// kernel's watches stay, few and shared.
func (w *hideWatch) reset() {
	w.mu.Lock()
	w.keys, w.dirs = nil, nil
	w.mu.Unlock()
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
