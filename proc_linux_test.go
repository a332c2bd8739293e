package agentproc

import (
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc/internal/procfs"
)

// TestCandidatePIDs checks when the sweep may probe only the PIDs handed out
// since the leader started: never once the leader is old enough for PIDs to
// have wrapped past it.
func TestCandidatePIDs(t *testing.T) {
	t.Parallel()
	s, err := newProcScanner()
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	defer s.Close()
	last, ok := procfs.LastPID()
	if !ok || last <= 1 {
		t.Skip("no /proc/sys/kernel/ns_last_pid")
	}
	all, err := s.PIDs()
	if err != nil {
		t.Fatal(err)
	}

	// A young leader: only PIDs after it are candidates. "Young" is real
	// time (under wrapWindow, a fraction of a second with pid_max 32768),
	// and a loaded machine can keep this goroutine off a CPU that long
	// between time.Now and the check, so the start time is put an hour
	// ahead: the leader stays young however late the check runs.
	narrow, ok := s.candidatePIDs(last-1, time.Now().Add(time.Hour))
	if !ok {
		t.Fatal("young leader: got no probe range, want the PIDs after it")
	}
	if len(narrow) > rangeProbeMax || slices.ContainsFunc(narrow, func(pid int) bool { return pid < last-1 }) {
		t.Errorf("young leader: got %d candidates (min %v), want only PIDs after the leader", len(narrow), slices.Min(append(narrow, last)))
	}

	// The same leader, but started long enough ago for PIDs to have
	// wrapped past it: all of /proc is scanned.
	if wide, ok := s.candidatePIDs(last-1, time.Now().Add(-wrapWindow()-time.Second)); ok {
		t.Errorf("old leader: got %d candidates to probe, want a snapshot of all %d processes", len(wide), len(all))
	}

	// Unknown start, or a range wider than rangeProbeMax, also means a
	// snapshot.
	if unknown, ok := s.candidatePIDs(last-1, time.Time{}); ok {
		t.Errorf("unknown start: got %d candidates to probe, want a snapshot", len(unknown))
	}
	if far, ok := s.candidatePIDs(last-rangeProbeMax-1, time.Now().Add(time.Hour)); ok {
		t.Errorf("wide range: got %d candidates to probe, want a snapshot", len(far))
	}
}

// TestProbeMarkedSkipsOnlyFreePIDs checks the probe's shortcut: a PID no
// process holds is skipped without a /proc read, and a live marked process
// beside it is still found.
func TestProbeMarkedSkipsOnlyFreePIDs(t *testing.T) {
	t.Parallel()
	s, err := newProcScanner()
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	defer s.Close()
	// A PID that was handed out and is free again: a reaped child's.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	entry := MarkerEnv + "=probe-" + strconv.Itoa(os.Getpid())
	live := startMarkedChild(t, append(os.Environ(), entry))
	if !s.mayBeMarked(live, []byte(entry)) {
		t.Fatal("the marked child does not read as marked")
	}
	pids := []int{gone.Process.Pid, live}
	if got := s.probeMarked(pids, []byte(entry), treeNamespace{}); !slices.Equal(got, []int{live}) {
		t.Errorf("probeMarked(%v) = %v, want only the live marked child %d", pids, got, live)
	}
}

// startMarkedChild starts a shell with the environment env that blocks on
// its stdin until the test ends, and returns its PID once it says it runs:
// Start returns when the exec has closed the close-on-exec descriptors,
// before the kernel has set up the new program's environment, which
// /proc/PID/environ then reads empty (this failed under load in CI).
func startMarkedChild(t *testing.T, env []string) int {
	t.Helper()
	live := exec.Command("sh", "-c", "echo ready; read x")
	live.Env = env
	stdin, err := live.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := live.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = live.Process.Kill()
		_ = live.Wait()
	})
	if f, ok := stdout.(*os.File); ok {
		_ = f.SetReadDeadline(time.Now().Add(10 * time.Second))
	}
	if _, err := io.ReadFull(stdout, make([]byte, len("ready\n"))); err != nil {
		t.Fatalf("the child never said it runs: %v", err)
	}
	return live.Process.Pid
}

// TestMarkerReadMidExecReadAgain: every marker check reads a process
// again when its environment read empty while none was set up (an exec
// under way), or while stat, read after, shows one set up, instead of
// taking it for unmarked. The hook has the first read of a marked process
// see what such a read sees; each check must still find the marker, and
// must have met the hook. Not parallel: the
// hook is process-wide (EmptyNextEnvironRead).
func TestMarkerReadMidExecReadAgain(t *testing.T) {
	s, err := newProcScanner()
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	defer s.Close()
	id := "midexec-" + strconv.Itoa(os.Getpid())
	entry := []byte(MarkerEnv + "=" + id)
	pid := startMarkedChild(t, append(os.Environ(), string(entry)))
	trees := []portTree{{id: id}}
	for _, c := range []struct {
		name  string
		found func() bool
	}{
		{"probe", func() bool { return slices.Equal(s.probeMarked([]int{pid}, entry, treeNamespace{}), []int{pid}) }},
		{"snapshot", func() bool { return slices.Contains(takeSnapshot(markerPass, time.Now()).markedBy(id), pid) }},
		{"verify", func() bool { return s.marked(pid, entry) }},
		{"orphan", func() bool {
			i, ok := newTreeKiller([]orphanTree{{id: id}}).belongs(s, pid, nil)
			return ok && i == 0
		}},
		{"orphan round", func() bool {
			// SIGCONT: a signal the shell takes without harm.
			k := newTreeKiller([]orphanTree{{id: id}})
			defer k.close()
			k.round(unix.SIGCONT)
			return k.found[0] == 1
		}},
		{"ports, next scan", func() bool {
			// The port scan need not wait (it looks again soon), but it
			// must not remember the process as unmarked.
			cache := &portCache{}
			if _, err := treeMembers(s, cache, trees); err != nil {
				t.Fatal(err)
			}
			members, err := treeMembers(s, cache, trees)
			if err != nil {
				t.Fatal(err)
			}
			return slices.Contains(members, treeMember{pid, 0})
		}},
	} {
		for _, h := range EnvironHooks {
			t.Run(h.Name+"/"+c.name, func(t *testing.T) {
				faked := h.Arm(t, pid)
				if !c.found() {
					t.Errorf("process %d: got unmarked, want marked (its first read was empty)", pid)
				}
				if n := faked(); n != 1 {
					t.Errorf("reads that saw the environment empty: got %d, want 1", n)
				}
			})
		}
	}
}

// TestMarkerReadAsStartReturns reads the marker of children as
// exec.Cmd.Start returns, with no hook: the exec is then often still under
// way (its new memory without an environment yet) or just setting the
// environment up, and a read that took the empty environment it saw for
// no marker missed about one child in ten here (2-core VM, under load).
func TestMarkerReadAsStartReturns(t *testing.T) {
	t.Parallel()
	s, err := newProcScanner()
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	defer s.Close()
	entry := MarkerEnv + "=asstart-" + strconv.Itoa(os.Getpid())
	missed := 0
	const children = 200
	for range children {
		cmd := exec.Command("sleep", "1000")
		cmd.Env = []string{entry}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if !s.mayBeMarked(cmd.Process.Pid, []byte(entry)) {
			missed++
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	if missed != 0 {
		t.Errorf("children read as unmarked as Start returned: got %d of %d, want 0", missed, children)
	}
}
