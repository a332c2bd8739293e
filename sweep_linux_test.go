package agentproc

import (
	"slices"
	"testing"
)

// TestCandidatePIDs checks when the sweep may probe only the PIDs handed out
// since the leader started: never when more forks happened than the probe
// range, since PIDs may then have wrapped past the leader.
func TestCandidatePIDs(t *testing.T) {
	t.Parallel()
	s, err := newProcScanner()
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	defer s.close()
	forks, ok := forkCount()
	if !ok {
		t.Skip("no fork count in /proc/stat")
	}
	last, ok := s.lastPID()
	if !ok || last <= 1 {
		t.Skip("no /proc/sys/kernel/ns_last_pid")
	}
	all, err := s.pids()
	if err != nil {
		t.Fatal(err)
	}

	// A leader started "now": only PIDs after it are candidates.
	narrow, err := s.candidatePIDs(last-1, forks)
	if err != nil {
		t.Fatal(err)
	}
	if len(narrow) > rangeProbeMax || slices.ContainsFunc(narrow, func(pid int) bool { return pid < last-1 }) {
		t.Errorf("young leader: got %d candidates (min %v), want only PIDs after the leader", len(narrow), slices.Min(append(narrow, last)))
	}

	// The same leader, but with more forks since its start than the range
	// allows: PIDs may have wrapped, so all of /proc is scanned.
	wide, err := s.candidatePIDs(last-1, forks-rangeProbeMax-1)
	if err != nil {
		t.Fatal(err)
	}
	if len(wide) < len(all)/2 || !slices.ContainsFunc(wide, func(pid int) bool { return pid < last-1 }) {
		t.Errorf("old leader: got %d candidates, want the full listing (%d processes)", len(wide), len(all))
	}

	// Unknown start (0) also means a full scan.
	if unknown, _ := s.candidatePIDs(last-1, 0); len(unknown) < len(all)/2 {
		t.Errorf("unknown fork count: got %d candidates, want the full listing (%d)", len(unknown), len(all))
	}
}
