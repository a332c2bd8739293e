package agentproc

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"cdr.dev/slog/v3"
)

// hostOOMKills returns the kernel's count of OOM kills since boot
// (/proc/vmstat oom_kill, Linux 4.13+).
func hostOOMKills() (uint64, bool) {
	data, err := os.ReadFile("/proc/vmstat")
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// treeOOMKills returns the OOM kills the tree's cgroup counted, where it
// counts them (WithCgroup with the memory controller enabled for it).
func treeOOMKills(c *containment) (int64, bool) {
	if c.cg == nil {
		return 0, false
	}
	return c.cg.oomKills()
}

// hostOOMScore is this process's own oom_score_adj, read once.
var hostOOMScore = sync.OnceValues(func() (int, error) {
	data, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(data)))
})

// raiseOOMScore gives the new tree its oom_score_adj: the host's plus the
// Manager's delta, capped at 1000. It writes the leader first and only then
// lists its children, for every process in turn: a child forked after its
// parent's write inherits the value, and one forked before is listed. With
// a cgroup its members are covered too, which includes the processes that
// left the leader's descendants. A failure is logged, not fatal: the
// command runs, only less protected.
func (m *Manager) raiseOOMScore(leader int, c *containment) {
	if m.cfg.oomDelta <= 0 {
		return
	}
	host, err := hostOOMScore()
	if err != nil {
		m.cfg.logger.Warn(context.Background(), "cannot read own oom_score_adj", fieldError(err))
		return
	}
	adj := min(host+m.cfg.oomDelta, maxOOMScoreAdj)
	if adj <= host {
		return
	}
	value := []byte(strconv.Itoa(adj))
	done := make(map[int]bool)
	var set func(pid int)
	set = func(pid int) {
		if done[pid] {
			return
		}
		done[pid] = true
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid), value, 0); err != nil {
			if pid == leader && !os.IsNotExist(err) {
				m.cfg.logger.Warn(context.Background(), "cannot raise oom_score_adj",
					slog.F("pid", pid), fieldError(err))
			}
			return
		}
		for _, child := range procChildren(pid) {
			set(child)
		}
	}
	set(leader)
	if c.cg != nil {
		for _, pid := range c.cg.members() {
			set(pid)
		}
	}
}

// procChildren lists the children of every thread of pid
// (/proc/PID/task/TID/children, Linux 3.5+ with CONFIG_PROC_CHILDREN).
func procChildren(pid int) []int {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil
	}
	var kids []int
	for _, t := range tasks {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			if k, err := strconv.Atoi(f); err == nil {
				kids = append(kids, k)
			}
		}
	}
	return kids
}
