package agentproc

import (
	"slices"
	"testing"
	"time"
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
	defer s.close()
	last, ok := s.lastPID()
	if !ok || last <= 1 {
		t.Skip("no /proc/sys/kernel/ns_last_pid")
	}
	all, err := s.pids()
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

// TestParseStat reads state, process group and start time after the
// command name's last ')', whatever the name holds, and refuses a line cut
// short.
func TestParseStat(t *testing.T) {
	t.Parallel()
	// Fields 3 (state) to 22 (starttime) after the name.
	rest := " S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10"
	for _, tt := range []struct {
		name, data       string
		state            byte
		pgrp             int
		start            uint64
		groupOK, startOK bool
	}{
		{"plain", "17 (sh)" + rest, 'S', 4242, 987654, true, true},
		{"spaces and parens", "17 (a) b (c))" + rest, 'S', 4242, 987654, true, true},
		{"no start time", "17 (sh) S 1 4242 4242", 'S', 4242, 0, true, false},
		{"no name", "17 sh" + rest, 0, 0, 0, false, false},
		{"cut short", "17 (sh) S 1", 0, 0, 0, false, false},
		{"long state", "17 (sh) SS 1 4242", 0, 0, 0, false, false},
	} {
		state, pgrp, ok := parseStat([]byte(tt.data))
		if ok != tt.groupOK || (ok && (state != tt.state || pgrp != tt.pgrp)) {
			t.Errorf("%s: parseStat got %q %d %v, want %q %d %v", tt.name, state, pgrp, ok, tt.state, tt.pgrp, tt.groupOK)
		}
		start, state, ok := parseStatStart([]byte(tt.data))
		if ok != tt.startOK || (ok && (start != tt.start || state != tt.state)) {
			t.Errorf("%s: parseStatStart got %d %q %v, want %d %q %v", tt.name, start, state, ok, tt.start, tt.state, tt.startOK)
		}
	}
}
