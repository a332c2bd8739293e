package agentproc

import (
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

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
	// The child says it runs: Start returns when the exec has closed the
	// close-on-exec descriptors, before the kernel has set up the new
	// program's environment, which /proc/PID/environ then reads empty
	// (this failed under load in CI).
	live := exec.Command("sh", "-c", "echo ready; read x")
	live.Env = append(os.Environ(), entry)
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
		t.Fatalf("the marked child never said it runs: %v", err)
	}
	if !s.mayBeMarked(live.Process.Pid, []byte(entry)) {
		t.Fatal("the marked child does not read as marked")
	}
	pids := []int{gone.Process.Pid, live.Process.Pid}
	if got := s.probeMarked(pids, []byte(entry)); !slices.Equal(got, []int{live.Process.Pid}) {
		t.Errorf("probeMarked(%v) = %v, want only the live marked child %d", pids, got, live.Process.Pid)
	}
}
