package agentproc

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"

	"github.com/agentproc/agentproc/internal/cgroup"
	"github.com/agentproc/agentproc/internal/procfs"
)

// The state dir's part of the OS contract (listed in platform.go).
//
// stopOrphans stops trees whose Manager is dead: SIGTERM to every verified
// member, up to grace for them to exit, then SIGKILL until nothing is left
// (grace 0 skips the SIGTERM), and returns how many processes of each tree
// it found.

func stateSupported() error { return nil }

var (
	bootIDOnce sync.Once
	bootIDVal  string
)

// bootID is /proc/sys/kernel/random/boot_id: a new random value each boot,
// so a record from an earlier boot is never matched to a live process.
func bootID() string {
	bootIDOnce.Do(func() {
		bootIDVal = procfs.BootID()
	})
	return bootIDVal
}

func selfIdentity() (hostIdentity, error) {
	id, ok := identityOf(os.Getpid())
	if !ok {
		return hostIdentity{}, xerrors.New("agentproc: cannot read /proc/self/stat")
	}
	if id.Boot == "" {
		return hostIdentity{}, xerrors.New("agentproc: cannot read /proc/sys/kernel/random/boot_id")
	}
	return id, nil
}

// identityOf returns pid's start time (field 22 of /proc/PID/stat, clock
// ticks since boot) on the current boot; ok is false when pid is not a live
// process. A zombie counts as gone: it runs nothing and holds no files.
func identityOf(pid int) (hostIdentity, bool) {
	id, zombie, ok := statIdentity(pid)
	return id, ok && !zombie
}

// statIdentity is identityOf that also accepts a zombie (saying so): a
// child that already exited still has the start time it was given.
func statIdentity(pid int) (id hostIdentity, zombie, ok bool) {
	start, state, ok := procfs.StartTime(pid)
	if !ok {
		return hostIdentity{}, false, false
	}
	return hostIdentity{PID: pid, Start: start, Boot: bootID()}, state == 'Z', true
}

// lockStateDir takes an exclusive flock on the file lock in dirfd. flock
// locks belong to the open file, so a second Manager in the same process is
// refused too, and the kernel drops the lock when its holder dies: a dead
// Manager never keeps the dir.
func lockStateDir(dirfd int) (*os.File, error) {
	f, err := openAt(dirfd, "lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, xerrors.Errorf("open lock file: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder := "another Manager"
		data := make([]byte, 32)
		if n, _ := f.ReadAt(data, 0); len(bytes.TrimSpace(data[:n])) > 0 {
			holder += " (host PID " + string(bytes.TrimSpace(data[:n])) + ")"
		}
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, xerrors.Errorf("held by %s, which is still running: %w", holder, err)
		}
		return nil, xerrors.Errorf("lock: %w", err)
	}
	return f, nil
}

// unlockStateDir gives the lock up and closes the file. The unlock comes
// first because a flock belongs to the open file, which a child forked at
// that moment by another goroutine shares until its exec closes it: closing
// our descriptor alone would leave the dir locked for that instant, and a
// Manager opened on it right after would be refused.
func unlockStateDir(f *os.File) {
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	_ = f.Close()
}

// orphanTree is what a record says about a tree to stop.
type orphanTree struct {
	id     string
	leader hostIdentity // zero when the record was made before the shell ran
	cgroup string
}

// treeKiller stops orphaned trees. A process belongs to a tree when its
// environment carries the tree's marker, when it is in the tree's process
// group while the leader is verified to be the recorded one (same PID,
// start time and boot), or when it is in the tree's cgroup. Every target is
// pinned with a pidfd and checked again before it is signalled through it,
// so a PID reused by an unrelated process is never signalled.
type treeKiller struct {
	trees    []orphanTree
	byMarker map[string]int // marker value (the ID) -> tree index
	groups   map[int]int    // verified process group -> tree index
	// led holds the groups whose leader was found carrying a tree's
	// marker: ours, whatever the record says (the guard knows no PIDs).
	led     map[int]int
	cgroups map[int]*cgroup.Group
	targets map[int]*orphanTarget
	seen    map[int]bool // every PID counted in found
	found   []int
}

type orphanTarget struct {
	fd     int
	killed bool
}

func newTreeKiller(trees []orphanTree) *treeKiller {
	k := &treeKiller{
		trees:    trees,
		byMarker: make(map[string]int, len(trees)),
		cgroups:  make(map[int]*cgroup.Group),
		targets:  make(map[int]*orphanTarget),
		seen:     make(map[int]bool),
		found:    make([]int, len(trees)),
		led:      make(map[int]int),
	}
	for i, t := range trees {
		k.byMarker[t.id] = i
		if g := orphanCgroup(t); g != nil {
			k.cgroups[i] = g
		}
	}
	return k
}

func stopOrphans(trees []orphanTree, grace time.Duration) []int {
	if len(trees) == 0 {
		return nil
	}
	k := newTreeKiller(trees)
	defer k.close()
	if grace > 0 {
		// The scan counts each process as it signals it; a group signal
		// first would leave nothing to count.
		k.round(unix.SIGTERM)
		k.wait(grace)
	}
	// What needs no /proc scan goes first: on a loaded machine the scan
	// of every process takes long, and the guard must be quick.
	for _, g := range k.cgroups {
		g.Kill()
	}
	k.signalGroups(unix.SIGKILL)
	for range maxSweepRounds {
		if k.round(unix.SIGKILL) == 0 {
			break
		}
	}
	k.wait(escapeeDeathWait)
	for _, g := range k.cgroups {
		_ = g.Remove()
	}
	return k.found
}

// orphanCgroup returns the tree's cgroup if the record names one that looks
// like ours: an absolute path in a cgroup v2 hierarchy whose last element
// is agentproc-ID. Anything else is ignored rather than killed.
func orphanCgroup(t orphanTree) *cgroup.Group {
	if t.cgroup == "" || !filepath.IsAbs(t.cgroup) || filepath.Base(t.cgroup) != "agentproc-"+t.id {
		return nil
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(t.cgroup, &fs); err != nil || fs.Type != unix.CGROUP2_SUPER_MAGIC {
		return nil
	}
	return cgroup.Open(t.cgroup)
}

// verifyGroups records the process groups whose leader is provably the
// recorded process: same PID, start time and boot, and the tree's marker in
// its environment, for a record names any process it likes and start times
// and boot IDs are world-readable. While the leader lives the group ID
// cannot be reused. A group ID that cannot be a tree of ours (<= 1, this
// process or its group) is never recorded.
func (k *treeKiller) verifyGroups() {
	k.groups = make(map[int]int, len(k.trees)+len(k.led))
	for pg, i := range k.led {
		if checkRecordPID("leader", pg) == nil {
			k.groups[pg] = i
		}
	}
	boot := bootID()
	var s *procScanner
	for i, t := range k.trees {
		if t.leader.PID <= 0 || t.leader.Boot != boot || checkRecordPID("leader", t.leader.PID) != nil {
			continue
		}
		if id, ok := identityOf(t.leader.PID); !ok || id.Start != t.leader.Start {
			continue
		}
		if s == nil {
			var err error
			if s, err = newProcScanner(); err != nil {
				return
			}
			defer s.Close()
		}
		if s.marked(t.leader.PID, []byte(MarkerEnv+"="+t.id)) {
			k.groups[t.leader.PID] = i
		}
	}
}

// signalGroups sends sig to every process group whose leader is still the
// recorded process, at once and without a scan. The scan that follows
// counts and pins them one by one.
func (k *treeKiller) signalGroups(sig unix.Signal) {
	k.verifyGroups()
	for pg := range k.groups {
		_ = unix.Kill(-pg, sig)
	}
}

// belongs returns the tree pid belongs to. A zombie belongs to none: it is
// dead already, and its (empty) environment says nothing.
func (k *treeKiller) belongs(s *procScanner, pid int, inCgroup map[int]int) (int, bool) {
	stat, _, err := s.Read(pid, "stat", false)
	if err != nil {
		return 0, false
	}
	state, pgrp, ok := procfs.ParseStat(stat)
	if !ok || state == 'Z' {
		return 0, false
	}
	if i, ok := inCgroup[pid]; ok {
		return i, true
	}
	if env, uid, err := s.Read(pid, "environ", true); err == nil && uid == s.EUID() {
		v, _ := procfs.EnvValue(env, markerPrefix)
		if i, ok := k.byMarker[string(v)]; ok {
			if pgrp == pid && checkRecordPID("leader", pid) == nil {
				k.led[pid] = i
				k.groups[pid] = i
			}
			return i, true
		}
	}
	if i, ok := k.groups[pgrp]; ok {
		return i, true
	}
	return 0, false
}

// round scans /proc once, signals every member of the trees not signalled
// with sig before, and returns how many it signalled.
func (k *treeKiller) round(sig unix.Signal) int {
	s, err := newProcScanner()
	if err != nil {
		return 0
	}
	defer s.Close()
	pids, err := s.PIDs()
	if err != nil {
		return 0
	}
	k.verifyGroups()
	inCgroup := k.cgroupMembers()
	n := 0
	for _, pid := range pids {
		killedBare := false
		if t, ok := k.targets[pid]; ok {
			// Only a pidfd may be signalled from this list: without one
			// the PID may name another process by now, so it is checked
			// again below like a newcomer.
			killedBare = t.fd < 0 && t.killed
			if t.fd >= 0 && !pidfdExited(t.fd) {
				if sig == unix.SIGKILL && !t.killed {
					_ = signalTarget(pid, t.fd, sig)
					t.killed = true
					n++
				}
				continue
			}
			if t.fd >= 0 {
				_ = unix.Close(t.fd)
			}
			delete(k.targets, pid)
		}
		i, ok := k.belongs(s, pid, inCgroup)
		if !ok {
			continue
		}
		// -1 when no pidfd can be had, for whatever reason: the check
		// below is then made right before a plain kill.
		fd := pidfdOpen(pid)
		// Checked again now that the PID is pinned: if it was reused
		// between the scan and the pin, the newcomer fails the check.
		if j, ok := k.belongs(s, pid, k.cgroupMembers()); !ok || j != i {
			if fd >= 0 {
				_ = unix.Close(fd)
			}
			continue
		}
		if err := signalTarget(pid, fd, sig); err != nil {
			if fd >= 0 {
				_ = unix.Close(fd)
			}
			continue
		}
		k.targets[pid] = &orphanTarget{fd: fd, killed: sig == unix.SIGKILL}
		if !k.seen[pid] {
			// Counted once, even if a later round meets it again.
			k.seen[pid] = true
			k.found[i]++
		}
		if killedBare && sig == unix.SIGKILL {
			continue // killed before without a pidfd and not gone yet
		}
		n++
	}
	return n
}

func (k *treeKiller) cgroupMembers() map[int]int {
	if len(k.cgroups) == 0 {
		return nil
	}
	m := make(map[int]int)
	for i, g := range k.cgroups {
		for _, pid := range g.Members() {
			m[pid] = i
		}
	}
	return m
}

// wait blocks in poll until every target has exited (pidfds poll readable
// at exit) or timeout passes.
func (k *treeKiller) wait(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	var pfds []unix.PollFd
	for _, t := range k.targets {
		if t.fd >= 0 {
			pfds = append(pfds, unix.PollFd{Fd: int32(t.fd), Events: unix.POLLIN})
		}
	}
	waitPidfds(pfds, deadline)
}

func (k *treeKiller) close() {
	for pid, t := range k.targets {
		if t.fd >= 0 {
			_ = unix.Close(t.fd)
		}
		delete(k.targets, pid)
	}
}

// checkRecordPID refuses a PID a record names for a process to signal
// unless it could be one of ours: 0 (not known yet) or above 1, and never
// this process or its process group (kill(-1) and kill(-0) would reach far
// more than a tree).
func checkRecordPID(what string, pid int) error {
	if pid == 0 {
		return nil
	}
	if pid <= 1 || pid == os.Getpid() || pid == unix.Getpgrp() {
		return xerrors.Errorf("record names %s PID %d, which cannot be a tree of ours", what, pid)
	}
	return nil
}
