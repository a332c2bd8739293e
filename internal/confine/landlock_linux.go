package confine

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"

	"github.com/agentproc/agentproc/internal/pathset"
	"github.com/agentproc/agentproc/internal/procfs"
)

// Landlock, written directly on the system calls: a ruleset is built once
// per distinct policy (LandlockRuleset) and its descriptor reused by every
// Start of that policy, which restricts only its throwaway thread
// (landlock_restrict_self without the all-threads flag).

// LandlockMaxABI is the newest ABI whose rights this file knows; a newer
// kernel is given the rules of this one (Info.Sandbox.LandlockABI says so).
const LandlockMaxABI = 7

const (
	llRuleNetPort = 2 // LANDLOCK_RULE_NET_PORT

	llReadRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	// llFileRights are the rights a rule on a file (not a directory) may
	// carry.
	llFileRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	llDevRights = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
)

// LandlockABI is the kernel's Landlock ABI version, 0 without Landlock
// (not built in, not enabled in lsm=, or refused by a seccomp filter).
var LandlockABI = sync.OnceValue(func() int {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(v)
})

// llFSRights are every file system right of abi.
func llFSRights(abi int) uint64 {
	r := uint64(unix.LANDLOCK_ACCESS_FS_MAKE_SYM<<1 - 1) // ABI 1: EXECUTE..MAKE_SYM
	if abi >= 2 {
		r |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		r |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 5 {
		r |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	return r
}

// llScopes are the scopes of abi: signals and abstract Unix sockets from
// ABI 6.
func llScopes(abi int) uint64 {
	if abi >= 6 {
		return unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
	}
	return 0
}

// llRulesetAttr is struct landlock_ruleset_attr as far as ABI 7 knows it.
type llRulesetAttr struct {
	handledFS, handledNet, scoped uint64
}

// llPathBeneath is struct landlock_path_beneath_attr, which is packed: the
// kernel reads 12 bytes.
type llPathBeneath struct {
	allowed uint64
	fd      int32
	_       int32
}

// llNetPort is struct landlock_net_port_attr.
type llNetPort struct {
	allowed, port uint64
}

// systemReadPaths are what a shell needs to run when Sandbox.Read is set.
var systemReadPaths = []string{
	"/bin", "/sbin", "/usr", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
	procfs.Path, "/sys/devices/system/cpu", "/run/systemd/resolve", "/nix/store",
}

// devicePaths are the devices every sandboxed tree may read and write.
var devicePaths = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/random", "/dev/urandom"}

// HiddenDevices are hidden under every sandbox with Read nil: the
// terminals of the host (a tree reading one steals its keystrokes) and the
// Manager's own host-wide records.
var HiddenDevices = []string{"/dev/pts", "/dev/ptmx", "/dev/console", "/dev/tty0", "/dev/vcs", "/dev/input", "/dev/mem", "/dev/kmem", "/dev/port"}

// HostDevices lists the device nodes below /dev that a tree with Read nil
// may not open: every block device (a raw disk reads every hidden file on
// it; a root tree, uid 0, owns them) and every character device other
// users may neither read nor write (the host's other terminals and
// screens, /dev/tty1, /dev/ttyS0, /dev/vcsa1; sound, cameras, hidraw keys,
// the framebuffer), but devicePaths. A tree may still open for reading
// the devices any user may (writes reach devicePaths alone). Leaving
// them out makes /dev granted entry by entry (landlockGrants), so a
// device made later (a loop device losetup adds, a disk plugged in) has
// no rule either. /dev/pts is HiddenDevices' (a TTY request's own
// terminal is handed over open); shared directories (/dev/shm) hold no
// devices worth a walk.
func HostDevices() []string {
	var out []string
	var walk func(dir string, depth int)
	walk = func(dir string, depth int) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			switch {
			case e.Type()&os.ModeSymlink != 0, slices.Contains(devicePaths, p), p == "/dev/pts":
			case e.IsDir():
				if depth < 4 && !sharedDir(p) {
					walk(p, depth+1)
				}
			case e.Type()&os.ModeDevice != 0 && hostDevice(p):
				out = append(out, p)
			}
		}
	}
	walk("/dev", 0)
	return out
}

// hostDevice reports whether p is a device node HostDevices leaves out: a
// block device, or a character device other users may neither read nor
// write, but devicePaths. llExpand leaves such a node out too wherever it
// grants a directory entry by entry, whatever its hide list says: that
// list is read when a policy is built, and a LandlockShared is made again
// later from it, when /dev may hold devices made since (sixth attack
// review, TestAttackDeviceMadeBeforeRemake).
func hostDevice(p string) bool {
	if slices.Contains(devicePaths, p) {
		return false
	}
	var st unix.Stat_t
	if unix.Lstat(p, &st) != nil {
		return true // gone or unreadable: no rule either way
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFBLK:
		return true
	case unix.S_IFCHR:
		return st.Mode&0o006 == 0
	}
	return false
}

// LandlockHidden is what a ruleset must leave out when no mount namespace
// covers the hidden paths: hide, the host's terminals (HiddenDevices),
// less what this user can reach in no way (closedToUser: another user's
// files it may not read, /etc/shadow), since each hidden path costs the
// rules of every directory above it.
func LandlockHidden(hide []string) []string {
	var out []string
	for _, h := range slices.Concat(hide, HiddenDevices, HostDevices()) {
		if closedToUser(h) {
			continue // hidden by its permissions, which a tree cannot change
		}
		out = append(out, h)
	}
	return out
}

// closedToUser reports whether this process's user, and so a tree of it
// without root, can neither read p nor reach what lies below it, and
// cannot change that. A refused read alone is not enough (sixteenth attack
// review, TestAttackHiddenDirClosedByMode): a directory the user may
// search but not list (mode 0710 of a group it is in: /etc/ssl/private
// and the ssl-cert group) opens its entries by name, and a file or
// directory of the user's own is opened again by a chmod from the tree
// (metadata outside Write is not protected without root). A path this
// user cannot even stat (behind a directory it may not search) is kept:
// the directory in the way may be the user's.
func closedToUser(p string) bool {
	if unix.Access(p, unix.R_OK) != unix.EACCES {
		return false
	}
	var st unix.Stat_t
	if unix.Lstat(p, &st) != nil || int(st.Uid) == unix.Geteuid() {
		return false
	}
	return st.Mode&unix.S_IFMT != unix.S_IFDIR || unix.Access(p, unix.X_OK) == unix.EACCES
}

// Rules is what a Landlock ruleset grants, as plain data. The paths are
// resolved already: none is followed through a link when opened
// (OpenGrant), and one that does not exist is skipped.
type Rules struct {
	Read  []string // readable besides the system's (systemReadPaths); nil: everything
	Shell string   // the shell's path, whose directory is readable when Read is not nil
	Write []string // writable
	Hide  []string // left out of every grant (LandlockHidden)
	// HandleTCP handles TCP bind and connect (from ABI 4): both are
	// refused but for a connect to one of Ports.
	HandleTCP bool
	Ports     []int // the TCP ports a connect may reach
	// FilesOnly handles the file system rights alone (no network, no
	// scopes): a further layer, which only narrows the first.
	FilesOnly bool
}

// landlockGrants computes the rules of r: path → rights, leaving out
// r.Hide. Hidden paths are taken out by granting, instead of a directory
// above one, the directory's own listing and each of its entries but the
// hidden one (Landlock grants only; it cannot deny below a grant). Entries
// that appear later in such a directory are not readable.
func landlockGrants(r Rules, abi int) map[string]uint64 {
	all := llFSRights(abi)
	read := uint64(llReadRights)
	grants := map[string]uint64{}
	if r.Read == nil {
		grants["/"] |= read
	} else {
		for _, p := range append(slices.Clone(r.Read), systemReadPaths...) {
			grants[p] |= read
		}
		if r.Shell != "" {
			grants[filepath.Dir(r.Shell)] |= read
		}
	}
	for _, w := range r.Write {
		grants[w] |= all
	}
	for _, d := range devicePaths {
		grants[d] |= llDevRights & all
	}
	return landlockExpand(grants, pathset.New(r.Hide))
}

// landlockExpand is landlockGrants' last step: each grant expanded around
// the hidden paths (llExpand).
func landlockExpand(grants map[string]uint64, hide *pathset.Set) map[string]uint64 {
	out := map[string]uint64{}
	add := func(p string, r uint64) { out[p] |= r }
	for p, rights := range grants {
		llExpand(p, rights, hide, add)
	}
	return out
}

// llExpand adds the grant of r on p, leaving out what hide names below p.
// Each visit costs lookups by p's depth (pathset), not a comparison with
// each hidden path: a Hide list of 1,024 paths whose parents hold
// thousands of entries made this quadratic (fifth mend,
// TestLandlockGrantsLinear).
func llExpand(p string, r uint64, hide *pathset.Set, add func(string, uint64)) {
	if hide.Covers(p) {
		return // p itself is hidden
	}
	if !hide.Above(p) {
		add(p, r)
		return
	}
	// The listing of p stays readable (a hidden name is seen, not its
	// content); every entry is granted on its own.
	add(p, r&unix.LANDLOCK_ACCESS_FS_READ_DIR)
	entries, err := os.ReadDir(p)
	if err != nil {
		return
	}
	shared := sharedDir(p)
	for _, e := range entries {
		if e.Type()&os.ModeSymlink != 0 {
			continue // reached through its target, where that is granted
		}
		if shared && !ownEntry(p, e.Name()) {
			continue
		}
		if e.Type()&os.ModeDevice != 0 && hostDevice(filepath.Join(p, e.Name())) {
			continue
		}
		llExpand(filepath.Join(p, e.Name()), r, hide, add)
	}
}

// sharedDir reports whether p is a directory every user may make entries
// in (/tmp, /var/tmp: sticky and writable by others). A rule per entry of
// such a directory is a rule per file another local user chooses to make:
// 20,000 empty files in /var/tmp, where an unprivileged Manager's temp
// parent lies, made every sandboxed Start of every other user fail with
// EMFILE (a policy's template holds a descriptor per rule) or slow.
func sharedDir(p string) bool {
	var st unix.Stat_t
	return unix.Stat(p, &st) == nil && st.Mode&(unix.S_ISVTX|0o002) == unix.S_ISVTX|0o002
}

// ownEntry reports whether the entry name of dir belongs to this user or
// to root: the only entries of a shared directory (sharedDir) llExpand
// grants. Another user's entries there are not granted: their number is
// theirs to choose, and a tree needs no other user's temporary files. A
// file with more than one link is left out too: where
// fs.protected_hardlinks is 0 another user can link root's files there.
func ownEntry(dir, name string) bool {
	var st unix.Stat_t
	if unix.Fstatat(unix.AT_FDCWD, filepath.Join(dir, name), &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return false
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR && st.Nlink > 1 {
		return false
	}
	return st.Uid == uint32(os.Geteuid()) || st.Uid == 0
}

// LandlockRuleset creates the ruleset of rules for abi and returns its
// descriptor. Paths that do not exist are skipped: nothing there to grant.
func LandlockRuleset(rules Rules, abi int) (int, error) {
	t, err := NewLandlockTemplate(rules, abi, "")
	if err != nil {
		return -1, err
	}
	defer t.Close()
	return t.Ruleset("")
}

// LandlockTemplate is a policy's rules opened once (an O_PATH descriptor
// per path), less one directory, the Manager's temp parent, from which
// each Start makes its tree's ruleset with the tree's own temp dir in its
// place (Ruleset): without root, the second layer of each tree, which
// leaves the other trees' temp dirs out (a few rules: tempParentBase). As
// root a policy's ruleset is a LandlockShared instead: a template's
// descriptor per rule cost every Start. Use NewLandlockTemplate; call
// Close.
type LandlockTemplate struct {
	attr   llRulesetAttr
	grants []templateGrant
	ports  []int
}

// templateGrant is one path rule of a LandlockTemplate.
type templateGrant struct {
	Grant
	path   string
	strict bool // a directory or regular file: a rule the kernel refuses fails the ruleset
}

// NewLandlockTemplate opens the rules of rules for abi, leaving out the
// grant on without ("" for none), which must be one of rules.Write.
func NewLandlockTemplate(rules Rules, abi int, without string) (*LandlockTemplate, error) {
	t := &LandlockTemplate{attr: llRulesetAttr{handledFS: llFSRights(abi), scoped: llScopes(abi)}, ports: slices.Clone(rules.Ports)}
	if abi >= 4 && rules.HandleTCP {
		t.attr.handledNet = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
	}
	if rules.FilesOnly {
		t.attr.handledNet, t.attr.scoped, t.ports = 0, 0, nil
	}
	for p, r := range landlockGrants(rules, abi) {
		if r == 0 || (without != "" && p == without) {
			continue
		}
		pfd, err := OpenGrant(p) // no link followed: see OpenGrant
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstat(pfd, &st); err != nil {
			_ = unix.Close(pfd)
			continue
		}
		kind := st.Mode & unix.S_IFMT
		if kind != unix.S_IFDIR {
			r &= llFileRights
		}
		t.grants = append(t.grants, templateGrant{Grant: Grant{fd: pfd, rights: r & t.attr.handledFS}, path: p,
			strict: kind == unix.S_IFDIR || kind == unix.S_IFREG})
	}
	return t, nil
}

// Close closes t's descriptors.
func (t *LandlockTemplate) Close() {
	for _, g := range t.grants {
		_ = unix.Close(g.fd)
	}
	t.grants = nil
}

// Ruleset creates a ruleset of t's rules and, unless own is "", every file
// system right on own, a directory, and returns its descriptor.
func (t *LandlockTemplate) Ruleset(own string) (int, error) {
	attr := t.attr
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET,
		uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return -1, xerrors.Errorf("landlock_create_ruleset: %w", errno)
	}
	rs := int(fd)
	unix.CloseOnExec(rs)
	fail := func(err error) (int, error) {
		_ = unix.Close(rs)
		return -1, err
	}
	addPath := func(g Grant) unix.Errno {
		rule := llPathBeneath{allowed: g.rights, fd: int32(g.fd)}
		_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rs), unix.LANDLOCK_RULE_PATH_BENEATH,
			uintptr(unsafe.Pointer(&rule)), 0, 0, 0)
		return errno
	}
	for _, g := range t.grants {
		// A rule that cannot be added grants nothing, which is safe for an
		// odd entry (a socket in /dev) but not for what the policy names.
		if errno := addPath(g.Grant); errno != 0 && g.rights != 0 && g.strict {
			return fail(xerrors.Errorf("landlock_add_rule %s: %w", g.path, errno))
		}
	}
	for _, port := range t.ports {
		rule := llNetPort{allowed: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, port: uint64(port)}
		_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rs), llRuleNetPort,
			uintptr(unsafe.Pointer(&rule)), 0, 0, 0)
		if errno != 0 {
			return fail(xerrors.Errorf("landlock_add_rule port %d: %w", port, errno))
		}
	}
	if own != "" {
		ofd, err := OpenGrant(own)
		if err != nil {
			return fail(xerrors.Errorf("open %s: %w", own, err))
		}
		errno := addPath(Grant{fd: ofd, rights: attr.handledFS})
		_ = unix.Close(ofd)
		if errno != 0 {
			return fail(xerrors.Errorf("landlock_add_rule %s: %w", own, errno))
		}
	}
	return rs, nil
}

// landlockSharedOwnMax is how many own-dir rules a LandlockShared takes
// before it is made again: each Start's rule stays in the ruleset (a rule
// cannot be taken out), holding its dir's inode, and
// landlock_restrict_self copies every rule into the thread's domain,
// about 0.3 µs of the ready thread's CPU each (74 µs a Start on average
// at 512), against the making's 3.4 ms (7 µs a Start). 128 would balance
// the two (about 19 and 27 µs) but make the ruleset again four times as
// often, and each making grants what the host has at that moment in the
// directories above a hidden path (a lock file about to be renamed over
// a hidden name: docs/sandbox-threats.md), so it stays at 512.
const landlockSharedOwnMax = 512

// LandlockShared is a policy's ruleset made once, less one directory (the
// Manager's temp parent), to which each Start adds the rule of its tree's
// own temp dir before restricting its thread by it (Ruleset). A template
// of descriptors (LandlockTemplate) to make a ruleset per tree cost every
// Start the rules' system calls, and its descriptors, one per rule (some
// hundreds where hidden paths are expanded), made every scan of the
// descriptor table and every fork slower (the figures: docs/benchmarks.md,
// BenchmarkSandbox, and docs/measurements.md).
//
// As root the tree's own mount namespace covers the parent but for its
// own dir (PrivateTemp), and Landlock does not look at a covered
// directory's rules when it walks a path up, so the dir must be granted
// itself. The ruleset therefore grants the own temp dirs of the policy's
// earlier trees as well (landlockSharedOwnMax of them, then it is made
// again in the background, while it serves on with the rules of the
// Starts meanwhile): use it only where each tree sees its own dir alone,
// in the mount namespace of its own that covers the others' (another
// tree's /proc/PID/root and cwd are refused by Landlock's ptrace rule: its
// domain is no descendant of this one). Use NewLandlockShared; call Close.
type LandlockShared struct {
	rules   Rules
	abi     int
	without string

	mu   sync.Mutex
	rs   int // -1 once closed
	owns int // own-dir rules added to rs
	// remaking is set while a goroutine makes the ruleset again
	// (remake), which makers tracks for Close; nextRemake is the owns at
	// which the next one starts (later after one failed).
	remaking   bool
	nextRemake int
	makers     sync.WaitGroup
}

// NewLandlockShared makes the ruleset of rules for abi, leaving out the
// grant on without ("" for none), which must be one of rules.Write.
func NewLandlockShared(rules Rules, abi int, without string) (*LandlockShared, error) {
	s := &LandlockShared{rules: rules, abi: abi, without: without, nextRemake: landlockSharedOwnMax}
	rs, err := s.make()
	if err != nil {
		return nil, err
	}
	s.rs = rs
	return s, nil
}

// make makes s's ruleset afresh: the grants are computed again (an entry
// made since in a directory above a hidden path is granted, as in a new
// policy's; a hidden path never is).
func (s *LandlockShared) make() (int, error) {
	t, err := NewLandlockTemplate(s.rules, s.abi, s.without)
	if err != nil {
		return -1, err
	}
	defer t.Close()
	return t.Ruleset("")
}

// remake makes s's ruleset again and puts it in place of the one in use,
// on a goroutine of its own: the making (a descriptor and a rule per
// grant, some hundreds) took 3–4 ms, which the Start that found the
// ruleset full paid under s.mu, and with it any Start of the policy
// waiting for the lock. Where it cannot be made (out of descriptors,
// say), the ruleset in use serves on, and it is tried again after
// landlockSharedOwnMax more Starts.
func (s *LandlockShared) remake() {
	defer s.makers.Done()
	rs, err := s.make()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.remaking = false
	if err != nil {
		s.nextRemake = s.owns + landlockSharedOwnMax
		return
	}
	if s.rs < 0 { // closed meanwhile
		_ = unix.Close(rs)
		return
	}
	_ = unix.Close(s.rs)
	s.rs, s.owns, s.nextRemake = rs, 0, landlockSharedOwnMax
}

// Ruleset adds every file system right on own, a directory, to s's
// ruleset (nothing when own is "") and returns a descriptor of the
// ruleset, the caller's to close. Once the ruleset holds
// landlockSharedOwnMax own-dir rules it is made again in the background
// (remake).
func (s *LandlockShared) Ruleset(own string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rs < 0 {
		return -1, xerrors.New("landlock ruleset: closed")
	}
	if own != "" {
		ofd, err := OpenGrant(own)
		if err != nil {
			return -1, xerrors.Errorf("open %s: %w", own, err)
		}
		rule := llPathBeneath{allowed: llFSRights(s.abi), fd: int32(ofd)}
		_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(s.rs), unix.LANDLOCK_RULE_PATH_BENEATH,
			uintptr(unsafe.Pointer(&rule)), 0, 0, 0)
		_ = unix.Close(ofd)
		if errno != 0 {
			return -1, xerrors.Errorf("landlock_add_rule %s: %w", own, errno)
		}
		s.owns++
		if s.owns >= s.nextRemake && !s.remaking {
			s.remaking = true
			s.makers.Add(1)
			go s.remake()
		}
	}
	// A copy: a ruleset made again closes s.rs while a Start may still
	// restrict its thread by the one it was given.
	fd, err := unix.FcntlInt(uintptr(s.rs), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, xerrors.Errorf("landlock ruleset: %w", err)
	}
	return fd, nil
}

// waitRemade waits until no remake is under way (tests).
func (s *LandlockShared) waitRemade() { s.makers.Wait() }

// Close closes s's ruleset, once a remake under way is done; the copies
// given out stay the callers'.
func (s *LandlockShared) Close() {
	s.mu.Lock()
	if s.rs >= 0 {
		_ = unix.Close(s.rs)
		s.rs = -1
	}
	s.mu.Unlock()
	s.makers.Wait()
}

// LandlockRestrict restricts the calling thread, which must have
// no_new_privs set (or CAP_SYS_ADMIN), by the ruleset rs. Only this thread:
// the all-threads flag would confine the host.
func LandlockRestrict(rs int) error {
	_, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(rs), 0, 0)
	if errno != 0 {
		return xerrors.Errorf("landlock_restrict_self: %w", errno)
	}
	return nil
}

// Grant is a rule ready to add: an O_PATH descriptor and its rights.
type Grant struct {
	fd     int
	rights uint64
}

// RestrictConnectToPort adds a Landlock layer to the calling thread that
// handles TCP bind and connect and allows only a connect to port.
func RestrictConnectToPort(port int) error {
	attr := llRulesetAttr{handledNet: unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return xerrors.Errorf("landlock_create_ruleset (proxy port): %w", errno)
	}
	rs := int(fd)
	defer unix.Close(rs)
	rule := llNetPort{allowed: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, port: uint64(port)}
	if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rs), llRuleNetPort,
		uintptr(unsafe.Pointer(&rule)), 0, 0, 0); errno != 0 {
		return xerrors.Errorf("landlock_add_rule (proxy port %d): %w", port, errno)
	}
	return LandlockRestrict(rs)
}

// within reports whether p is dir or lies below it; both are clean and
// absolute (the root package's policy checks have their own, for every OS).
func within(p, dir string) bool {
	if dir == "/" {
		return strings.HasPrefix(p, dir)
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}
