package agentproc

import (
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"

	"github.com/agentproc/agentproc/internal/cgroup"
	"github.com/agentproc/agentproc/internal/pidfd"
	"github.com/agentproc/agentproc/internal/procfs"
)

// The orphan killer: the kill sweep for trees known only from records, not
// from a live containment. It stops what a dead Manager left (recovery, in
// recover.go, and the host guard, in hostguard_linux.go) and what is left
// of a detached tree whose runner is gone (detach_linux.go). Its part of the
// OS contract (listed in platform.go):
//
// stopOrphans stops trees whose Manager is dead: SIGTERM to every verified
// member, up to grace for them to exit, then SIGKILL until nothing is left
// (grace 0 skips the SIGTERM), and returns how many processes of each tree
// it found. checkRecordPID refuses a record's PID that cannot be a tree of
// ours.

// orphanTree is what a record says about a tree to stop.
type orphanTree struct {
	id     string
	leader hostIdentity // zero when the record was made before the shell ran
	cgroup string
	// parent is the WithCgroup parent of the Manager that reads the
	// record, "" for none: one more place the tree's cgroup may be.
	parent string
	// fromHost says the live host that made the cgroup listed it (the host
	// guard's list), so its placement needs no check.
	fromHost bool
}

// treeKiller stops orphaned trees. A process belongs to a tree when its
// environment carries the tree's marker, when it is in the tree's process
// group while the leader is verified to be the recorded one (same PID,
// start time and boot), or when it is in the tree's cgroup. Every target is
// signalled by internal/pidfd's protocol (pinned, checked again with
// belongs, signalled through the pin), so a PID reused by an unrelated
// process is never signalled.
type treeKiller struct {
	trees    []orphanTree
	byMarker map[string]int   // marker value (the ID) -> tree index
	groups   map[int]ledGroup // verified process group -> tree and leader
	// led holds the groups whose leader was found carrying a tree's
	// marker: ours, whatever the record says (the guard knows no PIDs),
	// while that leader lives.
	led     map[int]ledGroup
	cgroups map[int]*cgroup.Group
	targets pidfd.Targets
	seen    map[int]bool // every PID counted in found
	found   []int
}

func newTreeKiller(trees []orphanTree) *treeKiller {
	k := &treeKiller{
		trees:    trees,
		byMarker: make(map[string]int, len(trees)),
		cgroups:  make(map[int]*cgroup.Group),
		seen:     make(map[int]bool),
		found:    make([]int, len(trees)),
		led:      make(map[int]ledGroup),
	}
	for i, t := range trees {
		k.byMarker[t.id] = i
		if g := orphanCgroup(t); g != nil {
			k.cgroups[i] = g
		}
	}
	return k
}

// ledGroup is a process group of a tree: the tree, and the start time of
// the leader it was verified or found by. The group counts only while that
// leader lives: once it and its members are gone, its PID may be handed to
// a process outside the tree that makes a group of its own, as every shell
// job, daemon and tree leader does, and a tree can steer which (ninth
// attack review, TestAttackRecoveryKillsReusedGroup).
type ledGroup struct {
	tree  int
	start uint64
}

// leads reports whether pg is still the process g was verified or found
// by: same start time (a zombie still holds its PID).
func (g ledGroup) leads(pg int) bool {
	id, _, ok := statIdentity(pg)
	return ok && id.Start == g.start
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
	k.killRounds()
	k.wait(escapeeDeathWait)
	for _, g := range k.cgroups {
		_ = g.Remove()
	}
	return k.found
}

// orphanCgroup returns the tree's cgroup if the record names one this
// package could have made: an absolute, clean path in a cgroup hierarchy
// whose last element is agentproc-ID, ID a UUID as Start gives; a v2
// directory where the host had one, else (a pure v1 host) its first v1
// directory; and, unless the host that made it listed it, where New could
// have put it (cgroup.CouldHaveMade: under the top of the hierarchy, the
// host's own cgroup or one above it, or the Manager's WithCgroup parent;
// owned by this user; never the host's own). Anything else is ignored
// rather than killed.
func orphanCgroup(t orphanTree) *cgroup.Group {
	if t.cgroup == "" || !filepath.IsAbs(t.cgroup) || filepath.Clean(t.cgroup) != t.cgroup || filepath.Base(t.cgroup) != cgroup.LeafName(t.id) {
		return nil
	}
	if _, err := uuid.Parse(t.id); err != nil {
		return nil
	}
	if !t.fromHost && !cgroup.CouldHaveMade(t.cgroup, t.parent) {
		return nil
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(t.cgroup, &fs); err != nil {
		return nil
	}
	switch fs.Type {
	case unix.CGROUP2_SUPER_MAGIC:
		return cgroup.Open(t.cgroup)
	case unix.CGROUP_SUPER_MAGIC:
		if g := cgroup.OpenV1(t.cgroup); g != nil {
			return g
		}
	}
	return nil
}

// verifyGroups records the process groups whose leader is provably the
// recorded process: same PID, start time and boot, and the tree's marker in
// its environment, for a record names any process it likes and start times
// and boot IDs are world-readable; and those of led whose leader is still
// the process found leading them (same PID and start time; a zombie still
// holds its PID). While the leader lives the group ID cannot be reused. A
// group ID that cannot be a tree of ours (<= 1, this process or its group)
// is never recorded.
func (k *treeKiller) verifyGroups() {
	k.groups = make(map[int]ledGroup, len(k.trees)+len(k.led))
	for pg, g := range k.led {
		if g.leads(pg) && checkRecordPID("leader", pg) == nil {
			k.groups[pg] = g
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
			k.groups[t.leader.PID] = ledGroup{tree: i, start: t.leader.Start}
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
// dead already, and its (empty) environment says nothing. An environment
// that says nothing yet (an exec under way, readMarkerEnv) is read again
// as settleEnvs does.
func (k *treeKiller) belongs(s *procScanner, pid int, inCgroup map[int]int) (int, bool) {
	i, ok, _ := k.belongsNow(s, pid, inCgroup, true)
	return i, ok
}

// belongsNow is belongs; without wait, an environment that says nothing
// yet is not read again, and unknown is set instead, for a caller that
// reads all such PIDs again at once.
func (k *treeKiller) belongsNow(s *procScanner, pid int, inCgroup map[int]int, wait bool) (i int, ok, unknown bool) {
	stat, _, err := s.Read(pid, "stat", false)
	if err != nil {
		return 0, false, false
	}
	state, pgrp, ok := procfs.ParseStat(stat)
	if !ok || state == 'Z' {
		return 0, false, false
	}
	start, _, _ := procfs.ParseStatStart(stat)
	if i, ok := inCgroup[pid]; ok {
		return i, true, false
	}
	env, uid, known := readMarkerEnv(&s.Scanner, pid, true)
	if !known && !wait {
		return 0, false, true
	}
	if !known {
		env, uid = s.settledEnv(pid, true)
	}
	if uid == s.EUID() {
		v, _ := markerID(env)
		if i, ok := k.byMarker[string(v)]; ok {
			if pgrp == pid && start != 0 && checkRecordPID("leader", pid) == nil {
				k.led[pid] = ledGroup{tree: i, start: start}
				k.groups[pid] = k.led[pid]
			}
			return i, true, false
		}
	}
	// The leader is looked at again: it may have died since the group
	// was verified, earlier in this round, and its PID been taken.
	if g, ok := k.groups[pgrp]; ok && g.leads(pgrp) {
		return g.tree, true, false
	}
	return 0, false, false
}

// killRounds SIGKILLs the trees' processes in rounds until one finds
// nothing new (sweepRounds).
func (k *treeKiller) killRounds() {
	sweepRounds(func() (int, int) { return k.round(unix.SIGKILL) })
}

// round scans /proc once, then probes the PIDs handed out since the scan
// listed /proc (probeSince: a fork hopper is only ever under one of those
// by the time the scan would read it), signals every member of the trees
// not signalled with sig before, and returns how many it signalled
// (signalled) and how many members new to the sweep it found but could not
// signal (missed: gone by then, or no longer provably the tree's).
func (k *treeKiller) round(sig unix.Signal) (signalled, missed int) {
	s, err := newProcScanner()
	if err != nil {
		return 0, 0
	}
	defer s.Close()
	mark := markPIDs()
	pids, err := s.PIDs()
	if err != nil {
		return 0, 0
	}
	k.verifyGroups()
	inCgroup := k.cgroupMembers()
	signal := func(pid, i int) {
		// Checked again once the PID is pinned: if it was reused between
		// the scan and the pin, the newcomer fails the check.
		o := k.targets.Signal(pid, sig, func() bool {
			j, ok := k.belongs(s, pid, k.cgroupMembers())
			return ok && j == i
		})
		if o != pidfd.Sent && o != pidfd.SentAgain {
			if o == pidfd.Skipped && !k.seen[pid] {
				missed++
			}
			return
		}
		if !k.seen[pid] {
			// Counted once, even if a later round meets it again.
			k.seen[pid] = true
			k.found[i]++
		}
		if o == pidfd.Sent {
			signalled++
		} // else killed before without a pidfd and not gone yet
	}
	// known deals with a target still pinned, which needs no check (nor a
	// belongs, which costs reads of /proc); any other PID is checked as a
	// newcomer.
	known := func(pid int) bool {
		o, done := k.targets.Known(pid, sig)
		if done && o == pidfd.PinnedKilled {
			signalled++
		}
		return done
	}
	var unknown []int
	for _, pid := range pids {
		if known(pid) {
			continue
		}
		i, ok, unsure := k.belongsNow(s, pid, inCgroup, false)
		if unsure {
			unknown = append(unknown, pid) // read again below, all at once
		} else if ok {
			signal(pid, i)
		}
	}
	var settled []int
	settleEnvs(&s.Scanner, unknown, true, func(pid int, _ []byte, _ uint32) { settled = append(settled, pid) })
	for _, pid := range settled {
		if i, ok := k.belongs(s, pid, inCgroup); ok {
			signal(pid, i)
		}
	}
	probeSince(s, mark, func(pids []int) {
		for _, pid := range pids {
			if freePIDOrOurs(s.Self(), pid) || known(pid) {
				continue
			}
			if i, ok := k.belongs(s, pid, inCgroup); ok {
				signal(pid, i)
			}
		}
	})
	return signalled, missed
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
	fds, _ := k.targets.Killed(false)
	pidfd.Wait(fds, time.Now().Add(timeout))
}

func (k *treeKiller) close() { k.targets.Close() }

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
