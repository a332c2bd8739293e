package agentproc

import (
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"

	"github.com/agentproc/agentproc/internal/procfs"
)

// The Linux sandbox. What each Start does, on a throwaway thread
// (onThrowawayThread), before forking the shell from it:
//
//  1. join the Manager's network namespace for NetworkNone or
//     NetworkLoopback (root; made once per Manager and network);
//  2. join the policy's mount namespace (root: a read-only view of every
//     mount but Write, Hide and the host's doors covered, ReadOnly bound
//     read-only; made per policy, and again when a Start finds it no
//     longer covers what the policy names: mountWatch);
//  3. drop the capability bounding set and the ambient set (root), so that
//     the shell, uid 0 but without capabilities after exec, can neither
//     rejoin the host's namespaces nor read the host's /proc files;
//  4. set no_new_privs, which Landlock and seccomp need without
//     CAP_SYS_ADMIN and which keeps setuid binaries from undoing 3;
//  5. restrict the thread with the policy's Landlock ruleset (made once per
//     policy);
//  6. install the seccomp filter (per thread, no TSYNC).
//
// The thread then forks the shell (cmd.Start), which inherits all of it,
// and is thrown away. Nothing else in the process is ever confined. A
// failure of any step fails the Start and nothing runs.
//
// Pdeathsig is never set on a sandboxed child: it fires when the thread
// that forked it exits, which here is at once. The null device of a child
// without stdin is opened by the host once (childStdin), before any
// confinement.

// sandboxThreadUser registers a Manager that makes throwaway threads or
// cgroup v1 thread placements, so that the main thread is kept out of
// their way while it is open (mainHold, thread_linux.go); the returned
// func releases it.
func sandboxThreadUser() (release func()) { return useMainHold() }

// maxBuiltPolicies bounds how many policies a Manager keeps built: each
// holds a Landlock ruleset's descriptor and, as root, a mount namespace.
const maxBuiltPolicies = 64

// sandboxCache is a Manager's built policies and namespaces.
type sandboxCache struct {
	mu     sync.Mutex
	built  map[string]*sandboxBuilt
	netns  map[Network]*nsEntry
	closed bool
	limit  int // maxBuiltPolicies when 0; tests lower it

	dirs dirWatcher // watches for the missing paths of built policies (mountWatch)

	emptyOnce sync.Once
	emptyDir  string // holds the empty file hidden files are covered with
	emptyErr  error

	readyThreadMu     sync.Mutex
	readyThread       *readyThread  // for the policy of the last Starts; nil if none
	lastStart         *sandboxBuilt // the policy of the last Start
	readyThreadClosed bool
	threadMakers      sync.WaitGroup // ready threads' goroutines, which close waits for
}

// emptyFile returns an empty file of mode 000 in a directory of its own,
// made once, for makeMountns to cover hidden files with.
func (c *sandboxCache) emptyFile() (string, error) {
	c.emptyOnce.Do(func() {
		dir, err := os.MkdirTemp("", "agentproc-hide-")
		if err != nil {
			c.emptyErr = err
			return
		}
		c.emptyDir = dir
		f, err := os.OpenFile(filepath.Join(dir, "empty"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0)
		if err != nil {
			c.emptyErr = err
			return
		}
		c.emptyErr = f.Close()
	})
	return filepath.Join(c.emptyDir, "empty"), c.emptyErr
}

// nsEntry is a namespace descriptor made once.
type nsEntry struct {
	once sync.Once
	fd   int
	err  error
}

// sandboxBuilt is one policy, built once: what each Start of it applies.
type sandboxBuilt struct {
	once     sync.Once
	ruleset  int         // -1 without Landlock
	layer    []llGrant   // the temp dir layer's other rules (tempLayer); nil without
	netns    int         // -1: the host's
	mntns    int         // -1: the host's
	view     mountView   // the mount namespace made here (ns is mntns); -1s in a runner
	watch    *mountWatch // nil without a mount namespace made here
	users    int         // the Starts and ready threads using b; guarded by cache.mu
	evicted  bool        // taken out of the cache as stale: the last user releases it
	dropCaps bool
	filter   []unix.SockFilter // nil without seccomp
	info     Confinement
	missing  []unenforced
	err      error
	uncached bool          // not in the cache: released by done
	cache    *sandboxCache // nil outside a Manager (a detached runner)
}

// done is called once by each Start that used b (got it from the
// cache's get), when its tree is gone or never started, and by a ready
// thread made for b once it is done with b's descriptors.
func (b *sandboxBuilt) done() {
	if b.cache == nil {
		if b.uncached {
			b.release()
		}
		return
	}
	b.cache.mu.Lock()
	b.users--
	last := b.users == 0 && (b.uncached || b.evicted)
	b.cache.mu.Unlock()
	if last {
		b.release()
	}
}

// hostCaps is what the host may do that matters to the sandbox.
type hostCaps struct {
	root    bool // uid 0 with CAP_SYS_ADMIN and CAP_SETPCAP: namespaces, bounding set
	seccomp bool
	abi     int
	lastCap int // the highest capability number the kernel knows
}

// sandboxHost is what this host can do (a test may pretend otherwise).
func sandboxHost() hostCaps {
	if h := hostOverride.Load(); h != nil {
		return *h
	}
	return probeHost()
}

// hostOverride, set by tests only, replaces the probe's answer.
var hostOverride atomic.Pointer[hostCaps]

var probeHost = sync.OnceValue(func() hostCaps {
	h := hostCaps{abi: min(landlockABI(), landlockMaxABI), lastCap: 40}
	if n, ok := procfs.SysInt("kernel/cap_last_cap"); ok && n > 0 && n < 64 {
		h.lastCap = n
	}
	status, _ := procfs.ReadSelf("status")
	_, hasSeccomp := procfs.StatusField(status, "Seccomp")
	h.seccomp = seccompArch != 0 && hasSeccomp
	if os.Geteuid() == 0 {
		if v, ok := procfs.StatusField(status, "CapEff"); ok {
			eff, err := strconv.ParseUint(string(v), 16, 64)
			h.root = err == nil && eff&(1<<unix.CAP_SYS_ADMIN) != 0 && eff&(1<<unix.CAP_SETPCAP) != 0
		}
	}
	return h
})

// sandboxSupport reports the host's mechanisms (SandboxSupport).
func sandboxSupport() SandboxFeatures {
	h := sandboxHost()
	var f SandboxFeatures
	f.LandlockABI = h.abi
	if h.root {
		f.Mechanisms = append(f.Mechanisms, "netns", "mountns", "capabilities")
	}
	f.Mechanisms = append(f.Mechanisms, "no_new_privs")
	if h.abi > 0 {
		f.Mechanisms = append(f.Mechanisms, "landlock")
	} else {
		f.Missing = append(f.Missing, "files: Landlock is not available (a kernel before 5.13, or not enabled in lsm=)")
	}
	if h.seccomp {
		f.Mechanisms = append(f.Mechanisms, "seccomp")
	} else {
		f.Missing = append(f.Missing, "seccomp filters are not available on this kernel or GOARCH: MPTCP and io_uring cannot be refused")
	}
	if h.abi > 0 && h.abi < 6 {
		f.Missing = append(f.Missing, "Landlock ABI "+strconv.Itoa(h.abi)+" has no scopes (6): signals to the host and its abstract sockets stay reachable")
	}
	f.Networks = []Network{NetworkHost}
	if h.root || h.seccomp {
		f.Networks = append(f.Networks, NetworkNone)
	}
	if h.root {
		f.Networks = append(f.Networks, NetworkLoopback)
	} else {
		f.Missing = append(f.Missing, "loopback: needs root (a network namespace)", "ReadOnly: needs root (a mount namespace)",
			"metadata outside Write (chmod, chown, utimes, xattrs): needs root (a read-only view in a mount namespace)",
			"the host's pathname sockets (ssh agent, Docker, agentproc serve, D-Bus, systemd, tmux, screen): needs root (covered in a mount namespace)")
	}
	if h.abi >= 4 && h.seccomp {
		f.Networks = append(f.Networks, NetworkPorts, NetworkHosts)
	}
	f.Supported = h.abi >= 6 && h.seccomp
	return f
}

// get returns pol built, building it on first use, or again when the
// mount namespace built before no longer covers what pol names
// (mountWatch). The lock is held only to find the entry: building opens
// files and makes namespaces. Each get is matched by one done.
func (c *sandboxCache) get(pol *sandboxPolicy) (*sandboxBuilt, error) {
	for attempt := 0; ; attempt++ {
		b, err := c.getOnce(pol)
		if err != nil || b.watch == nil || attempt > 0 || !b.watch.changed(&b.view) {
			return b, err
		}
		// Stale: out of the cache, released by its last user; the next
		// get builds the policy afresh. The fresh one is used even if the
		// host changed it again meanwhile (a rebuild per Start at most).
		c.mu.Lock()
		if c.built[pol.key] == b {
			delete(c.built, pol.key)
			b.evicted = true
		}
		c.mu.Unlock()
		mountRebuilds.Add(1)
		b.done()
	}
}

// mountRebuilds counts the policies built again because their mount
// namespace no longer covered what they name.
var mountRebuilds atomic.Int64

// getOnce is get without the staleness check.
func (c *sandboxCache) getOnce(pol *sandboxPolicy) (*sandboxBuilt, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	if c.built == nil {
		c.built = map[string]*sandboxBuilt{}
	}
	b := c.built[pol.key]
	if b == nil {
		b = &sandboxBuilt{ruleset: -1, netns: -1, mntns: -1, view: mountView{ns: -1, events: -1}, cache: c}
		limit := c.limit
		if limit <= 0 {
			limit = maxBuiltPolicies
		}
		if len(c.built) < limit {
			c.built[pol.key] = b
		} else {
			// Full (a server whose clients name ever new work dirs): built
			// for this Start only, and released with it (done).
			b.uncached = true
		}
	}
	b.users++
	c.mu.Unlock()
	b.once.Do(func() { b.err = c.build(b, pol) })
	if b.err != nil {
		// Not kept: a later Start may find the host able (a path made).
		c.mu.Lock()
		if c.built[pol.key] == b {
			delete(c.built, pol.key)
			b.evicted = true
		}
		c.mu.Unlock()
		err := b.err
		b.done()
		return nil, err
	}
	return b, nil
}

// namespace returns the Manager's network namespace for n, made once.
func (c *sandboxCache) namespace(n Network) (int, error) {
	c.mu.Lock()
	if c.netns == nil {
		c.netns = map[Network]*nsEntry{}
	}
	e := c.netns[n]
	if e == nil {
		e = &nsEntry{fd: -1}
		c.netns[n] = e
	}
	c.mu.Unlock()
	e.once.Do(func() { e.fd, e.err = makeNetns(n != NetworkNone) })
	return e.fd, e.err
}

// build works out what enforces pol here and builds it.
func (c *sandboxCache) build(b *sandboxBuilt, pol *sandboxPolicy) error {
	h := sandboxHost()
	b.info.Network = pol.network
	var mech []string
	if h.abi == 0 {
		b.missing = append(b.missing, unenforced{field: "Write", reason: "Landlock is not available here (a kernel before 5.13, or not enabled in lsm=): files are not confined"})
	} else if h.abi < 6 {
		b.missing = append(b.missing, unenforced{field: "Network", reason: "Landlock ABI " + strconv.Itoa(h.abi) +
			" has no scopes (ABI 6, Linux 6.12): the tree could signal the host's processes and reach its abstract Unix sockets"})
	}
	if !h.seccomp {
		b.missing = append(b.missing, unenforced{field: "Network", reason: "seccomp is not available here: MPTCP sockets (which Landlock does not see) and io_uring cannot be refused"})
	}
	net := seccompOwnNet
	switch pol.network {
	case NetworkNone, NetworkLoopback:
		if pol.network == NetworkNone {
			net = seccompNone // inside the empty namespace too
		}
		if h.root && pol.skip&sandboxSkipNetns == 0 {
			fd, err := c.namespace(pol.network)
			if err != nil {
				return xerrors.Errorf("network namespace: %w", err)
			}
			b.netns = fd
			mech = append(mech, "netns")
		} else if pol.network == NetworkLoopback {
			b.missing = append(b.missing, unenforced{field: "Network", reason: "a private loopback needs a network namespace, which needs root"})
		}
	case NetworkPorts:
		if h.abi < 4 {
			b.missing = append(b.missing, unenforced{field: "AllowPorts", reason: "TCP port rules need Landlock ABI 4 (Linux 6.7)"})
		}
		net = seccompPorts
	case NetworkHosts:
		// The tree reaches only its proxy listener: TCP that Landlock's
		// port rule checks, as NetworkPorts.
		net = seccompPorts
		if err := c.buildHosts(b, pol, h, &mech); err != nil {
			return err
		}
	}
	// As root the hidden paths (and the credential sockets) are covered in
	// a mount namespace, and the Landlock ruleset grants whole trees: a
	// few rules instead of one per entry of every directory above a hidden
	// path, which costs at every Start (landlock_restrict_self copies the
	// rules) and leaves entries made later unreadable.
	hide := landlockHidden(pol)
	if h.root && pol.skip&sandboxSkipMountns == 0 {
		empty, err := c.emptyFile()
		if err != nil {
			return xerrors.Errorf("mount namespace: %w", err)
		}
		spec := mountSpec{write: pol.write, readOnly: pol.readOnly, empty: empty,
			hide: append(append(slices.Clone(pol.hide), llHidden...), hostDoors()...)}
		// What is missing is listed before the namespace is made: a path
		// made in between is then found by the next Start.
		var dirs *dirWatcher
		if b.cache != nil { // a Manager's: checked at each Start
			dirs = &c.dirs
		}
		b.watch = newMountWatch(spec, dirs)
		v, err := makeMountns(spec)
		if err != nil {
			return xerrors.Errorf("mount namespace: %w", err)
		}
		b.view = v
		b.mntns = v.ns
		hide = nil
		mech = append(mech, "mountns")
		for _, p := range b.watch.missingReadOnly(pol.readOnly) {
			b.missing = append(b.missing, unenforced{field: "ReadOnly", soft: true,
				reason: p + " does not exist: the tree may create it, and it is protected from the next Start on"})
		}
	} else {
		if len(pol.readOnly) > 0 {
			b.missing = append(b.missing, unenforced{field: "ReadOnly", soft: true,
				reason: "needs root (a read-only bind mount in a mount namespace); Landlock cannot take write access back below a writable directory"})
		}
		b.missing = append(b.missing, unenforced{field: "Write", soft: true,
			reason: "metadata outside Write (mode, owner, times, extended attributes) is not protected without root (a read-only view in a mount namespace): Landlock has no right for chmod, chown, utimes or setxattr"})
	}
	if h.root && pol.skip&sandboxSkipCaps == 0 {
		b.dropCaps = true
		mech = append(mech, "capabilities")
	}
	mech = append(mech, "no_new_privs")
	if h.abi > 0 && pol.skip&sandboxSkipLandlock == 0 {
		rs, err := landlockRuleset(pol, h.abi, hide)
		if err != nil {
			return err
		}
		b.ruleset = rs
		b.info.LandlockABI = h.abi
		if pol.tmpParent != "" {
			if b.layer, err = landlockLayerGrants(pol, h.abi); err != nil {
				return err
			}
		}
		mech = append(mech, "landlock")
	}
	if h.seccomp && pol.skip&sandboxSkipSeccomp == 0 {
		b.filter = seccompFilter(net)
		mech = append(mech, "seccomp")
	}
	b.info.Mechanisms = mech
	return nil
}

// release closes what b holds; namespaces of the Manager are the cache's.
func (b *sandboxBuilt) release() {
	if b.ruleset >= 0 {
		_ = unix.Close(b.ruleset)
		b.ruleset = -1
	}
	closeGrants(b.layer)
	b.layer = nil
	if b.watch != nil {
		b.watch.close()
	}
	if b.view.ns >= 0 || b.view.events >= 0 {
		b.view.close() // b.mntns is b.view.ns
		b.mntns = -1
	} else if b.mntns >= 0 {
		_ = unix.Close(b.mntns) // a runner's, inherited
		b.mntns = -1
	}
}

// close releases every built policy and namespace.
func (c *sandboxCache) close() {
	c.readyThreadMu.Lock()
	c.readyThreadClosed = true
	if c.readyThread != nil {
		close(c.readyThread.quit)
		c.readyThread = nil
	}
	c.readyThreadMu.Unlock()
	c.threadMakers.Wait()
	c.mu.Lock()
	c.closed = true
	built, netns := c.built, c.netns
	c.built, c.netns = nil, nil
	c.mu.Unlock()
	for _, b := range built {
		b.once.Do(func() {}) // a build in flight finishes first
		b.release()
	}
	for _, e := range netns {
		e.once.Do(func() {})
		if e.fd >= 0 {
			_ = unix.Close(e.fd)
		}
	}
	c.dirs.close()
	c.emptyOnce.Do(func() {})
	if c.emptyDir != "" {
		_ = os.RemoveAll(c.emptyDir)
	}
}

// start confines a throwaway thread as b says and starts cmd from it.
// A Start without a step takes the ready thread the cache made ahead for
// b, if there is one, on which every step of b is done already (the mount
// namespace and the emptied bounding set as root, the network namespace,
// no_new_privs, Landlock and seccomp), and only forks on it; the rest,
// and every Start with a step, take a fresh thread and do the steps
// there. The ready thread saves the Start the thread's making and those steps
// (docs/measurements.md), for a hand-off of one wake-up.
//
// inNetns, if not nil, runs on the thread once it is in b's network
// namespace with no_new_privs set, before Landlock and seccomp
// (NetworkHosts makes the tree's proxy listener there). Such a Start's
// ready thread is confined only up to its bounding set (ahead means without the
// listener), and the rest is done at the Start.
//
// The descriptors to close in the child are listed here, on the calling
// thread, before the hand-off: a confined thread may not be allowed to
// read /proc (Landlock).
//
// last, if not nil, runs on the confined thread just before the fork, on a
// ready thread confined ahead too: a further Landlock layer of this Start (the
// temp dir's), which intersects with the policy's in any order.
func (b *sandboxBuilt) start(cmd *exec.Cmd, step threadStep, inNetns, last func() error) error {
	if err := closeInherited(cmd); err != nil {
		return err
	}
	lastCap := sandboxHost().lastCap
	ahead := inNetns == nil // a ready thread may be confined all the way ahead
	if step == nil && b.cache != nil {
		if st := b.cache.takeReadyThread(b, ahead); st != nil {
			readyThreadStarts.Add(1)
			err := st.do(func() error {
				if !st.confined {
					if err := b.confine(inNetns); err != nil {
						return err
					}
				}
				return startLast(cmd, last)
			})
			b.cache.makeReadyThread(b, lastCap, ahead)
			return err
		}
		defer b.cache.makeReadyThread(b, lastCap, ahead)
	}
	return onThrowawayThread(func() (err error) {
		// The other step first: after the steps below this thread may no
		// longer open files (Landlock) or make some system calls
		// (seccomp); what its restore writes it has opened already.
		if step != nil {
			restore, serr := step()
			if serr != nil {
				return serr
			}
			defer func() { err = errors.Join(err, restore()) }()
		}
		if err := b.enterAndDrop(lastCap); err != nil {
			return err
		}
		if err := b.confine(inNetns); err != nil {
			return err
		}
		return startLast(cmd, last)
	})
}

// startLast runs last, if not nil, then starts cmd, on the calling,
// confined thread.
func startLast(cmd *exec.Cmd, last func() error) error {
	if last != nil {
		if err := last(); err != nil {
			return err
		}
	}
	return cmd.Start()
}

// enterAndDrop takes the calling, locked thread into b's mount namespace
// and empties its bounding and ambient capability sets: the steps that
// change the thread but do not confine it yet (a ready thread does them
// ahead of its Start).
func (b *sandboxBuilt) enterAndDrop(lastCap int) error {
	if b.mntns >= 0 {
		// A thread shares its root and directory with the others until
		// it unshares them, and setns refuses a shared one.
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			return xerrors.Errorf("unshare fs: %w", err)
		}
		if err := unix.Setns(b.mntns, unix.CLONE_NEWNS); err != nil {
			return xerrors.Errorf("join mount namespace: %w", err)
		}
	}
	if b.dropCaps {
		// The bounding set goes, then the ambient set. On exec the kernel
		// grants root its bounding set, so with the set empty the shell
		// (uid 0) and every program it runs, file capabilities or setuid
		// included, start with no capability
		// (TestSandboxRootHasNoCapabilities, which also reads CapBnd). It
		// takes a prctl per capability, each a new set of credentials, a
		// cost per Start (docs/measurements.md) which the ready thread
		// takes off the Start. Dropping the thread's own sets with
		// one capset would do under no_new_privs for less, but leaves the
		// child a full bounding set, and the bounding set is what the
		// sandbox promises to drop. The thread keeps its effective set,
		// which joining the network namespace after this needs.
		for c := 0; c <= lastCap; c++ {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
				return xerrors.Errorf("drop capability %d from the bounding set: %w", c, err)
			}
		}
		if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
			return xerrors.Errorf("clear ambient capabilities: %w", err)
		}
	}
	return nil
}

// confine joins b's network namespace and confines the calling, locked
// thread: no_new_privs, inNetns if not nil, Landlock, seccomp. The order
// is forced: setns needs the capabilities no_new_privs keeps but the
// seccomp filter refuses it, and Landlock and seccomp need no_new_privs
// (Landlock without CAP_SYS_ADMIN, which the tree must not keep).
func (b *sandboxBuilt) confine(inNetns func() error) error {
	if b.netns >= 0 {
		if err := unix.Setns(b.netns, unix.CLONE_NEWNET); err != nil {
			return xerrors.Errorf("join network namespace: %w", err)
		}
	}
	if b.dropCaps {
		// As root, an IPC namespace of the tree's own: System V shared
		// memory, queues and semaphores are checked by owner only, which
		// a root tree is (TestAttackSysVSharedMemory). About 45 µs; the
		// namespace and what the tree made in it go with its last process.
		if err := unix.Unshare(unix.CLONE_NEWIPC); err != nil {
			return xerrors.Errorf("unshare ipc: %w", err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return xerrors.Errorf("set no_new_privs: %w", err)
	}
	if inNetns != nil {
		if err := inNetns(); err != nil {
			return err
		}
	}
	if b.ruleset >= 0 {
		if err := landlockRestrict(b.ruleset); err != nil {
			return err
		}
	}
	if b.filter != nil {
		if err := seccompInstall(b.filter); err != nil {
			return err
		}
	}
	return nil
}

// readyThread is a goroutine locked to a thread on which a built policy's
// steps are done (enterAndDrop, then confine unless its Starts have an
// inNetns hook), waiting for the one Start it serves. Its thread runs
// nothing but that wait and the Start's fork, and is discarded after it
// or when the ready thread is thrown away unused (the goroutine exits locked), as
// onThrowawayThread's are: a confined thread never goes back to the
// runtime's pool. A host therefore has at most one confined thread per
// Manager besides those of Starts in flight, the ready thread, which
// TestSandboxHostNeverConfined tells apart by its thread ID.
type readyThread struct {
	b        *sandboxBuilt
	confined bool          // confine was done too, without an inNetns hook
	tid      int           // the thread's ID, set before ready is closed
	ready    chan struct{} // closed once the steps succeeded
	fail     chan struct{} // closed if it could not be made
	work     chan func()
	quit     chan struct{} // closed to discard it unused
}

// readyThreadStarts counts the Starts that took a ready thread, readyThreadsMade the
// ready threads made.
var readyThreadStarts, readyThreadsMade atomic.Int64

// do runs fn on st's thread and returns its error. The caller waits on a
// channel, not on onThrowawayThread's pipe: the caller's wake-up after a
// ready thread measured the same at the median either way, but through the
// pipe its tail was many times longer, waiting for a thread to poll the
// network poller (docs/measurements.md).
func (st *readyThread) do(fn func() error) error {
	done := make(chan error, 1)
	st.work <- func() { done <- fn() }
	return <-done
}

// takeReadyThread returns the cache's ready thread if it is ready and made for
// b, and hands it over (the cache then has none). A Start with an inNetns
// hook (ahead false) cannot use a ready thread confined ahead, which is thrown
// away.
func (c *sandboxCache) takeReadyThread(b *sandboxBuilt, ahead bool) *readyThread {
	c.readyThreadMu.Lock()
	defer c.readyThreadMu.Unlock()
	st := c.readyThread
	if st == nil || st.b != b {
		return nil
	}
	if st.confined && !ahead {
		close(st.quit)
		c.readyThread = nil
		return nil
	}
	select {
	case <-st.ready:
		c.readyThread = nil
		return st
	case <-st.fail:
		c.readyThread = nil
		return nil
	default:
		return nil // still being made: this Start does not wait for it
	}
}

// makeReadyThread is called after each Start of b and makes a ready thread for
// b in the background when the Start before was of b too, unless the
// cache has one for b already or is closed. ahead says whether the ready
// thread may be confined all the way (the Start had no inNetns hook); if not,
// and b has no other step to do ahead, none is made. A ready thread made for
// another policy is discarded: the cache keeps one, for the policy of the
// last Starts. Starts that take turns between policies get none, rather
// than have one made and thrown away each time.
func (c *sandboxCache) makeReadyThread(b *sandboxBuilt, lastCap int, ahead bool) {
	if b.uncached || (!ahead && b.mntns < 0 && !b.dropCaps) {
		return
	}
	c.readyThreadMu.Lock()
	defer c.readyThreadMu.Unlock()
	prev := c.lastStart
	c.lastStart = b
	if c.readyThreadClosed || prev != b || (c.readyThread != nil && c.readyThread.b == b && c.readyThread.confined == ahead) {
		return
	}
	if c.readyThread != nil {
		close(c.readyThread.quit)
	}
	st := &readyThread{b: b, confined: ahead, ready: make(chan struct{}), fail: make(chan struct{}),
		work: make(chan func()), quit: make(chan struct{})}
	c.readyThread = st
	readyThreadsMade.Add(1)
	c.threadMakers.Add(1)
	// The ready thread holds b: b's descriptors stay open until it is done,
	// even if b is found stale and evicted meanwhile.
	c.mu.Lock()
	b.users++
	c.mu.Unlock()
	go func() {
		defer c.threadMakers.Done()
		defer b.done()
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// Not while a Manager holds the main thread (mainHold); the
			// main thread is never changed, and it is never discarded.
			runtime.UnlockOSThread()
			close(st.fail)
			return
		}
		if err := b.enterAndDrop(lastCap); err != nil {
			close(st.fail) // the next Start does the steps itself and reports it
			return         // locked: a thread changed halfway is discarded
		}
		if st.confined {
			if err := b.confine(nil); err != nil {
				close(st.fail)
				return // locked: discarded
			}
		}
		st.tid = unix.Gettid()
		close(st.ready)
		select {
		case w := <-st.work:
			w()
		case <-st.quit:
		}
		// Returns locked: the thread, changed, is discarded.
	}()
}

// makeNetns makes a network namespace on a throwaway thread and returns a
// descriptor of it; up brings its loopback up.
func makeNetns(up bool) (int, error) {
	fd := -1
	err := onThrowawayThread(func() error {
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

// mountSpec is what a policy's mount namespace is made of.
type mountSpec struct {
	write, readOnly, hide []string
	empty                 string // the empty file hidden files are covered with
}

// mountView is a policy's mount namespace: a descriptor of it to join, and
// one of its mountinfo, which poll(2) reports as changed (POLLPRI) when a
// mount in it comes or goes. Both kinds of change unprotect a path: a
// mount the host makes later propagates in writable, and a cover whose
// path the host replaces (a rename over a hidden file, a .git removed and
// made again) is detached from this namespace too.
type mountView struct {
	ns, events int
}

// makeMountns makes the mount namespace of spec on a throwaway thread:
//
//   - every mount read-only (mount_setattr, recursive), so that nothing
//     outside Write changes, metadata included (chmod, chown, utimes,
//     xattrs, mknod): Landlock has no right for those;
//   - each of write a writable bind of itself (recursive), and each of
//     readOnly, inside write, a read-only bind of itself;
//   - each of hide covered, a directory by an empty read-only tmpfs of
//     mode 000, anything else by empty (an empty file of mode 000). A
//     symbolic link is left alone: its target is in hide too
//     (resolvePaths), and a mount would land on the target anyway.
//
// Device nodes stay usable on a read-only mount (the kernel checks the
// mount for regular files, directories and links only), so /dev/null and
// the pty of a TTY request still take writes. Mounts the host makes later
// propagate in (a slave of the host's), writable: the view's events tell
// the next Start to build the namespace again. A tree in it cannot undo a
// mount: it has no capabilities.
func makeMountns(spec mountSpec) (mountView, error) {
	v := mountView{ns: -1, events: -1}
	err := onThrowawayThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			return xerrors.Errorf("unshare: %w", err)
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
			return xerrors.Errorf("make mounts slaves: %w", err)
		}
		// Mounts below a Write directory that the host made read-only stay
		// so: the writable binds below clear the flag on whole trees.
		hostRO, rerr := readOnlyMountsWithin(spec.write)
		if rerr != nil {
			return rerr
		}
		if err := unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE,
			&unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
			return xerrors.Errorf("make every mount read-only: %w", err)
		}
		for _, p := range spec.write {
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
		for _, p := range spec.readOnly {
			if _, err := os.Stat(p); err != nil {
				continue // missing: the policy warns (mountWatch)
			}
			if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
				return xerrors.Errorf("bind %s: %w", p, err)
			}
			if err := unix.MountSetattr(unix.AT_FDCWD, p, unix.AT_RECURSIVE,
				&unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
				return xerrors.Errorf("make %s read-only: %w", p, err)
			}
		}
		for _, h := range spec.hide {
			st, err := os.Lstat(h)
			if err != nil || st.Mode()&os.ModeSymlink != 0 {
				continue // nothing there to hide (mountWatch looks again), or a link whose target is hidden
			}
			if st.IsDir() {
				err = unix.Mount("tmpfs", h, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,nr_inodes=1,mode=000")
			} else {
				err = unix.Mount(spec.empty, h, "", unix.MS_BIND, "")
				if err == nil {
					// A bind takes its mount's flags, not the read-only
					// view's: read-only too, so the cover cannot be chmod'ed.
					err = unix.MountSetattr(unix.AT_FDCWD, h, 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
				}
			}
			if err != nil {
				return xerrors.Errorf("cover %s: %w", h, err)
			}
		}
		var err error
		if v.ns, err = unix.Open(procfs.ThreadSelfFile("ns/mnt"), unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
			return err
		}
		// Opened last: it reports the changes after these mounts.
		v.events, err = unix.Open(procfs.ThreadSelfFile("mountinfo"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		v.close()
		return mountView{ns: -1, events: -1}, err
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
	for line := range strings.SplitSeq(string(data), "\n") {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS ...
		f := strings.Fields(line)
		if len(f) < 6 || !slices.Contains(strings.Split(f[5], ","), "ro") {
			continue
		}
		mp := unescapeMountinfo(f[4])
		if slices.ContainsFunc(dirs, func(d string) bool { return within(mp, d) }) {
			out = append(out, mp)
		}
	}
	return out, nil
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, "\\") {
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

// close closes v's descriptors.
func (v *mountView) close() {
	for _, fd := range []*int{&v.ns, &v.events} {
		if *fd >= 0 {
			_ = unix.Close(*fd)
			*fd = -1
		}
	}
}

// changed reports whether a mount came or went in v since it was made or
// last asked (poll with no wait: one system call per Start).
func (v *mountView) changed() bool {
	if v.events < 0 {
		return false
	}
	fds := []unix.PollFd{{Fd: int32(v.events), Events: unix.POLLPRI}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents&(unix.POLLPRI|unix.POLLERR) != 0
}

// mountWatch is what a built mount namespace was made from, to find out at
// each Start whether it still protects what its policy names: hiding and
// ReadOnly are rules, not a snapshot of the paths that existed at the
// first Start. A path that was covered is watched through the view's
// mount events, since replacing it detaches its cover. A path missing when
// the namespace was made could not be covered: the Manager's dirWatcher
// watches the nearest existing directory above each such path for the one
// name that matters there, so that each Start reads one inotify instance
// (a read that finds nothing) instead of looking up every missing path,
// which measured an order of magnitude dearer under WorkspaceSandbox
// (docs/measurements.md). Without inotify each Start looks up the missing
// paths.
type mountWatch struct {
	missing []string
	dirs    *dirWatcher // nil: look up every missing path
	regs    []dirReg    // what dirs holds for w, dropped by close
	stale   atomic.Bool
}

// dirReg is one name watched for in one directory.
type dirReg struct {
	wd   int32
	name string
}

// dirWatcher is a Manager's one inotify instance, shared by its built
// policies (inotify's per-user limit on instances is 128 by default, and
// the host may need its own). Each watched directory reports a name
// appearing in it (created or renamed in) or itself going.
type dirWatcher struct {
	mu    sync.Mutex
	made  bool // ino has been made (or failed, or closed)
	ino   int  // -1: failed or closed
	names map[int32]map[string][]*mountWatch
}

const dirWatchEvents = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

// newMountWatch lists what of spec's paths does not exist now
// and, with dirs, watches for it. It runs before the namespace is made: a
// path that appears in between is either covered by it or reported.
func newMountWatch(spec mountSpec, dirs *dirWatcher) *mountWatch {
	w := &mountWatch{}
	// A Write directory made later must be bound writable too, or it would
	// stay read-only in the view.
	for _, p := range slices.Concat(spec.readOnly, spec.hide, spec.write) {
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil {
			w.missing = append(w.missing, p)
		}
	}
	if dirs != nil && dirs.add(w) {
		w.dirs = dirs
	}
	// A path made between the lookup above and its watch is looked up
	// once more by the namespace's making, which covers it.
	return w
}

// add watches the directories above w's missing paths and reports whether
// it could watch them all; if not, it holds nothing for w.
func (d *dirWatcher) add(w *mountWatch) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.made {
		d.made = true
		ino, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
		if err != nil {
			ino = -1
		}
		d.ino = ino
		d.names = map[int32]map[string][]*mountWatch{}
	}
	if d.ino < 0 {
		return false
	}
	for _, p := range w.missing {
		dir, name := filepath.Dir(p), filepath.Base(p)
		for {
			wd, err := unix.InotifyAddWatch(d.ino, dir, dirWatchEvents)
			if err == nil {
				r := dirReg{int32(wd), name}
				if d.names[r.wd] == nil {
					d.names[r.wd] = map[string][]*mountWatch{}
				}
				d.names[r.wd][name] = append(d.names[r.wd][name], w)
				w.regs = append(w.regs, r)
				break
			}
			if (err != unix.ENOENT && err != unix.ENOTDIR) || dir == "/" {
				d.dropLocked(w)
				return false
			}
			dir, name = filepath.Dir(dir), filepath.Base(dir)
		}
	}
	return true
}

// dropLocked forgets w. The kernel's watches stay: another policy may
// share them, and they are few (one per directory).
func (d *dirWatcher) dropLocked(w *mountWatch) {
	for _, r := range w.regs {
		d.names[r.wd][r.name] = slices.DeleteFunc(d.names[r.wd][r.name], func(o *mountWatch) bool { return o == w })
	}
	w.regs = nil
}

// read drains the instance and marks stale every watch an event matters
// to. The lock is held across the reads, which never block (the instance
// is non-blocking): a Start that finds the queue emptied by a concurrent
// Start must also find the verdict that Start reached.
func (d *dirWatcher) read() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.made || d.ino < 0 {
		return
	}
	var buf [4096]byte
	for {
		n, err := unix.Read(d.ino, buf[:])
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return // EAGAIN: nothing more
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := ""
			if ev.Len > 0 {
				raw := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
				name = string(raw[:max(0, slices.Index(raw, 0))])
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
			var hit []*mountWatch
			switch {
			case ev.Mask&unix.IN_Q_OVERFLOW != 0: // events lost: any may matter
				for _, byName := range d.names {
					for _, ws := range byName {
						hit = append(hit, ws...)
					}
				}
			case ev.Mask&(unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0: // the directory went
				for _, ws := range d.names[ev.Wd] {
					hit = append(hit, ws...)
				}
			default:
				hit = d.names[ev.Wd][name]
			}
			for _, w := range hit {
				w.stale.Store(true)
			}
		}
	}
}

// close closes the instance (the Manager's Close).
func (d *dirWatcher) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.made && d.ino >= 0 {
		_ = unix.Close(d.ino)
	}
	d.made, d.ino, d.names = true, -1, nil
}

// close lets go of what w holds in its dirWatcher.
func (w *mountWatch) close() {
	if w.dirs != nil {
		w.dirs.mu.Lock()
		if w.dirs.names != nil {
			w.dirs.dropLocked(w)
		}
		w.dirs.mu.Unlock()
		w.dirs = nil
	}
}

// changed reports whether v no longer covers what w was made for: a mount
// event in v, or a path then missing that exists now or may (a directory
// above it appeared or went). Once it has said so it keeps saying so.
func (w *mountWatch) changed(v *mountView) bool {
	if w.stale.Load() {
		return true
	}
	if v.changed() {
		w.stale.Store(true)
		return true
	}
	if w.dirs != nil {
		w.dirs.read()
		return w.stale.Load()
	}
	for _, p := range w.missing {
		var st unix.Stat_t
		if unix.Lstat(p, &st) == nil {
			w.stale.Store(true)
			return true
		}
	}
	return false
}

// missingReadOnly is the ReadOnly paths that did not exist when the
// namespace was made, which it cannot protect: a tree may create them.
func (w *mountWatch) missingReadOnly(readOnly []string) []string {
	var out []string
	for _, p := range w.missing {
		if slices.Contains(readOnly, p) {
			out = append(out, p)
		}
	}
	return out
}

// hostDoors are the pathname Unix sockets, and the directories that hold
// them, through which a tree could act as the host's user outside the
// sandbox: credential agents and container engines, agentproc's own serve
// socket, the system and session D-Bus, systemd's private and varlink
// sockets, and tmux's and screen's (a command typed into the host's
// terminal multiplexer runs unconfined). Landlock does not govern
// connect(2) to them, so as root they are covered in the mount namespace,
// existing or not: one missing now is covered at the first Start after it
// appears (mountWatch). A directory is covered whole, so a socket made in
// it later is covered at once. Without root they stay reachable (the
// "What does not hold" in docs/sandbox.md says so); only the variables that name
// them are dropped.
func hostDoors() []string {
	uid := strconv.Itoa(os.Getuid())
	cands := []string{
		"/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock",
		"/run/podman/podman.sock", "/run/buildkit/buildkitd.sock",
		"/run/dbus", "/var/run/dbus", "/run/systemd/private", "/run/systemd/io.systemd.Manager",
		"/run/screen", "/var/run/screen",
		filepath.Join(os.TempDir(), "agentproc-"+uid), "/tmp/tmux-" + uid,
	}
	if m, err := filepath.Glob("/run/systemd/io.systemd.*"); err == nil {
		cands = append(cands, m...)
	}
	env := os.Getenv
	if p := env("SSH_AUTH_SOCK"); p != "" {
		cands = append(cands, p)
	}
	if h, ok := strings.CutPrefix(env("DOCKER_HOST"), "unix://"); ok {
		cands = append(cands, h)
	}
	if p := env("AGENTPROC_SOCKET"); p != "" {
		cands = append(cands, p)
	}
	if d := env("TMUX_TMPDIR"); d != "" {
		cands = append(cands, filepath.Join(d, "tmux-"+uid))
	}
	if t, _, _ := strings.Cut(env("TMUX"), ","); t != "" {
		cands = append(cands, filepath.Dir(t))
	}
	if d := env("SCREENDIR"); d != "" {
		cands = append(cands, d)
	}
	for part := range strings.SplitSeq(env("DBUS_SESSION_BUS_ADDRESS"), ";") {
		if p, ok := strings.CutPrefix(part, "unix:path="); ok {
			p, _, _ = strings.Cut(p, ",")
			cands = append(cands, p)
		}
	}
	if d := env("XDG_RUNTIME_DIR"); d != "" {
		cands = append(cands, d+"/docker.sock", d+"/podman/podman.sock", d+"/gnupg", d+"/agentproc",
			d+"/bus", d+"/systemd", d+"/tmux-"+uid)
	}
	var out []string
	for _, p := range cands {
		if filepath.IsAbs(p) {
			out = append(out, filepath.Clean(p))
		}
	}
	return resolvePaths(out)
}

// recycleTempDir moves dir, the private temp dir of a process that has
// finished, to a new name beside it and reports whether it can serve the
// next Start: still a directory of ours, mode 0700, without a default ACL,
// and empty. The checks run on the new name, after the move, through one
// descriptor opened without following links, so what they pass is what
// the path names. The old path is gone either way, as a removal would
// leave it; a tree that still held the directory open would only reach
// a temp dir of this Manager, which its ruleset grants anyway (the
// parent). It returns where the directory is now; the caller removes it
// when it cannot be reused.
func recycleTempDir(dir string) (string, bool) {
	parent := filepath.Dir(dir)
	for range 3 {
		next := filepath.Join(parent, "t-"+strconv.FormatUint(uint64(rand.Uint32()), 10))
		err := unix.Renameat2(unix.AT_FDCWD, dir, unix.AT_FDCWD, next, unix.RENAME_NOREPLACE)
		if err == unix.EEXIST {
			continue
		}
		if err != nil {
			return dir, false // RENAME_NOREPLACE unsupported here, or dir gone
		}
		return next, emptyPrivateDir(next)
	}
	return dir, false
}

// emptyPrivateDir reports whether p is an empty directory of this user
// with mode 0700 and no default ACL (which would widen what a later tree
// creates in it).
func emptyPrivateDir(p string) bool {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Uid != uint32(os.Geteuid()) || st.Mode&0o7777 != 0o700 {
		return false
	}
	if _, err := unix.Fgetxattr(fd, "system.posix_acl_default", nil); err != unix.ENODATA && err != unix.EOPNOTSUPP {
		return false
	}
	var buf [512]byte
	for {
		n, err := unix.ReadDirent(fd, buf[:])
		if err != nil {
			return false
		}
		if n == 0 {
			return true
		}
		if _, _, names := unix.ParseDirent(buf[:n], -1, nil); len(names) > 0 {
			return false
		}
	}
}

// tempLayer returns the second Landlock layer of one Start of pol under
// b that holds the tree to tmp among the Manager's temp dirs
// (landlockTempLayer), or -1 where b has no Landlock or pol no shared temp
// parent.
func (b *sandboxBuilt) tempLayer(pol *sandboxPolicy, tmp string) (int, error) {
	if b.ruleset < 0 || pol.tmpParent == "" || tmp == "" {
		return -1, nil
	}
	return landlockTempLayer(b.layer, b.info.LandlockABI, tmp)
}

// landlockLayer restricts the calling thread by the ruleset in f.
func landlockLayer(f *os.File) error {
	return landlockRestrict(int(f.Fd()))
}
