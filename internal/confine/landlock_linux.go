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

// LandlockHidden is what a ruleset must leave out when no mount namespace
// covers the hidden paths: hide, the host's terminals (HiddenDevices),
// less what this user cannot read anyway (another user's files,
// /etc/shadow), since each hidden path costs the rules of every directory
// above it.
func LandlockHidden(hide []string) []string {
	var out []string
	for _, h := range append(slices.Clone(hide), HiddenDevices...) {
		if err := unix.Access(h, unix.R_OK); err == unix.EACCES {
			continue // hidden by its permissions
		}
		out = append(out, h)
	}
	return out
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
	out := map[string]uint64{}
	add := func(p string, r uint64) { out[p] |= r }
	for p, rights := range grants {
		llExpand(p, rights, r.Hide, add)
	}
	return out
}

// llExpand adds the grant of r on p, leaving out what hide names below p.
func llExpand(p string, r uint64, hide []string, add func(string, uint64)) {
	above := false
	for _, h := range hide {
		if within(p, h) {
			return // p itself is hidden
		}
		if within(h, p) {
			above = true
		}
	}
	if !above {
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
	for _, e := range entries {
		if e.Type()&os.ModeSymlink != 0 {
			continue // reached through its target, where that is granted
		}
		llExpand(filepath.Join(p, e.Name()), r, hide, add)
	}
}

// LandlockRuleset creates the ruleset of rules for abi and returns its
// descriptor. Paths that do not exist are skipped: nothing there to grant.
func LandlockRuleset(rules Rules, abi int) (int, error) {
	attr := llRulesetAttr{handledFS: llFSRights(abi), scoped: llScopes(abi)}
	if abi >= 4 && rules.HandleTCP {
		attr.handledNet = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
	}
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
	for p, r := range landlockGrants(rules, abi) {
		if r == 0 {
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
		rule := llPathBeneath{allowed: r & attr.handledFS, fd: int32(pfd)}
		_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rs), unix.LANDLOCK_RULE_PATH_BENEATH,
			uintptr(unsafe.Pointer(&rule)), 0, 0, 0)
		_ = unix.Close(pfd)
		// A rule that cannot be added grants nothing, which is safe for an
		// odd entry (a socket in /dev) but not for what the policy names.
		if errno != 0 && rule.allowed != 0 && (kind == unix.S_IFDIR || kind == unix.S_IFREG) {
			return fail(xerrors.Errorf("landlock_add_rule %s: %w", p, errno))
		}
	}
	for _, port := range rules.Ports {
		rule := llNetPort{allowed: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, port: uint64(port)}
		_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rs), llRuleNetPort,
			uintptr(unsafe.Pointer(&rule)), 0, 0, 0)
		if errno != 0 {
			return fail(xerrors.Errorf("landlock_add_rule port %d: %w", port, errno))
		}
	}
	return rs, nil
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

// llChangeRights are the file system rights of abi that change something
// (all but reading and executing).
func llChangeRights(abi int) uint64 {
	return llFSRights(abi) &^ (unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR)
}

// Grant is a rule ready to add: an O_PATH descriptor and its rights.
type Grant struct {
	fd     int
	rights uint64
}

// LandlockLayerGrants opens, once per policy, what the temp dir layer of
// a policy grants on besides the temp dir (LandlockTempLayer): the rights
// that change files on write but parent (the temp dirs' parent,
// resolved), and on the devices. The caller closes the descriptors
// (CloseGrants).
func LandlockLayerGrants(write []string, parent string, abi int) ([]Grant, error) {
	change := llChangeRights(abi)
	var out []Grant
	add := func(p string, r uint64) {
		fd, err := OpenGrant(p)
		if err != nil {
			return // nothing there to grant, as in LandlockRuleset
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			_ = unix.Close(fd)
			return
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			r &= llFileRights
		}
		if r&change == 0 {
			_ = unix.Close(fd)
			return
		}
		out = append(out, Grant{fd: fd, rights: r & change})
	}
	for _, w := range write {
		if w != parent {
			add(w, change)
		}
	}
	for _, d := range devicePaths {
		add(d, llDevRights)
	}
	return out, nil
}

// CloseGrants closes the descriptors of gs.
func CloseGrants(gs []Grant) {
	for _, g := range gs {
		_ = unix.Close(g.fd)
	}
}

// LandlockTempLayer returns a ruleset for one Start of a policy whose
// cached ruleset grants the whole parent of the Manager's private temp
// dirs: a second layer handling only the rights that change files, and
// granting them on what the first grants them on (grants, from
// LandlockLayerGrants) with the parent replaced by tmp, this Start's own
// temp dir. Layers intersect, so the tree changes its own temp dir and
// not another tree's (TestAttackTempDirOfAnotherTree). Reading is the
// first layer's alone.
func LandlockTempLayer(grants []Grant, abi int, tmp string) (int, error) {
	change := llChangeRights(abi)
	attr := llRulesetAttr{handledFS: change}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET,
		uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return -1, xerrors.Errorf("landlock_create_ruleset: %w", errno)
	}
	rs := int(fd)
	unix.CloseOnExec(rs)
	addRule := func(g Grant) unix.Errno {
		rule := llPathBeneath{allowed: g.rights, fd: int32(g.fd)}
		_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rs), unix.LANDLOCK_RULE_PATH_BENEATH,
			uintptr(unsafe.Pointer(&rule)), 0, 0, 0)
		return errno
	}
	for _, g := range grants {
		if errno := addRule(g); errno != 0 {
			_ = unix.Close(rs)
			return -1, xerrors.Errorf("landlock_add_rule: %w", errno)
		}
	}
	tfd, err := OpenGrant(tmp)
	if err != nil {
		_ = unix.Close(rs)
		return -1, xerrors.Errorf("open %s: %w", tmp, err)
	}
	errno = addRule(Grant{fd: tfd, rights: change})
	_ = unix.Close(tfd)
	if errno != 0 {
		_ = unix.Close(rs)
		return -1, xerrors.Errorf("landlock_add_rule %s: %w", tmp, errno)
	}
	return rs, nil
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
