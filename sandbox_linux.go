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

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"

	"github.com/agentproc/agentproc/internal/procfs"
)

// The Linux sandbox. What each Start does, on a throwaway thread
// (onThrowawayThread), before forking the shell from it:
//
//  1. join the Manager's network namespace for NetworkNone or
//     NetworkLoopback (root; made once per Manager and network);
//  2. join the policy's mount namespace (root, for ReadOnly and to hide the
//     credential sockets; made once per policy);
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

	emptyOnce sync.Once
	emptyDir  string // holds the empty file hidden files are covered with
	emptyErr  error

	spareMu     sync.Mutex
	spare       *spareThread  // for the policy of the last Starts; nil if none
	lastStart   *sandboxBuilt // the policy of the last Start
	spareClosed bool
	spares      sync.WaitGroup // spare threads' goroutines, which close waits for
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
	ruleset  int // -1 without Landlock
	netns    int // -1: the host's
	mntns    int // -1: the host's
	dropCaps bool
	filter   []unix.SockFilter // nil without seccomp
	info     Confinement
	missing  []unenforced
	err      error
	uncached bool          // not in the cache: released by done
	cache    *sandboxCache // nil outside a Manager (a detached runner)
}

// done is called once by each Start that used b, when its tree is gone or
// never started.
func (b *sandboxBuilt) done() {
	if b.uncached {
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
		f.Missing = append(f.Missing, "loopback: needs root (a network namespace)", "ReadOnly: needs root (a mount namespace)")
	}
	if h.abi >= 4 && h.seccomp {
		f.Networks = append(f.Networks, NetworkPorts)
	}
	f.Supported = h.abi >= 6 && h.seccomp
	return f
}

// get returns pol built, building it on first use. The lock is held only
// to find the entry: building opens files and makes namespaces.
func (c *sandboxCache) get(pol *sandboxPolicy) (*sandboxBuilt, error) {
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
		b = &sandboxBuilt{ruleset: -1, netns: -1, mntns: -1, cache: c}
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
	c.mu.Unlock()
	b.once.Do(func() { b.err = c.build(b, pol) })
	if b.err != nil {
		// Not kept: a later Start may find the host able (a path made).
		c.mu.Lock()
		if c.built[pol.key] == b {
			delete(c.built, pol.key)
		}
		c.mu.Unlock()
		b.release()
	}
	return b, b.err
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
	e.once.Do(func() { e.fd, e.err = makeNetns(n == NetworkLoopback) })
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
		fd, err := makeMountns(pol.readOnly, append(append(slices.Clone(pol.hide), llHidden...), credentialSockets()...), empty)
		if err != nil {
			return xerrors.Errorf("mount namespace: %w", err)
		}
		b.mntns = fd
		hide = nil
		mech = append(mech, "mountns")
	} else if len(pol.readOnly) > 0 {
		b.missing = append(b.missing, unenforced{field: "ReadOnly", soft: true,
			reason: "needs root (a read-only bind mount in a mount namespace); Landlock cannot take write access back below a writable directory"})
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
	if b.mntns >= 0 {
		_ = unix.Close(b.mntns)
		b.mntns = -1
	}
}

// close releases every built policy and namespace.
func (c *sandboxCache) close() {
	c.spareMu.Lock()
	c.spareClosed = true
	if c.spare != nil {
		close(c.spare.quit)
		c.spare = nil
	}
	c.spareMu.Unlock()
	c.spares.Wait()
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
	c.emptyOnce.Do(func() {})
	if c.emptyDir != "" {
		_ = os.RemoveAll(c.emptyDir)
	}
}

// start confines a throwaway thread as b says and starts cmd from it.
// Where b has steps that do not yet confine the thread (the mount
// namespace and the emptied bounding set, as root), a Start without a
// step takes the spare thread the cache made ahead with those steps done,
// if there is one for b, and only confines and forks on it; the rest, and
// every Start with a step, take a fresh thread. The spare saves the Start
// the thread's making and those steps, about 60 µs, for a hand-off of
// one wake-up (docs/measurements.md).
func (b *sandboxBuilt) start(cmd *exec.Cmd, step threadStep) error {
	lastCap := sandboxHost().lastCap
	if step == nil && b.cache != nil {
		if st := b.cache.takeSpare(b); st != nil {
			spareStarts.Add(1)
			err := st.do(func() error { return b.confineAndStart(cmd) })
			b.cache.makeSpare(b, lastCap)
			return err
		}
		defer b.cache.makeSpare(b, lastCap)
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
		return b.confineAndStart(cmd)
	})
}

// enterAndDrop takes the calling, locked thread into b's mount namespace
// and empties its bounding and ambient capability sets: the steps that
// change the thread but do not confine it yet (a spare thread does them
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
		// takes a prctl per capability, each a new set of credentials:
		// about 50 µs per Start (docs/measurements.md), which the spare
		// thread takes off the Start. Dropping the thread's own sets with
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

// confineAndStart joins b's network namespace, confines the calling,
// locked thread (no_new_privs, Landlock, seccomp) and starts cmd from it,
// with no descriptor of the host's but those cmd names (closeInherited).
func (b *sandboxBuilt) confineAndStart(cmd *exec.Cmd) error {
	if err := closeInherited(cmd); err != nil {
		return err
	}
	if b.netns >= 0 {
		if err := unix.Setns(b.netns, unix.CLONE_NEWNET); err != nil {
			return xerrors.Errorf("join network namespace: %w", err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return xerrors.Errorf("set no_new_privs: %w", err)
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
	return cmd.Start()
}

// spareThread is a goroutine locked to a thread on which a built policy's
// enterAndDrop is done, waiting for the one Start it serves. It changes
// nothing a host check reads as confinement (no_new_privs, seccomp, the
// network namespace) until that Start, and its thread is discarded after
// it (the goroutine exits locked), as onThrowawayThread's are.
type spareThread struct {
	b     *sandboxBuilt
	ready chan struct{} // closed once enterAndDrop succeeded
	fail  chan struct{} // closed if it could not be made
	work  chan func()
	quit  chan struct{} // closed to discard it unused
}

// spareStarts counts the Starts that took a spare thread, sparesMade the
// spare threads made.
var spareStarts, sparesMade atomic.Int64

// do runs fn on st's thread and returns its error. The caller waits on a
// channel, not on onThrowawayThread's pipe: the caller's wake-up after a
// spare thread measured the same at the median either way, but through the
// pipe one in ten waited 400 µs or more, for a thread to poll the network
// poller (docs/measurements.md).
func (st *spareThread) do(fn func() error) error {
	done := make(chan error, 1)
	st.work <- func() { done <- fn() }
	return <-done
}

// takeSpare returns the cache's spare thread if it is ready and made for
// b, and hands it over (the cache then has none).
func (c *sandboxCache) takeSpare(b *sandboxBuilt) *spareThread {
	c.spareMu.Lock()
	defer c.spareMu.Unlock()
	st := c.spare
	if st == nil || st.b != b {
		return nil
	}
	select {
	case <-st.ready:
		c.spare = nil
		return st
	case <-st.fail:
		c.spare = nil
		return nil
	default:
		return nil // still being made: this Start does not wait for it
	}
}

// makeSpare is called after each Start of b and makes a spare thread for
// b in the background when the Start before was of b too, unless the
// cache has one for b already, is closed, or b has nothing to do ahead. A
// spare made for another policy is discarded: the cache keeps one, for the
// policy of the last Starts. Starts that take turns between policies get
// none, rather than have one made and thrown away each time.
func (c *sandboxCache) makeSpare(b *sandboxBuilt, lastCap int) {
	if b.uncached || (b.mntns < 0 && !b.dropCaps) {
		return
	}
	c.spareMu.Lock()
	defer c.spareMu.Unlock()
	prev := c.lastStart
	c.lastStart = b
	if c.spareClosed || prev != b || (c.spare != nil && c.spare.b == b) {
		return
	}
	if c.spare != nil {
		close(c.spare.quit)
	}
	st := &spareThread{b: b, ready: make(chan struct{}), fail: make(chan struct{}),
		work: make(chan func()), quit: make(chan struct{})}
	c.spare = st
	sparesMade.Add(1)
	c.spares.Add(1)
	go func() {
		defer c.spares.Done()
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
		close(st.ready)
		select {
		case w := <-st.work:
			w()
		case <-st.quit:
		}
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

// makeMountns makes a mount namespace on a throwaway thread in which each
// of readOnly is a read-only bind mount of itself and each of hide is
// covered, a directory by an empty read-only tmpfs of mode 000, anything
// else by empty (an empty file of mode 000), and returns a descriptor of
// it. Mounts the host makes later still propagate into it (a slave of the
// host's). A tree in it cannot undo a mount: it has no capabilities.
func makeMountns(readOnly, hide []string, empty string) (int, error) {
	fd := -1
	err := onThrowawayThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			return xerrors.Errorf("unshare: %w", err)
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
			return xerrors.Errorf("make mounts slaves: %w", err)
		}
		for _, p := range readOnly {
			if _, err := os.Lstat(p); err != nil {
				continue // nothing to protect yet
			}
			if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
				return xerrors.Errorf("bind %s: %w", p, err)
			}
			if err := unix.Mount("", p, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
				return xerrors.Errorf("read-only %s: %w", p, err)
			}
		}
		for _, h := range hide {
			st, err := os.Lstat(h)
			if err != nil {
				continue // nothing there to hide; what appears later is not covered
			}
			if st.IsDir() {
				err = unix.Mount("tmpfs", h, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,nr_inodes=1,mode=000")
			} else {
				err = unix.Mount(empty, h, "", unix.MS_BIND, "")
			}
			if err != nil {
				return xerrors.Errorf("cover %s: %w", h, err)
			}
		}
		var err error
		fd, err = unix.Open(procfs.ThreadSelfFile("ns/mnt"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		return err
	})
	return fd, err
}

// credentialSockets are the pathname Unix sockets that hand out the host's
// authority (an ssh agent, a container engine) and exist now. Landlock does
// not govern connect(2) to them, so as root they are covered in the mount
// namespace; without root they stay reachable (the README says so), and
// only the variables that name them are dropped.
func credentialSockets() []string {
	cands := []string{
		"/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock",
		"/run/podman/podman.sock", "/run/buildkit/buildkitd.sock",
	}
	if p := os.Getenv("SSH_AUTH_SOCK"); p != "" {
		cands = append(cands, p)
	}
	if h, ok := strings.CutPrefix(os.Getenv("DOCKER_HOST"), "unix://"); ok {
		cands = append(cands, h)
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		cands = append(cands, d+"/docker.sock", d+"/podman/podman.sock", d+"/gnupg/S.gpg-agent", d+"/gnupg/S.gpg-agent.ssh")
	}
	var out []string
	for _, p := range cands {
		if st, err := os.Lstat(p); err == nil && st.Mode()&os.ModeSocket != 0 {
			out = append(out, p)
		}
	}
	return out
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
