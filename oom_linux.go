package agentproc

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"

	"cdr.dev/slog/v3"
	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc/internal/procfs"
)

// hostOOMKills returns the kernel's count of OOM kills since boot.
func hostOOMKills() (uint64, bool) { return procfs.OOMKills() }

// treeOOMKills returns the OOM kills the tree's cgroup counted, where it
// counts them (WithCgroup with the memory controller enabled for it).
func treeOOMKills(c *containment) (int64, bool) {
	if c.cg == nil {
		return 0, false
	}
	return c.cg.OOMKills()
}

// hostOOMScore is this process's own oom_score_adj, read once.
var hostOOMScore = sync.OnceValues(func() (int, error) {
	data, err := procfs.ReadSelf("oom_score_adj")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(data)))
})

// oomScoreValue is the oom_score_adj a new tree gets, the host's plus the
// delta (at most 1000), as the text written to /proc; nil when there is
// nothing to raise.
func (m *Manager) oomScoreValue() []byte {
	if m.cfg.oomDelta <= 0 || m.cfg.foreignProc {
		// A /proc of another PID namespace names other processes under
		// these PIDs: writing there would make strangers the OOM
		// killer's choice.
		return nil
	}
	host, err := hostOOMScore()
	if err != nil {
		m.cfg.logger.Warn(context.Background(), "cannot read own oom_score_adj", fieldError(err))
		return nil
	}
	adj := min(host+m.cfg.oomDelta, maxOOMScoreAdj)
	if adj <= host {
		return nil
	}
	return strconv.AppendInt(nil, int64(adj), 10)
}

// raiseOOMScore gives a new tree value as its oom_score_adj: the leader
// first, so that every process the shell forks from then on inherits it,
// then (raiseOOMScoreTree) what the shell forked before that write.
//
// It is the output reader's first act, so it runs on another thread while
// the caller goes on: on the caller's path, between cmd.Start and Start
// returning, the same three system calls and the kernel's making of the
// new PID's /proc entries are a measurable share of
// BenchmarkPaired/StartWait (docs/measurements.md), since the child then
// runs on the caller's CPU. The writes name the leader by PID,
// which stays the leader's only until it is reaped; the supervisor holds
// the reap back until this has returned (awaitRaise). A failure is logged,
// not fatal: the command runs, only less protected.
func (m *Manager) raiseOOMScore(leader int, c *containment, value []byte) {
	if err := procfs.SetOOMScoreAdj(leader, value); err != nil && !processGone(err) {
		m.cfg.logger.Warn(context.Background(), "cannot raise oom_score_adj",
			slog.F("pid", leader), fieldError(err))
	}
	raiseOOMScoreTree(leader, c, value)
}

// awaitExitUnreaped blocks until pid, a child of this process, has
// exited, and leaves it a zombie: its PID cannot be handed out again until
// os/exec reaps it.
func awaitExitUnreaped(pid int) {
	for {
		var info unix.Siginfo
		if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != unix.EINTR {
			return
		}
	}
}

// raiseOOMScoreTree writes value to every descendant of leader that exists
// now, parent before children (a child forked after its parent's write
// inherits the value, one forked before is listed), and to the members of
// the tree's cgroup, which covers processes that left the leader's
// descendants. leader itself has its value already.
func raiseOOMScoreTree(leader int, c *containment, value []byte) {
	if last, ok := procfs.LastPID(); ok && last == leader {
		// No process was created on the host since the leader, so the
		// leader has forked nothing yet, and what it forks now inherits
		// its value: the usual case, and no walk.
		return
	}
	done := map[int]bool{leader: true}
	var set func(pid int)
	set = func(pid int) {
		if done[pid] {
			return
		}
		done[pid] = true
		if procfs.SetOOMScoreAdj(pid, value) != nil {
			return
		}
		for _, child := range procfs.Children(pid) {
			set(child)
		}
	}
	for _, child := range procfs.Children(leader) {
		set(child)
	}
	if c.cg != nil {
		for _, pid := range c.cg.Members() {
			set(pid)
		}
	}
}

// processGone reports whether err says the process is gone: no entry in
// /proc (ENOENT), or an exited one not yet reaped (ESRCH).
func processGone(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH)
}
