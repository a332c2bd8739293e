package agentproc

import (
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"

	"github.com/agentproc/agentproc/internal/cgroup"
	"github.com/agentproc/agentproc/internal/confine"
	"github.com/agentproc/agentproc/internal/osthread"
	"github.com/agentproc/agentproc/internal/procfs"
)

// The Linux sandbox. What each Start does, on a throwaway thread
// (osthread.Throwaway), before forking the shell from it:
//
//  1. join the Manager's network namespace for NetworkNone or
//     NetworkLoopback (root; made once per Manager and network);
//  2. join the policy's mount namespace (root: a read-only view of every
//     mount but Write, Hide and the host's doors covered, ReadOnly bound
//     read-only; made per policy, and again when a Start finds it no
//     longer covers what the policy names: confine.MountWatch), then a
//     copy of its own in which the Manager's temp parent shows the tree's
//     own temp dir alone (confine.PrivateTemp);
//  3. drop the capability bounding set and the ambient set (root), so that
//     the shell, uid 0 but without capabilities after exec, can neither
//     rejoin the host's namespaces nor read the host's /proc files;
//  4. set no_new_privs, which Landlock and seccomp need without
//     CAP_SYS_ADMIN and which keeps setuid binaries from undoing 3;
//  5. restrict the thread with the policy's Landlock ruleset (made once per
//     policy; as root with a temp dir, each tree adds the rule of its own
//     temp dir to it first: LandlockShared), and without root a
//     second layer per tree that leaves the other trees' temp dirs out
//     (treeRulesets);
//  6. install the seccomp filter (per thread, no TSYNC).
//
// The thread then forks the shell (cmd.Start), which inherits all of it,
// and is thrown away. Nothing else in the process is ever confined. A
// failure of any step fails the Start and nothing runs.
//
// Each step's mechanism lives in internal/confine, which takes plain data;
// this file decides which steps a policy gets on this host, translates the
// policy into that data (build), and caches what it built per policy.
//
// Pdeathsig is never set on a sandboxed child: it fires when the thread
// that forked it exits, which here is at once. The null device of a child
// without stdin is opened by the host once (childStdin), before any
// confinement.

// sandboxThreadUser registers a Manager that makes throwaway threads or
// cgroup v1 thread placements, so that the main thread is kept out of
// their way while it is open (osthread.HoldMain); the returned func
// releases it.
func sandboxThreadUser() (release func()) { return osthread.HoldMain() }

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

	dirs confine.DirWatcher // watches for the missing paths of built policies (confine.MountWatch)

	emptyOnce sync.Once
	emptyDir  string // holds the empty file hidden files are covered with
	emptyErr  error

	readyThreadMu sync.Mutex
	// readyThreads holds a ready thread per policy started more than once,
	// at most maxReadyThreads (makeReadyThread).
	readyThreads      map[*sandboxBuilt]*readyThread
	startSeq          uint64 // the Starts that made or took a ready thread, numbering sandboxBuilt.lastStart
	readyThreadClosed bool
	threadMakers      sync.WaitGroup // ready threads' goroutines, which close waits for

	// takeTemp and giveTemp, set by supplyTemps, hand a ready thread the
	// private temp dir of the Start it will serve and take back one no
	// Start took; nil before the Manager's temp parent is made.
	takeTemp  func() (string, error)
	giveTemp  func(string)
	tmpParent string // the Manager's temp parent, resolved; "" before it is made
}

// supplyTemps sets where ready threads get the temp dirs they reserve
// (PrivateTemp needs the Start's own dir before the thread is confined).
func (c *sandboxCache) supplyTemps(parent string, take func() (string, error), give func(string)) {
	parent = resolvePath(parent)
	c.readyThreadMu.Lock()
	c.takeTemp, c.giveTemp, c.tmpParent = take, give, parent
	c.readyThreadMu.Unlock()
}

// emptyFile returns an empty file of mode 000 in a directory of its own,
// made once, for confine.MakeMountns to cover hidden files with. The file
// and its directory are made immutable where the file system allows it:
// they lie in os.TempDir(), which a policy's Write may hold (Write:
// ["/tmp"]), and a tree there is the file's owner (uid 0), which may chmod
// and write it, and so every hidden file of every tree of the Manager
// read as what it wrote (TestAttackCoverFileInWrite). Immutable, neither
// can be changed, renamed, removed or linked to, except by the host
// (CAP_LINUX_IMMUTABLE), which clears the flags at Close.
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
		if c.emptyErr == nil && setImmutable(f.Name(), true) == nil {
			_ = setImmutable(dir, true)
		}
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
	once    sync.Once
	ruleset int // -1 without Landlock, or with shared
	// shared, with a mount namespace and tmpParent, is the policy's
	// ruleset to which each tree adds its own temp dir (treeRulesets); nil
	// otherwise.
	shared *confine.LandlockShared
	// tmpLayer, without a mount namespace, makes each tree's second
	// Landlock layer (treeRulesets), which leaves out the other trees' temp
	// dirs; nil otherwise.
	tmpLayer *confine.LandlockTemplate
	netns    int                 // -1: the host's
	mntns    int                 // -1: the host's
	view     confine.MountView   // the mount namespace made here (ns is mntns); -1s in a runner
	watch    *confine.MountWatch // nil without a mount namespace made here
	users    int                 // the Starts and ready threads using b; guarded by cache.mu
	evicted  bool                // taken out of the cache as stale: the last user releases it
	dropCaps bool
	filter   []unix.SockFilter // nil without seccomp
	info     Confinement
	missing  []unenforced
	err      error
	uncached bool          // not in the cache: released by done
	cache    *sandboxCache // nil outside a Manager (a detached runner)
	// tmpParent is the Manager's temp parent (resolved), which holds the
	// private temp dirs of all its trees; "" without (NoDefaultWrite, a
	// detached runner). Each tree is confined to its own dir there: as root
	// its own mount namespace covers the rest (confine.PrivateTemp) and
	// its ruleset (shared) grants its dir; without root a second layer
	// (tmpLayer) does. A ready thread therefore reserves the temp dir of
	// the Start it serves.
	tmpParent string
	// hosts: NetworkHosts; each Start's thread makes the tree's proxy
	// listener in the network namespace (makeHostsListener), a ready
	// thread ahead of its Start.
	hosts bool
	// starts counts the Starts of b that could have a ready thread, and
	// lastStart is the cache's startSeq at the last; both guarded by the
	// cache's readyThreadMu (makeReadyThread).
	starts    int
	lastStart uint64
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
	h := hostCaps{abi: min(confine.LandlockABI(), confine.LandlockMaxABI), lastCap: 40}
	if n, ok := procfs.SysInt("kernel/cap_last_cap"); ok && n > 0 && n < 64 {
		h.lastCap = n
	}
	status, _ := procfs.ReadSelf("status")
	_, hasSeccomp := procfs.StatusField(status, "Seccomp")
	h.seccomp = confine.SeccompArch != 0 && hasSeccomp
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
// (confine.MountWatch). The lock is held only to find the entry: building opens
// files and makes namespaces. Each get is matched by one done.
func (c *sandboxCache) get(pol *sandboxPolicy) (*sandboxBuilt, error) {
	for attempt := 0; ; attempt++ {
		b, err := c.getOnce(pol)
		if err != nil || b.watch == nil || attempt > 0 || !b.watch.Changed(&b.view) {
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
		b = &sandboxBuilt{ruleset: -1, netns: -1, mntns: -1, view: confine.MountView{NS: -1, Events: -1, Live: -1}, cache: c}
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
	e.once.Do(func() { e.fd, e.err = confine.MakeNetns(n != NetworkNone) })
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
	net, err := c.buildNetwork(b, pol, h, &mech)
	if err != nil {
		return err
	}
	// As root the hidden paths (and the credential sockets) are covered in
	// a mount namespace, and the Landlock ruleset grants whole trees: a
	// few rules instead of one per entry of every directory above a hidden
	// path, which costs at every Start (landlock_restrict_self copies the
	// rules) and leaves entries made later unreadable.
	if pol.tmpParent != "" && b.cache != nil {
		// A detached runner's pol.tmpParent is its tree's own temp dir, not
		// a parent shared with other trees.
		b.tmpParent = resolvePath(pol.tmpParent)
	}
	// A policy whose trees have no temp dir in the Manager's temp parent
	// (NoDefaultWrite, a detached tree's own) would otherwise read the
	// others' there: the parent is hidden whole, unless a Write directory
	// holds it (which the policy grants, and so does not hide).
	hidden := pol.hide
	c.readyThreadMu.Lock()
	managerTmp := c.tmpParent
	c.readyThreadMu.Unlock()
	// As root the mount namespace covers it even where a Write directory
	// holds it (Write: ["/tmp"]): a cover is a mount the tree cannot undo,
	// where Landlock cannot take back what it granted
	// (TestAttackTempDirFromNoDefaultWriteWide).
	mountHidden := hidden
	if managerTmp != "" && b.tmpParent == "" {
		covers := tempCovers(managerTmp)
		if !inResolved(tempCover(managerTmp), pol.write) {
			hidden = append(slices.Clone(pol.hide), covers...)
		}
		mountHidden = append(slices.Clone(pol.hide), covers...)
	}
	hide := confine.LandlockHidden(hidden)
	if h.root && pol.skip&sandboxSkipMountns == 0 {
		if hide, err = c.buildMountns(b, pol, hidden, mountHidden); err != nil {
			return err
		}
		mech = append(mech, "mountns")
	} else {
		if len(pol.readOnly) > 0 {
			b.missing = append(b.missing, unenforced{field: "ReadOnly", soft: true,
				reason: "needs root (a read-only bind mount in a mount namespace); Landlock cannot take write access back below a writable directory"})
		}
		b.missing = append(b.missing, unenforced{field: "Write", soft: true,
			reason: "metadata outside Write (mode, owner, times, extended attributes) is not protected without root (a read-only view in a mount namespace): Landlock has no right for chmod, chown, utimes or setxattr"})
	}
	if !traceAtExec() {
		b.missing = append(b.missing, unenforced{field: "Write", soft: true, reason: noCoreLimitReason})
	}
	if h.root && pol.skip&sandboxSkipCaps == 0 {
		b.dropCaps = true
		mech = append(mech, "capabilities")
	}
	mech = append(mech, "no_new_privs")
	if h.abi > 0 && pol.skip&sandboxSkipLandlock == 0 {
		if err := b.buildLandlock(pol, h, hide); err != nil {
			return err
		}
		mech = append(mech, "landlock")
	}
	if h.seccomp && pol.skip&sandboxSkipSeccomp == 0 {
		b.filter = confine.SeccompFilter(net)
		mech = append(mech, "seccomp")
	}
	b.info.Mechanisms = mech
	return nil
}

// buildNetwork sets up pol's network for b (a namespace as root, the
// proxy for NetworkHosts) and returns the seccomp rules it needs.
func (c *sandboxCache) buildNetwork(b *sandboxBuilt, pol *sandboxPolicy, h hostCaps, mech *[]string) (confine.SeccompRules, error) {
	net := confine.SeccompOwnNet
	switch pol.network {
	case NetworkNone, NetworkLoopback:
		if pol.network == NetworkNone {
			net = confine.SeccompNone // inside the empty namespace too
		}
		if h.root && pol.skip&sandboxSkipNetns == 0 {
			fd, err := c.namespace(pol.network)
			if err != nil {
				return net, xerrors.Errorf("network namespace: %w", err)
			}
			b.netns = fd
			*mech = append(*mech, "netns")
		} else if pol.network == NetworkLoopback {
			b.missing = append(b.missing, unenforced{field: "Network", reason: "a private loopback needs a network namespace, which needs root"})
		}
	case NetworkPorts:
		if h.abi < 4 {
			b.missing = append(b.missing, unenforced{field: "AllowPorts", reason: "TCP port rules need Landlock ABI 4 (Linux 6.7)"})
		}
		net = confine.SeccompPorts
	case NetworkHosts:
		// The tree reaches only its proxy listener: TCP that Landlock's
		// port rule checks, as NetworkPorts.
		net = confine.SeccompPorts
		b.hosts = true
		if err := c.buildHosts(b, pol, h, mech); err != nil {
			return net, err
		}
	}
	return net, nil
}

// buildMountns makes b's mount namespace as root: mountHidden covered,
// Write and ReadOnly bound, watched for what is made later. It returns
// what b's Landlock ruleset leaves out below the covers.
func (c *sandboxCache) buildMountns(b *sandboxBuilt, pol *sandboxPolicy, hidden, mountHidden []string) ([]string, error) {
	empty, err := c.emptyFile()
	if err != nil {
		return nil, xerrors.Errorf("mount namespace: %w", err)
	}
	// The doors join here, after the policy's own other names were
	// looked for: theirs are looked for now (a door's directory mounted
	// a second time, TestAttackDoorOtherMount), one more read of
	// mountinfo per build.
	doors := hostDoors()
	if pol.network != NetworkHost {
		// Resolved as the doors are: /dev/log is a link to journald's
		// socket on systemd hosts, to a syslog daemon's elsewhere.
		doors = append(doors, resolvePaths(networkDoors)...)
	}
	spec := confine.MountSpec{Write: pol.write, ReadOnly: pol.readOnly, Empty: empty,
		Hide: slices.Concat(mountHidden, confine.HiddenDevices, doors, hiddenMountAliases(doors))}
	// What is missing is listed before the namespace is made: a path
	// made in between is then found by the next Start.
	var dirs *confine.DirWatcher
	if b.cache != nil { // a Manager's: checked at each Start
		dirs = &c.dirs
	}
	b.watch = confine.NewMountWatch(spec, dirs)
	v, err := confine.MakeMountns(spec)
	if err != nil {
		return nil, xerrors.Errorf("mount namespace: %w", err)
	}
	if err := b.watch.Live(&v, spec); err != nil && b.cache != nil {
		// (A detached runner's policy, built outside the cache, is
		// not repaired live: docs/sandbox-threats.md says so.)
		// The Start-time check still holds for the next Starts.
		b.missing = append(b.missing, unenforced{field: "Hide", soft: true,
			reason: "a hidden or ReadOnly path made or replaced while this tree runs is covered from the next Start only: " + err.Error()})
	}
	b.view = v
	b.mntns = v.NS
	// Landlock still leaves hide out, below the covers: the live repair
	// re-covers a path made or replaced while a tree runs, but a tree
	// that waits for the host's change (inotify) reads it first, 50
	// times in 50 (docs/sandbox-threats.md, third attack review, root);
	// a file made after the ruleset has no rule to be read through.
	// The terminals (HiddenDevices) stay with the covers alone: the
	// host does not make them again. The tree is uid 0, the owner of
	// every device node, so the ones no other user may open
	// (HostDevices: raw disks, the host's other terminals and screens)
	// are left out here, and /dev is granted entry by entry: a device
	// made later has no rule (fifth attack review). The ruleset is made
	// once per policy (confine.LandlockShared); a Start pays for the few
	// more rules landlock_restrict_self copies, not measurable here
	// (docs/sandbox-threats.md).
	hide := slices.Concat(hidden, confine.HostDevices())
	for _, p := range b.watch.MissingReadOnly(pol.readOnly) {
		b.missing = append(b.missing, unenforced{field: "ReadOnly", soft: true,
			reason: p + " does not exist: the tree may create it, and it is protected from the next Start on"})
	}
	for _, p := range b.watch.LinkedReadOnly() {
		b.missing = append(b.missing, unenforced{field: "ReadOnly", soft: true,
			reason: p + " is a link out of its writable directory, left alone: the tree may replace it, and what it puts there is protected from the next Start on"})
	}
	return hide, nil
}

// buildLandlock makes b's Landlock rulesets: pol's rules leaving hide
// out, and what keeps each tree to its own temp dir.
func (b *sandboxBuilt) buildLandlock(pol *sandboxPolicy, h hostCaps, hide []string) error {
	b.info.LandlockABI = h.abi
	if b.tmpParent != "" && b.mntns >= 0 {
		// The tree's own namespace covers the temp parent, so a grant on
		// it reaches nothing: each tree's ruleset grants its own temp dir
		// instead (treeRulesets), added to the policy's ruleset
		// (confine.LandlockShared), which so grants the earlier trees'
		// dirs too: each tree's namespace shows its own alone.
		s, err := confine.NewLandlockShared(landlockRules(pol, hide), h.abi, b.tmpParent)
		if err != nil {
			return err
		}
		b.shared = s
	} else if rs, err := confine.LandlockRuleset(landlockRules(pol, hide), h.abi); err != nil {
		return err
	} else {
		b.ruleset = rs
	}
	if b.tmpParent != "" && b.mntns < 0 && inResolved(b.tmpParent, slices.DeleteFunc(slices.Clone(pol.write), func(w string) bool { return w == b.tmpParent })) {
		// A Write directory holds the parent: it grants the other trees'
		// temp dirs, and a layer leaving the parent out would take the
		// making of entries in that directory away.
		b.missing = append(b.missing, unenforced{field: "Write", soft: true,
			reason: "a Write directory holds the Manager's temp parent " + b.tmpParent + ": without root its trees can reach each other's temp dirs"})
	} else if b.tmpParent != "" && b.mntns < 0 {
		// Without a namespace the first layer grants the parent: a
		// second, per tree, grants what the first does but the parent,
		// and the tree's own dir. Landlock grants only, so leaving the
		// parent out takes a rule per entry of each directory above it
		// (tempParentBase keeps them few).
		r := confine.Rules{Read: pol.read, Shell: pol.shell, Write: pol.write, Hide: tempCovers(b.tmpParent), FilesOnly: true}
		t, err := confine.NewLandlockTemplate(r, h.abi, b.tmpParent)
		if err != nil {
			return err
		}
		b.tmpLayer = t
	}
	return nil
}

// landlockRules is the Landlock part of pol, as the plain data
// internal/confine applies, leaving out hide.
func landlockRules(pol *sandboxPolicy, hide []string) confine.Rules {
	r := confine.Rules{Read: pol.read, Shell: pol.shell, Write: pol.write, Hide: hide,
		HandleTCP: pol.network == NetworkNone || pol.network == NetworkPorts}
	if pol.network == NetworkPorts {
		r.Ports = pol.ports
	}
	return r
}

// release closes what b holds; namespaces of the Manager are the cache's.
func (b *sandboxBuilt) release() {
	if b.ruleset >= 0 {
		_ = unix.Close(b.ruleset)
		b.ruleset = -1
	}
	if b.shared != nil {
		b.shared.Close()
		b.shared = nil
	}
	if b.tmpLayer != nil {
		b.tmpLayer.Close()
		b.tmpLayer = nil
	}
	if b.watch != nil {
		b.watch.Close()
	}
	if b.view.NS >= 0 || b.view.Events >= 0 {
		b.view.Close() // b.mntns is b.view.NS
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
	for _, st := range c.readyThreads {
		st.spare.Discard()
	}
	c.readyThreads = nil
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
	c.dirs.Close()
	c.emptyOnce.Do(func() {})
	if c.emptyDir != "" {
		_ = setImmutable(c.emptyDir, false)
		_ = setImmutable(filepath.Join(c.emptyDir, "empty"), false)
		_ = os.RemoveAll(c.emptyDir)
	}
}

// fsImmutableFl is FS_IMMUTABLE_FL, the inode flag of chattr +i.
const fsImmutableFl = 0x10

// setImmutable sets or clears the immutable flag of p, following no link.
// It needs CAP_LINUX_IMMUTABLE, and a file system with the flag (ext4,
// xfs, btrfs, tmpfs since Linux 6.0).
func setImmutable(p string, on bool) error {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
	if err != nil {
		return err
	}
	if on {
		flags |= fsImmutableFl
	} else {
		flags &^= fsImmutableFl
	}
	return unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, int(flags))
}

// start confines a throwaway thread as b says and starts cmd from it.
// A Start without a step uses the ready thread it took for b (takeReady),
// if it has one, on which every step of b is done already (the mount
// namespaces, the policy's and as root the tree's own with its temp dir,
// the emptied bounding set as root, the network namespace, no_new_privs,
// Landlock and seccomp), and only forks on it; the rest, and every Start
// with a step, take a fresh thread and do the steps there. The ready
// thread saves the Start the thread's making and those steps
// (docs/measurements.md), for a hand-off of one wake-up.
//
// For b.hosts (NetworkHosts) the thread makes the tree's proxy listener
// once it is in b's network namespace with no_new_privs set, before
// Landlock and seccomp (makeHostsListener), a ready thread ahead like the
// rest; s.hosts, which must then not be nil, takes it over on the thread
// before the fork.
//
// The descriptors to close in the child are listed here, on the calling
// thread, before the hand-off: a confined thread may not be allowed to
// read /proc (Landlock).
func (b *sandboxBuilt) start(cmd *exec.Cmd, s sandboxStart) error {
	st := s.ready
	inCgroup := cmd.SysProcAttr != nil && cmd.SysProcAttr.UseCgroupFD
	if st != nil && (s.step != nil || (b.tmpParent != "" && st.tmp != s.tmp) || (b.filter != nil && st.inCgroup != inCgroup)) {
		// A step must run before the confinement, which the ready thread
		// has done; a thread made for another temp dir shows the tree
		// that one; and its fork filter, installed ahead, is for a leader
		// started in its cgroup v2 or not, as the Start before. None of
		// these happens from prepareSandbox but for a cgroup v1 placement
		// or a change of Limits between Starts of one policy.
		st.discard()
		st = nil
	}
	if err := closeInherited(cmd); err != nil {
		if st != nil {
			st.discard()
		}
		return err
	}
	lastCap := sandboxHost().lastCap
	if s.step == nil && b.cache != nil {
		if st != nil {
			readyThreadStarts.Add(1)
			var held *treeHold
			err := st.spare.Do(func() (err error) {
				b.handListener(&st.lis, s.hosts)
				held, err = startNoCore(cmd)
				holdNS(st.ns, s, err == nil)
				st.ns = -1
				return err
			})
			if err != nil {
				b.cache.makeReadyThread(b, lastCap, inCgroup)
				return err
			}
			// The next ready thread is made once the tree is let go: its
			// making (about 0.8 ms of CPU) competed with the forking
			// thread's end, which the tree waits for, on two CPUs (the
			// wait's 90th percentile 1.0–2.5 ms before, 0.16–0.9 ms after,
			// at a load average of 5).
			err = held.release(cmd)
			b.cache.makeReadyThread(b, lastCap, inCgroup)
			return err
		}
		defer b.cache.makeReadyThread(b, lastCap, inCgroup)
	}
	var held *treeHold
	err := osthread.Throwaway(func() (err error) {
		// The other step first: after the steps below this thread may no
		// longer open files (Landlock) or make some system calls
		// (seccomp); what its restore writes it has opened already.
		if s.step != nil {
			restore, serr := s.step()
			if serr != nil {
				return serr
			}
			defer func() { err = errors.Join(err, restore()) }()
		}
		ns, err := b.enterAndDrop(lastCap, s.tmp)
		if err != nil {
			return err
		}
		var lis hostsListener
		if err := b.confine(s.tmp, b.hostsHook(&lis)); err != nil {
			lis.close()
			holdNS(ns, s, false)
			return err
		}
		b.handListener(&lis, s.hosts)
		if err := b.forkFilter(inCgroup); err != nil {
			holdNS(ns, s, false)
			return err
		}
		held, err = startNoCore(cmd)
		holdNS(ns, s, err == nil)
		return err
	})
	if err != nil {
		return err
	}
	return held.release(cmd)
}

// forkFilter stacks confine.SeccompForkFilter on the calling thread, which
// b has confined, before it forks: clone3 is refused unless the fork
// itself needs it (inCgroup: a leader started in its cgroup v2), and
// clone with CLONE_PARENT always (TestAttackHostZombies). A ready thread
// installs it ahead (makeReadyThread, TestSandboxSpareForkFilterInCgroup):
// the install, about 70 µs of the thread's CPU (the kernel checks, JITs
// and runs the program once per call number for its cache), was on the
// Start's path. A tree in a mount
// namespace of its own (ownMountns) may make no namespace: the
// containment sweep finds its processes by that namespace
// (TestSandboxNamespaceSweepsEnvIEscapee), which a process could
// otherwise leave through a user namespace of its own.
func (b *sandboxBuilt) forkFilter(inCgroup bool) error {
	if b.filter == nil {
		return nil
	}
	return confine.SeccompInstall(confine.SeccompForkFilter(confine.ForkRules{
		NoClone3:     !inCgroup,
		NoNamespaces: b.ownMountns(),
	}))
}

// ownCgroupNS reports whether a tree of b that the Manager starts in its
// cgroup v2 gets a cgroup namespace of its own, rooted at that cgroup: as
// root (b.dropCaps; the forking thread keeps CAP_SYS_ADMIN in its
// effective set). Such a tree keeps clone3, which its own fork needs
// (forkFilter), and with it CLONE_INTO_CGROUP into any cgroup its uid can
// write, which as root is every cgroup: Landlock has no hook on that
// check and seccomp cannot read the call's flags. The kernel refuses a
// move (clone3's or a write to cgroup.procs) out of the mover's cgroup
// namespace where cgroup2 is mounted with nsdelegate, as systemd mounts
// it (cgroup_procs_write_permission); elsewhere the namespace changes the
// tree's view only, so there it is not made: the tree keeps its view
// (the Go runtime and the JVM read their CPU limit through it) and the
// Start warns (docs/sandbox-threats.md, TestAttackCgroupEscapeByClone3).
// Without root the host cannot make the namespace (it takes
// CAP_SYS_ADMIN), so nothing changes there.
func (b *sandboxBuilt) ownCgroupNS() bool { return b.dropCaps && cgroup.NSDelegate() }

// ownMountns reports whether each tree of b runs in a mount namespace of
// its own (enterAndDrop's copy for its temp dir: as root, with a temp
// parent), not shared with any other tree.
func (b *sandboxBuilt) ownMountns() bool { return b.mntns >= 0 && b.tmpParent != "" }

// takeReady hands the calling Start the ready thread made for b, if one
// is ready, and the temp dir it reserved for that Start ("" when b has no
// tmpParent): the Start's TMPDIR must be the dir the thread's namespace
// shows. The Start then owns the dir, and gives the thread to start, or
// discards it.
func (b *sandboxBuilt) takeReady() (*readyThread, string) {
	if b.cache == nil {
		return nil, ""
	}
	st := b.cache.takeReadyThread(b)
	if st == nil {
		return nil, ""
	}
	st.tmpTaken = true
	return st, st.tmp
}

// discard throws st away unused (a Start that took it and did not start);
// its temp dir is the Start's.
func (st *readyThread) discard() { st.spare.Discard() }

// hostsHook is confine's inNetns for b: for b.hosts, it makes the tree's
// proxy listener into *lis; nil otherwise.
func (b *sandboxBuilt) hostsHook(lis *hostsListener) func() error {
	if !b.hosts {
		return nil
	}
	return func() (err error) {
		*lis, err = makeHostsListener()
		return err
	}
}

// handListener gives the listener made on the thread, if any, to hosts
// (the Start's), or closes it when the Start has no use for it.
func (b *sandboxBuilt) handListener(lis *hostsListener, hosts func(hostsListener)) {
	if lis.ln == nil {
		return
	}
	if hosts != nil {
		hosts(*lis)
	} else {
		lis.close()
	}
	*lis = hostsListener{}
}

// enterAndDrop takes the calling, locked thread into b's mount namespace,
// and for b.tmpParent into a copy of it of its own that shows tmp alone
// of the Manager's temp dirs (all of them covered when tmp is ""), and
// empties its bounding and ambient capability sets: the steps that change
// the thread but do not confine it yet (a ready thread does them ahead of
// its Start).
//
// It returns a descriptor of the thread's own namespace, -1 without: the
// Start holds it past its tree's end (sandboxStart.hold), so that the
// namespace is unmade off the tree's exit.
func (b *sandboxBuilt) enterAndDrop(lastCap int, tmp string) (ns int, err error) {
	ns = -1
	defer func() {
		if err != nil && ns >= 0 {
			_ = unix.Close(ns)
			ns = -1
		}
	}()
	if b.mntns >= 0 {
		if err := confine.EnterMountns(b.mntns); err != nil {
			return -1, err
		}
		if b.ownMountns() {
			// tmp "" (a Start given no temp dir, as a test's) covers the
			// parent whole.
			own := ""
			if tmp != "" {
				own = filepath.Join(b.tmpParent, filepath.Base(tmp))
			}
			if ns, err = confine.PrivateTemp(tempCover(b.tmpParent), own); err != nil {
				return -1, err
			}
		}
	}
	if b.dropCaps {
		if err := confine.DropCapabilities(lastCap); err != nil {
			return ns, err
		}
	}
	return ns, nil
}

// holdNS hands ns, if any, to the Start's hold, or closes it where the
// Start has none or failed. The hold keeps the descriptor, so that the
// namespace's inode, by which the containment sweep finds the tree's
// processes, names no other namespace until the sweep is done.
func holdNS(ns int, s sandboxStart, started bool) {
	if ns < 0 {
		return
	}
	if started && s.hold != nil {
		var id treeNamespace
		var st unix.Stat_t
		if unix.Fstat(ns, &st) == nil {
			id = treeNamespace{ino: st.Ino}
		}
		s.hold(id, func() { _ = unix.Close(ns) })
		return
	}
	_ = unix.Close(ns)
}

// confine joins b's network namespace and confines the calling, locked
// thread: no_new_privs, inNetns if not nil, Landlock, seccomp, in the
// order confine.Thread forces.
func (b *sandboxBuilt) confine(tmp string, inNetns func() error) error {
	rs, made, err := b.treeRulesets(tmp)
	if err != nil {
		return err
	}
	for _, fd := range made {
		defer unix.Close(fd)
	}
	// As root, an IPC namespace of the tree's own: System V shared memory,
	// queues and semaphores are checked by owner only, which a root tree
	// is (TestAttackSysVSharedMemory). The namespace and what the tree
	// made in it go with its last process.
	return confine.Thread(b.netns, b.dropCaps, inNetns, rs, b.filter)
}

// treeRulesets returns the Landlock layers of a tree of b whose temp dir
// is tmp, in order, and those of them made for this tree, which the caller
// closes: b's ruleset, or b.shared's with the tree's dir added; and one
// made from b.tmpLayer.
func (b *sandboxBuilt) treeRulesets(tmp string) (layers, made []int, err error) {
	own := ""
	if tmp != "" && b.tmpParent != "" {
		own = filepath.Join(b.tmpParent, filepath.Base(tmp))
	}
	layers = []int{b.ruleset}
	if b.shared != nil {
		rs, err := b.shared.Ruleset(own)
		if err != nil {
			return nil, nil, xerrors.Errorf("landlock ruleset of the tree: %w", err)
		}
		made = append(made, rs)
		layers[0] = rs
	}
	if b.tmpLayer != nil {
		rs, err := b.tmpLayer.Ruleset(own)
		if err != nil {
			for _, fd := range made {
				_ = unix.Close(fd)
			}
			return nil, nil, xerrors.Errorf("landlock ruleset of the tree: %w", err)
		}
		made = append(made, rs)
		layers = append(layers, rs)
	}
	return layers, made, nil
}

// readyThread is a spare thread (osthread.Spare) on which a built
// policy's steps are done (enterAndDrop, then confine, which for
// NetworkHosts makes the tree's proxy listener), waiting for the one Start
// it serves. Its thread
// runs nothing but that wait and the Start's fork, and is discarded after
// it or when the ready thread is thrown away unused: a confined thread
// never goes back to the runtime's pool. A host therefore has at most
// maxReadyThreads confined threads per Manager besides those of Starts in
// flight, its ready threads, which TestSandboxHostNeverConfined tells
// apart by their thread IDs.
type readyThread struct {
	b     *sandboxBuilt
	lis   hostsListener // b.hosts: the listener confine made; zero once handed over
	spare *osthread.Spare
	// tmp is the temp dir reserved for the Start this thread serves, for
	// b.tmpParent (set on the spare's goroutine before Ready); tmpTaken,
	// set by the Start that took the thread (before Do or Discard), says
	// the dir is that Start's, or else the thread's end gives it back.
	tmp      string
	tmpTaken bool
	ns       int // the thread's own mount namespace (enterAndDrop); -1 without or once handed over
	// inCgroup is what the fork filter installed ahead assumes of the
	// Start it serves (forkFilter): a leader started in its cgroup v2
	// (clone3 kept), as the Start before was. A Start that differs
	// discards the thread.
	inCgroup bool
}

// maxReadyThreads bounds the ready threads a Manager keeps, one per
// policy: each is an OS thread, and as root a mount namespace and a
// reserved temp dir besides (a listener for NetworkHosts).
const maxReadyThreads = 4

// readyThreadStarts counts the Starts that took a ready thread, readyThreadsMade the
// ready threads made.
var readyThreadStarts, readyThreadsMade atomic.Int64

// takeReadyThread returns the cache's ready thread if it is ready and made for
// b, and hands it over (the cache then has none). Every step of b is done on
// it already, a NetworkHosts tree's listener included (hostsHook): the
// Start only forks there.
func (c *sandboxCache) takeReadyThread(b *sandboxBuilt) *readyThread {
	c.readyThreadMu.Lock()
	defer c.readyThreadMu.Unlock()
	st := c.readyThreads[b]
	if st == nil {
		return nil
	}
	select {
	case <-st.spare.Ready():
		delete(c.readyThreads, b)
		return st
	case <-st.spare.Failed():
		delete(c.readyThreads, b)
		return nil
	default:
		return nil // still being made: this Start does not wait for it
	}
}

// makeReadyThread is called after each Start of b and makes a ready thread for
// b in the background from b's second Start on, unless the cache has one
// for b already or is closed. The ready thread is confined all the way
// (enterAndDrop, then confine, then the fork filter for a Start whose
// leader is, as inCgroup says, started in its cgroup v2 or not, as the
// one that made it).
//
// The cache keeps one per policy, up to maxReadyThreads, so that Starts
// that take turns between policies (NetworkNone and NetworkHosts from one
// Manager: BenchmarkSandboxHosts/shared) each find theirs; before, it kept
// one, for the policy of the last two Starts, and such Starts confined a
// thread each. When all are taken, the one of the policy started longest
// ago is discarded only if that policy has not been started in the last
// 2×maxReadyThreads Starts: Starts that cycle through more policies than
// that leave the ones kept alone rather than throw one away unused at
// each Start (TestSandboxSpareNotThrashed).
func (c *sandboxCache) makeReadyThread(b *sandboxBuilt, lastCap int, inCgroup bool) {
	if b.uncached {
		return
	}
	c.readyThreadMu.Lock()
	defer c.readyThreadMu.Unlock()
	c.startSeq++
	b.lastStart = c.startSeq
	b.starts++
	if c.readyThreadClosed || b.starts < 2 || c.readyThreads[b] != nil {
		return
	}
	if len(c.readyThreads) >= maxReadyThreads {
		var old *sandboxBuilt
		for ob := range c.readyThreads {
			if old == nil || ob.lastStart < old.lastStart {
				old = ob
			}
		}
		if c.startSeq-old.lastStart <= 2*maxReadyThreads {
			return
		}
		c.readyThreads[old].spare.Discard()
		delete(c.readyThreads, old)
	}
	if c.readyThreads == nil {
		c.readyThreads = map[*sandboxBuilt]*readyThread{}
	}
	readyThreadsMade.Add(1)
	c.threadMakers.Add(1)
	// The ready thread holds b: b's descriptors stay open until it is done,
	// even if b is found stale and evicted meanwhile.
	c.mu.Lock()
	b.users++
	c.mu.Unlock()
	st := &readyThread{b: b, ns: -1, inCgroup: inCgroup}
	take, give := c.takeTemp, c.giveTemp
	st.spare = osthread.NewSpare(func() error {
		if b.tmpParent != "" {
			if take == nil {
				return errors.New("no temp dir to reserve")
			}
			tmp, err := take()
			if err != nil {
				return err // the next Start does the steps itself and reports it
			}
			st.tmp = tmp
		}
		var err error
		if st.ns, err = b.enterAndDrop(lastCap, st.tmp); err != nil {
			return err // the next Start does the steps itself and reports it
		}
		if err := b.confine(st.tmp, b.hostsHook(&st.lis)); err != nil {
			return err
		}
		return b.forkFilter(inCgroup)
	}, func() {
		// A listener made ahead and not handed over (the spare failed or
		// was discarded unused) is closed here, on the spare's goroutine.
		st.lis.close()
		if st.ns >= 0 {
			_ = unix.Close(st.ns)
		}
		if st.tmp != "" && !st.tmpTaken {
			give(st.tmp)
		}
		b.done()
		c.threadMakers.Done()
	})
	c.readyThreads[b] = st
}

// networkDoors are the sockets through which what a tree writes leaves
// the host without the tree's network, covered as root for every network
// but NetworkHost, whose tree has the network anyway (sixteenth attack
// review). The host's log sockets: syslog's /dev/log and journald's
// directory (its native, stream and /dev/log sockets, the socket it
// forwards to a syslog daemon through, its varlink); a line written there
// leaves the host wherever the host forwards its logs (rsyslog's
// "*.* @@logs:514", systemd-journal-upload, a Fluent Bit or Vector agent;
// TestAttackLogSocketsCarryOff). And the name services that ask a
// directory server, any uid's to use: sssd's responders, winbindd's pipe,
// nslcd's socket; a lookup of a chosen name sends it to the domain's
// server, as nscd's (hostDoors) did (TestAttackNameServiceDoors). A
// program in such a tree that logs gets ENOENT or ECONNREFUSED, as on a
// host without a log daemon, and a name sssd has not cached stays a
// number (its public cache, /var/lib/sss/mc, is still read). rsyslog's
// sockets for chrooted daemons are log sockets too: Debian's and Ubuntu's
// postfix and haproxy packages have it listen in their chroots' dev
// (seventeenth attack review, TestAttackChrootLogSockets).
var networkDoors = []string{"/dev/log", "/run/systemd/journal",
	"/var/lib/sss/pipes", "/run/samba/winbindd", "/var/run/samba/winbindd", "/run/nslcd", "/var/run/nslcd",
	"/var/spool/postfix/dev", "/var/lib/haproxy/dev"}

// hostDoors are the pathname Unix sockets, and the directories that hold
// them, through which a tree could act as the host's user outside the
// sandbox: credential agents and container engines, agentproc's own serve
// socket, the system and session D-Bus, systemd's private and varlink
// sockets, and tmux's and screen's (a command typed into the host's
// terminal multiplexer runs unconfined). Landlock does not govern
// connect(2) to them, so as root they are covered in the mount namespace,
// existing or not: one missing now is covered at the first Start after it
// appears (confine.MountWatch). A directory is covered whole, so a socket made in
// it later is covered at once. Without root they stay reachable (the
// "What does not hold" in docs/sandbox.md says so); only the variables that name
// them are dropped.
func hostDoors() []string {
	uid := strconv.Itoa(os.Getuid())
	cands := []string{
		"/var/run/docker.sock", "/run/docker.sock",
		"/run/podman/podman.sock", "/run/buildkit/buildkitd.sock",
		"/run/dbus", "/var/run/dbus", "/run/systemd/private", "/run/systemd/io.systemd.Manager",
		"/run/screen", "/var/run/screen",
		filepath.Join(os.TempDir(), "agentproc-"+uid), "/tmp/tmux-" + uid,
	}
	cands = append(cands, daemonDoors()...)
	if m, err := filepath.Glob("/run/systemd/io.systemd.*"); err == nil {
		cands = append(cands, m...)
	}
	cands = append(cands, desktopDoors(uid)...)
	env := os.Getenv
	if p := env("SSH_AUTH_SOCK"); p != "" {
		cands = append(cands, p)
	}
	// The user's other ssh agents and ControlMaster sockets: sshd's
	// /tmp/ssh-XXXXXXXXXX/agent.PID for each login that forwards an agent,
	// ssh-agent's own, ControlPath /tmp/ssh-%r@%h:%p (seventh attack
	// review, TestAttackOtherSSHAgents), as the policy is built.
	for _, dir := range []string{"/tmp", os.TempDir()} {
		if m, err := filepath.Glob(filepath.Join(dir, "ssh-*")); err == nil {
			cands = append(cands, m...)
		}
	}
	// PM2's daemon starts any command its RPC socket is sent, as the
	// home's user (TestAttackRootRunnerDoors): under $HOME and under the
	// password database's home, which a host without $HOME (a systemd
	// service without User=) still has (sixteenth attack review,
	// TestAttackRootPM2WithoutHOME).
	homes := []string{env("HOME")}
	if db := passwdHome(); filepath.Clean(db) != filepath.Clean(homes[0]) {
		homes = append(homes, db)
	}
	for _, h := range homes {
		if h != "" {
			cands = append(cands, filepath.Join(h, ".pm2", "rpc.sock"), filepath.Join(h, ".pm2", "pub.sock"))
		}
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
	// The user's runtime dir: $XDG_RUNTIME_DIR, and /run/user/UID, which a
	// root service, sudo and cron do not name, where a login session of
	// the user keeps its user manager's sockets (systemd-run --user runs
	// a command outside the sandbox: sixth attack review,
	// TestAttackRootUserManagerDoor).
	for _, d := range []string{env("XDG_RUNTIME_DIR"), "/run/user/" + uid} {
		if d != "" {
			cands = append(cands, d+"/docker.sock", d+"/podman/podman.sock", d+"/gnupg", d+"/agentproc",
				d+"/bus", d+"/systemd", d+"/tmux-"+uid)
			// The session's other agents (TestAttackKeyringAndAgentSockets):
			// gnome-keyring's and gcr's ssh agents, systemd's user
			// ssh-agent, p11-kit's smart cards, GVfs's mounted shares.
			cands = append(cands, d+"/keyring", d+"/gcr", d+"/ssh-agent.socket", d+"/p11-kit", d+"/gvfsd")
		}
	}
	var out []string
	for _, p := range cands {
		if filepath.IsAbs(p) {
			out = append(out, filepath.Clean(p))
		}
	}
	return resolvePaths(out)
}

// daemonDoors returns the fixed paths of the host's daemons that serve a
// peer in ways a tree must not be served (hostDoors): each group names
// the review that found it and what the daemon would do.
func daemonDoors() []string {
	return []string{
		// Daemons that serve any uid-0 peer as their administrator (fifth
		// attack review, TestAttackRootDaemonDoors): snapd installs a snap
		// whose hooks run as root, LXD, Incus and libvirt start a
		// privileged container or a VM with the host's disk, the container
		// runtimes run one, tailscaled exposes local ports to the tailnet or
		// the Internet, udevd takes control messages, nscd resolves names
		// (a way out for NetworkNone).
		"/run/snapd.socket", "/run/snapd-snap.socket", "/var/lib/lxd/unix.socket",
		"/var/snap/lxd/common/lxd/unix.socket", "/var/lib/incus/unix.socket", "/run/incus",
		"/run/libvirt", "/var/run/libvirt", "/run/containerd", "/run/docker", "/run/k3s", "/run/crio",
		"/var/run/crio", "/run/cri-dockerd.sock", "/run/tailscale", "/var/run/tailscale",
		"/run/udev/control", "/run/nscd", "/var/run/nscd",
		// More daemons that serve a uid-0 peer as their administrator
		// (seventh attack review, TestAttackRootAdminSockets): fail2ban
		// runs a command a client sets as a jail's action, MariaDB and
		// Ubuntu's MySQL log root in by its peer uid, chrony sets the clock
		// and adds servers by name, Open vSwitch, Proxmox's QEMU monitors,
		// supervisord, Multipass; and services any user may use that carry
		// data off the host for a NetworkNone tree (avahi publishes a name
		// on the LAN, CUPS prints to a network printer, pcscd reaches the
		// user's smart card).
		"/run/fail2ban", "/run/mysqld", "/run/chrony", "/run/openvswitch", "/run/qemu-server",
		"/run/supervisor.sock", "/run/multipass_socket", "/run/avahi-daemon", "/run/cups", "/run/pcscd",
		// The X server's sockets: a peer of the display's uid types into
		// the user's terminal (TestAttackDesktopDoors).
		"/tmp/.X11-unix",
		// systemd's services that keep their varlink sockets in a
		// directory of their own (thirteenth attack review,
		// TestAttackSystemdVarlinkDoors): machined's Open runs a shell or
		// a command on the host (".host") for a root peer, resolved
		// resolves any name for any peer (a way out for NetworkNone, as
		// nscd) and streams the host's lookups to a root one. resolved's
		// directory also holds the resolv.conf files: its sockets only.
		"/run/systemd/machine", "/run/systemd/resolve/io.systemd.Resolve", "/run/systemd/resolve/io.systemd.Resolve.Monitor",
		// The Kerberos daemons that answer a peer by its uid (thirteenth
		// attack review, TestAttackKerberosDaemonsAndSSSD): sssd-kcm hands
		// a root peer root's tickets (KCM:, Fedora's and RHEL's default
		// cache), gssproxy initiates contexts with the machine's keytab,
		// itself hidden. (WorkspaceSandbox hides /var/lib/gssproxy whole,
		// its ticket caches with it: systemSecretPaths.)
		"/run/.heim_org.h5l.kcm-socket", "/run/gssproxy.sock", "/var/lib/gssproxy/default.sock",
		// Daemons that run what a root peer asks, as root or as any user
		// it names (fourteenth attack review, TestAttackRootRunnerDoors):
		// the Nix daemon takes root as a trusted user, whose options
		// (post-build-hook, sandbox) run a command of the client's
		// outside any sandbox; Salt's master and minion IPC sockets
		// publish a job (cmd.run) to the minions, the host among them;
		// NGINX Unit's control socket starts an application as the user
		// its configuration names. And Dovecot's doveadm server, root's
		// 0600, which reads and changes every user's mail for a root peer.
		"/nix/var/nix/daemon-socket", "/run/salt", "/var/run/salt",
		"/run/control.unit.sock", "/var/run/control.unit.sock", "/run/dovecot", "/var/run/dovecot",
		// More of the same (fifteenth attack review,
		// TestAttackRootRunnerDoors15): the Guix daemon, the Nix daemon's
		// sibling (a fixed-output derivation's builder reaches the
		// network); k0s's and MicroK8s's containerd (a privileged
		// container with the host's disk); supervisord's socket where its
		// sample configuration puts it.
		"/var/guix/daemon-socket", "/run/k0s", "/var/snap/microk8s/common/run", "/tmp/supervisor.sock",
		// The Wi-Fi daemons' control sockets (sixteenth attack review,
		// TestAttackWirelessControlDoors): wpa_supplicant and hostapd take
		// any command from a peer that may connect, root as their owner:
		// a network added and enabled (the host joins another access
		// point), a global such as pkcs11_module_path set (a library the
		// daemon loads as root).
		"/run/wpa_supplicant", "/var/run/wpa_supplicant", "/run/hostapd", "/var/run/hostapd",
		// Servers' control sockets that serve a root peer as their
		// administrator and change what the host does on the network
		// (TestAttackRootServiceControlDoors): HAProxy's admin socket
		// (Debian's stock configuration; a server's address changed sends
		// the host's users' traffic elsewhere), strongSwan's VICI and
		// stroke sockets (a tunnel loaded and started), dhcpcd's (the
		// host's lease released); rpcbind's, whose SET and UNSET a uid-0
		// peer may send (the host's NFS services unregistered or sent
		// elsewhere; seventeenth attack review, TestAttackRPCBindDoor).
		"/run/haproxy", "/var/run/haproxy", "/run/charon.vici", "/var/run/charon.vici", "/run/charon.ctl",
		"/var/run/charon.ctl", "/run/strongswan", "/run/dhcpcd", "/run/dhcpcd.sock", "/var/run/dhcpcd.sock",
		"/run/rpcbind.sock", "/var/run/rpcbind.sock",
		// osquery's extension socket (TestAttackEndpointAgentDoors): SQL
		// run as root for any peer that may connect, root as its owner,
		// whose tables read files as root (augeas, yara) and reach the
		// network (curl). The directories, osqueryd's, Fleet's orbit's and
		// Kolide's launcher's, also hold their enrollment secrets.
		"/var/osquery", "/opt/orbit", "/var/kolide-k2",
	}
}

// desktopDoors returns the sockets of the desktop the agent runs in, as
// they are when the policy is built (TestAttackDesktopDoors,
// TestAttackTerminalDoors): a Chromium-based browser's SingletonSocket (the
// running browser opens a URL the tree names, with the user's cookies and
// network); VS Code's (the Git extension's askpass answers with the token
// it holds; the `code` command's installs an extension, which runs
// unconfined; Remote-SSH's forwards an ssh agent); and the terminals and
// editors that run or type what a client asks, as tmux and screen do
// (zellij, WezTerm, Alacritty, kitty, Emacs's server, Neovim's); the
// Wayland display (wlroots compositors give any client screen capture and
// a virtual keyboard) and the sound server (the microphone): in the temp
// and runtime dirs and where their variables name them. One made
// later is reachable (docs/sandbox-threats.md, seventh attack review).
func desktopDoors(uid string) []string {
	var out []string
	for _, k := range []string{"VSCODE_IPC_HOOK_CLI", "VSCODE_GIT_IPC_HANDLE", "VSCODE_IPC_HOOK",
		"WEZTERM_UNIX_SOCKET", "ALACRITTY_SOCKET", "KITTY_LISTEN_ON", "NVIM", "NVIM_LISTEN_ADDRESS"} {
		if p, _ := strings.CutPrefix(os.Getenv(k), "unix:"); p != "" {
			out = append(out, p)
		}
	}
	tmp := os.TempDir()
	out = append(out, filepath.Join(tmp, "zellij-"+uid), filepath.Join(tmp, "emacs"+uid))
	pats := []string{filepath.Join(tmp, "*", "SingletonSocket"), filepath.Join(tmp, "vscode-*.sock"),
		filepath.Join(tmp, "nvim.*")}
	runtimes := []string{"/run/user/" + uid}
	if d := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(d) {
		runtimes = append(runtimes, d)
	}
	for _, d := range runtimes {
		out = append(out, filepath.Join(d, "zellij"), filepath.Join(d, "wezterm"), filepath.Join(d, "emacs"),
			filepath.Join(d, "pulse"))
		pats = append(pats, filepath.Join(d, "vscode-*.sock"), filepath.Join(d, "Alacritty-*.sock"),
			filepath.Join(d, "nvim.*"), filepath.Join(d, "kitty*"), filepath.Join(d, "wayland-*"),
			filepath.Join(d, "pipewire-*"))
	}
	for _, pat := range pats {
		if m, err := filepath.Glob(pat); err == nil {
			out = append(out, m...)
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
// leave it; a process of the tree that outlived its end (escaped the
// containment) would keep its view of the directory (its namespace's
// bind, or its Landlock rule, which holds the inode) into the next tree's
// use of it. It returns where the directory is now; the caller removes it
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

// tempParentBase is where a Manager makes its temp parent, "" for
// os.TempDir(): a directory shared by every Manager of this user,
// agentproc-sandbox-UID (tempRootName), so that a tree's namespace or
// layer covers the temp dirs of the other Managers' trees too (another
// agentproc process of the user) by covering that one directory
// (tempCover). It is made 0700 if missing, and used only if it is this
// user's directory of mode 0700 (it sits in a directory others write);
// otherwise the base itself, and only the Manager's own trees are kept
// apart. Without root each tree's second Landlock layer takes a rule per
// entry of every directory above the cover (tmpLayer), and entries made
// there after the policy's first Start are not readable by its trees:
// the base is /var/tmp then, which holds a few, rarely new, where /tmp (or
// a TMPDIR the host set) holds many, made all the time, which trees read.
// As root a mount namespace covers it, and os.TempDir() is kept.
func tempParentBase() string {
	base := os.TempDir()
	var st unix.Stat_t
	if !sandboxHost().root && unix.Stat(varTmp, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR && st.Mode&unix.S_ISVTX != 0 &&
		unix.Access(varTmp, unix.W_OK|unix.X_OK) == nil {
		base = varTmp
	}
	root := filepath.Join(base, tempRootName())
	if err := unix.Mkdir(root, 0o700); err != nil && err != unix.EEXIST {
		return base
	}
	if unix.Lstat(root, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != uint32(os.Geteuid()) || st.Mode&0o7777 != 0o700 {
		return base
	}
	return root
}

// tempRootName is the name of the directory shared by this user's
// Managers' temp parents (tempParentBase).
func tempRootName() string { return "agentproc-sandbox-" + strconv.Itoa(os.Geteuid()) }

// tempCover is what hides the temp dirs of trees other than one's own:
// the shared directory holding parent, or parent itself where it is not
// in one.
func tempCover(parent string) string {
	if d := filepath.Dir(parent); filepath.Base(d) == tempRootName() {
		return d
	}
	return parent
}

// tempCovers is what hides, without a mount namespace, the temp dirs of
// trees other than one's own: tempCover, and where the shared directory
// could not be used (another user made it first, or a tree of this user
// changed its mode, which Landlock does not refuse: tempParentBase), the
// temp parents of this user's other Managers beside parent as well. Those
// made after the policy's layer was built get no rule anyway (the layer
// grants the entries that exist then). Without them a tree of one Manager
// read the temp dirs of another's (third attack review).
func tempCovers(parent string) []string {
	cover := tempCover(parent)
	if cover != parent {
		return []string{cover}
	}
	out := []string{parent}
	base := filepath.Dir(parent)
	entries, _ := os.ReadDir(base)
	for _, e := range entries {
		p := filepath.Join(base, e.Name())
		var st unix.Stat_t
		if p == parent || !strings.HasPrefix(e.Name(), "agentproc-sandbox-") || unix.Lstat(p, &st) != nil ||
			st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != uint32(os.Geteuid()) {
			continue
		}
		out = append(out, p)
	}
	return out
}

const varTmp = "/var/tmp"
