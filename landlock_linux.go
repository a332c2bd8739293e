package agentproc

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"

	"github.com/agentproc/agentproc/internal/procfs"
)

// Landlock, written directly on the system calls: a ruleset is built once
// per distinct policy (landlockRuleset) and its descriptor reused by every
// Start of that policy, which restricts only its throwaway thread
// (landlock_restrict_self without the all-threads flag).

// landlockMaxABI is the newest ABI whose rights this file knows; a newer
// kernel is given the rules of this one (Info.Sandbox.LandlockABI says so).
const landlockMaxABI = 7

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

// landlockABI is the kernel's Landlock ABI version, 0 without Landlock
// (not built in, not enabled in lsm=, or refused by a seccomp filter).
var landlockABI = sync.OnceValue(func() int {
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

// llHidden are hidden under every sandbox with Read nil: the terminals of
// the host (a tree reading one steals its keystrokes) and the Manager's
// own host-wide records.
var llHidden = []string{"/dev/pts", "/dev/ptmx", "/dev/console", "/dev/tty0", "/dev/vcs", "/dev/input", "/dev/mem", "/dev/kmem", "/dev/port"}

// landlockHidden is what the ruleset of pol must leave out when no mount
// namespace covers the hidden paths: pol's, the host's terminals, less
// what this user cannot read anyway (another user's files, /etc/shadow),
// since each hidden path costs the rules of every directory above it.
func landlockHidden(pol *sandboxPolicy) []string {
	var hide []string
	for _, h := range append(slices.Clone(pol.hide), llHidden...) {
		if err := unix.Access(h, unix.R_OK); err == unix.EACCES {
			continue // hidden by its permissions
		}
		hide = append(hide, h)
	}
	return hide
}

// landlockGrants computes the rules of pol: path → rights, leaving out
// hide. Hidden paths are taken out by granting, instead of a directory
// above one, the directory's own listing and each of its entries but the
// hidden one (Landlock grants only; it cannot deny below a grant). Entries
// that appear later in such a directory are not readable.
func landlockGrants(pol *sandboxPolicy, abi int, hide []string) map[string]uint64 {
	all := llFSRights(abi)
	read := uint64(llReadRights)
	grants := map[string]uint64{}
	if pol.read == nil {
		grants["/"] |= read
	} else {
		for _, p := range append(slices.Clone(pol.read), systemReadPaths...) {
			grants[p] |= read
		}
		if pol.shell != "" {
			grants[filepath.Dir(pol.shell)] |= read
		}
	}
	for _, w := range pol.write {
		grants[w] |= all
	}
	for _, d := range devicePaths {
		grants[d] |= llDevRights & all
	}
	out := map[string]uint64{}
	add := func(p string, r uint64) { out[p] |= r }
	for p, r := range grants {
		llExpand(p, r, hide, add)
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

// landlockRuleset creates the ruleset of pol for abi, leaving out hide,
// and returns its descriptor. Paths that do not exist are skipped: nothing
// there to grant.
func landlockRuleset(pol *sandboxPolicy, abi int, hide []string) (int, error) {
	attr := llRulesetAttr{handledFS: llFSRights(abi), scoped: llScopes(abi)}
	if abi >= 4 && (pol.network == NetworkNone || pol.network == NetworkPorts) {
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
	for p, r := range landlockGrants(pol, abi, hide) {
		if r == 0 {
			continue
		}
		pfd, err := openGrant(p) // no link followed: see openGrant
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
	if pol.network == NetworkPorts {
		for _, port := range pol.ports {
			rule := llNetPort{allowed: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, port: uint64(port)}
			_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rs), llRuleNetPort,
				uintptr(unsafe.Pointer(&rule)), 0, 0, 0)
			if errno != 0 {
				return fail(xerrors.Errorf("landlock_add_rule port %d: %w", port, errno))
			}
		}
	}
	return rs, nil
}

// landlockRestrict restricts the calling thread, which must have
// no_new_privs set (or CAP_SYS_ADMIN), by the ruleset rs. Only this thread:
// the all-threads flag would confine the host.
func landlockRestrict(rs int) error {
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

// llGrant is a rule ready to add: an O_PATH descriptor and its rights.
type llGrant struct {
	fd     int
	rights uint64
}

// landlockLayerGrants opens, once per policy, what the temp dir layer of
// pol grants on besides the temp dir (landlockTempLayer): the rights that
// change files on pol's Write but the temp dirs' parent, and on the
// devices. The caller closes the descriptors (closeGrants).
func landlockLayerGrants(pol *sandboxPolicy, abi int) ([]llGrant, error) {
	change := llChangeRights(abi)
	parent := resolvePath(pol.tmpParent)
	var out []llGrant
	add := func(p string, r uint64) {
		fd, err := openGrant(p)
		if err != nil {
			return // nothing there to grant, as in landlockRuleset
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
		out = append(out, llGrant{fd: fd, rights: r & change})
	}
	for _, w := range pol.write {
		if w != parent {
			add(w, change)
		}
	}
	for _, d := range devicePaths {
		add(d, llDevRights)
	}
	return out, nil
}

// closeGrants closes the descriptors of gs.
func closeGrants(gs []llGrant) {
	for _, g := range gs {
		_ = unix.Close(g.fd)
	}
}

// landlockTempLayer returns a ruleset for one Start of a policy whose
// cached ruleset grants the whole parent of the Manager's private temp
// dirs: a second layer handling only the rights that change files, and
// granting them on what the first grants them on (grants, from
// landlockLayerGrants) with the parent replaced by tmp, this Start's own
// temp dir. Layers intersect, so the tree changes its own temp dir and
// not another tree's (TestAttackTempDirOfAnotherTree). Reading is the
// first layer's alone.
func landlockTempLayer(grants []llGrant, abi int, tmp string) (int, error) {
	change := llChangeRights(abi)
	attr := llRulesetAttr{handledFS: change}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET,
		uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return -1, xerrors.Errorf("landlock_create_ruleset: %w", errno)
	}
	rs := int(fd)
	unix.CloseOnExec(rs)
	addRule := func(g llGrant) unix.Errno {
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
	tfd, err := openGrant(tmp)
	if err != nil {
		_ = unix.Close(rs)
		return -1, xerrors.Errorf("open %s: %w", tmp, err)
	}
	errno = addRule(llGrant{fd: tfd, rights: change})
	_ = unix.Close(tfd)
	if errno != 0 {
		_ = unix.Close(rs)
		return -1, xerrors.Errorf("landlock_add_rule %s: %w", tmp, errno)
	}
	return rs, nil
}
