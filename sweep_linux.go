package agentproc

import (
	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc/internal/procfs"
)

// This file is what every kill sweep shares, whoever runs it (a live
// tree's containment, the orphan killer of recovery and the host guard,
// the sweep of a detached tree): the loop of rounds (sweepRounds) and the
// probe of the PIDs handed out since a round's pass listed /proc
// (probeSince). Each sweep brings its own round: what it looks for and how
// it proves a process is the tree's before the signal.
//
// Why the probe: a process that forks and lets its parent exit every few
// milliseconds (a "fork hopper") is under a new PID by the time a pass
// over /proc reads the entry its listing holds, so a pass alone never
// finds it (TestAttackForkHopperOutlivesClose). Linux hands out PIDs in
// increasing order, so the hopper's current PID is one handed out since
// the listing: probing those few PIDs one by one, just before the signal,
// finds it.

// sweepRounds runs round, one pass of a kill sweep, until a round signals
// no process new to the sweep (signalled) and misses none (missed: found
// new to the sweep but gone, or no longer provably the tree's, by the time
// of its signal), within maxSweepRounds. A missed process may be a fork
// hopper under another PID by then, which the next round may find in time;
// a killed one may have forked before it died.
func sweepRounds(round func() (signalled, missed int)) {
	for range maxSweepRounds {
		if n, missed := round(); n == 0 && missed == 0 {
			return
		}
	}
}

// maxSweepRounds bounds sweepRounds: each round kills what the previous
// round's processes forked before dying, or a hopper it missed.
const maxSweepRounds = 10

// pidMark is the last PID the kernel had handed out at a moment: taken
// just before a pass lists /proc, every process made since has a PID after
// it (newPIDs).
type pidMark struct {
	last int // 0: unknown
}

// markPIDs reads the mark of now; a zero mark if ns_last_pid cannot be read.
func markPIDs() pidMark {
	last, ok := procfs.LastPID()
	if !ok || last <= 0 {
		return pidMark{}
	}
	return pidMark{last: last}
}

// tailRounds bounds how many times probeSince probes the PIDs handed out
// during its own previous probe.
const tailRounds = 4

// probeSince calls probe with the PIDs handed out since from (this
// process's own PID left out; its other threads are probe's to skip), newest first,
// in slices of up to probeChunk that probe must not keep, then with those
// handed out meanwhile, up to tailRounds times or until none were.
func probeSince(s *procScanner, from pidMark, probe func(pids []int)) {
	var buf []int
	for range tailRounds {
		ranges, now := newPIDs(from)
		if len(ranges) == 0 {
			return
		}
		// Newest first: a hopper's live process is the newest PID of its
		// chain, the older ones its exited parents (zombies until reaped,
		// each a stat read for the probe). In the order handed out, the
		// probe walked a trail of thousands of them where the init reaps
		// slowly (this project's machines: a hopper left 2,000 a second)
		// and gave up before the live one (TestAttackForkHopperOutlivesDetached
		// under CPU burners).
		for i := len(ranges) - 1; i >= 0; i-- {
			r := ranges[i]
			for pid := r.hi; pid >= r.lo; pid-- {
				if pid == s.Self() {
					continue
				}
				if buf = append(buf, pid); len(buf) == probeChunk {
					probe(buf)
					buf = buf[:0]
				}
			}
		}
		if len(buf) > 0 {
			probe(buf)
			buf = buf[:0]
		}
		from = now
	}
}

// probeChunk is the most PIDs probeSince hands its probe at once.
const probeChunk = 4096

// pidRange is the PIDs from lo to hi, both included.
type pidRange struct{ lo, hi int }

// newPIDs returns the PIDs handed out after from, in the order they were
// handed out, and the mark of now; none when from or now is unknown. PIDs
// are handed out in increasing order up to pid_max, then again from the
// bottom: a last PID below from's is a range that wrapped once.
//
// There is no bound on how many: a free PID (most are, by then) costs the
// probe a kill with signal 0, 0.5 µs here, while handing one out costs far
// more (a thread's creation, the cheapest, about 50 µs here), so the probe
// costs about a hundredth of the forks it looks at. A bound of 256 PIDs
// let a fork storm hide a hopper (TestAttackForkHopperInStorm).
//
// What it cannot see: PIDs that wrapped all the way round past from since
// (more forks during one pass than pid_max holds, less the PIDs in use:
// here, with pid_max 32768 and 21,000 threads a second per CPU, a pass of
// about 0.8 s). Probing every PID whenever that could not be ruled out by
// time (wrapWindow) made each probe a second pass over every live process
// on a host where a pass takes 160 ms or more (2,000 processes on this
// 2-CPU VM under load: the orphan killer's round 2.5 times slower), and
// once per tree when Close stops many: refused for that cost.
func newPIDs(from pidMark) (ranges []pidRange, now pidMark) {
	if from.last <= 0 {
		return nil, pidMark{}
	}
	now = markPIDs()
	return pidsBetween(from.last, now.last, pidMax()), now
}

// pidsBetween is newPIDs' arithmetic: the PIDs handed out after from up to
// last, in that order, where PIDs are below pidMax.
func pidsBetween(from, last, pidMax int) []pidRange {
	switch {
	case from <= 0 || last <= 0 || last == from:
		return nil
	case last > from:
		return []pidRange{{from + 1, last}}
	}
	return []pidRange{{from + 1, pidMax - 1}, {1, last}}
}

// freePIDOrOurs reports whether pid names no process or thread any more,
// or a thread of this process (self): nothing a sweep looks for. kill with
// signal 0 tells it without a path lookup in /proc (most PIDs of a range
// are free by the time of a probe), and tgkill with signal 0 names this
// process's threads, whose environment a read would take the mmap lock of.
func freePIDOrOurs(self, pid int) bool {
	return unix.Kill(pid, 0) == unix.ESRCH || unix.Tgkill(self, pid, 0) == nil
}
