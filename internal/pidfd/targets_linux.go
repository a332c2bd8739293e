package pidfd

import "golang.org/x/sys/unix"

// Targets is what one kill sweep has signalled so far, by PID: the
// protocol's state across the rounds of a sweep (a round finds processes,
// Signal pins, checks and signals each). Its zero value is ready to use;
// it is not safe for concurrent use, and Close frees it.
type Targets struct {
	byPID map[int]*target
	// stale holds the pidfds of targets that exited and whose PID came
	// back as a new process. They are closed by Close, not at once: a
	// waiter may be polling them (see Killed).
	stale []int
}

// target is one process that was checked and signalled. fd is its pidfd,
// or -1 when none could be had: the entry then only records that the PID
// was signalled, and is never used to signal again, since the PID may name
// another process by now.
type target struct {
	fd     int
	killed bool
}

// Outcome is what Signal did with one PID.
type Outcome int

const (
	// Skipped: nothing sent (the process failed its check or was gone).
	Skipped Outcome = iota
	// Pinned: a target pinned earlier and still alive; sig went through
	// its pidfd if it is SIGKILL and the target had not had one, with no
	// new check (the pidfd still names the process that passed it).
	Pinned
	// PinnedKilled: as Pinned, and this call sent its first SIGKILL.
	PinnedKilled
	// Sent: checked just now and signalled, and new to this sweep for sig.
	Sent
	// SentAgain: checked just now and SIGKILLed, but it had been SIGKILLed
	// before without a pidfd and is not gone yet: nothing new.
	SentAgain
)

// Known deals with a pid that is a pinned target still alive: it sends
// sig through the pidfd if sig is SIGKILL and the target had none yet, with
// no new check (the pidfd still names the process that passed it), and
// returns Pinned or PinnedKilled with done set. For any other pid it
// returns done false, and the caller checks the process as a newcomer
// before Signal (a pinned target that exited is forgotten here: its PID is
// back as a new process).
func (t *Targets) Known(pid int, sig unix.Signal) (o Outcome, done bool) {
	e := t.byPID[pid]
	if e == nil || e.fd < 0 {
		return Skipped, false
	}
	if !Exited(e.fd) {
		if sig == unix.SIGKILL && !e.killed {
			_ = unix.PidfdSendSignal(e.fd, sig, nil, 0)
			e.killed = true
			return PinnedKilled, true
		}
		return Pinned, true
	}
	t.stale = append(t.stale, e.fd)
	delete(t.byPID, pid)
	return Skipped, false
}

// Signal sends sig to pid following the protocol. A target signalled
// before and still pinned is dealt with as Known does, with no new check.
// Any other PID is pinned, then check is called, which must look at the
// process again (its marker, its cgroup), and only if it passes is sig
// sent, through the pidfd.
func (t *Targets) Signal(pid int, sig unix.Signal, check func() bool) Outcome {
	if o, done := t.Known(pid, sig); done {
		return o
	}
	if t.byPID == nil {
		t.byPID = make(map[int]*target)
	}
	e := t.byPID[pid] // nil, or signalled before without a pidfd
	fd, ok := Pin(pid, check)
	if !ok {
		return Skipped
	}
	if err := Signal(pid, fd, sig); err != nil {
		Close(fd)
		return Skipped
	}
	if e == nil {
		e = &target{fd: fd}
		t.byPID[pid] = e
	} else if fd >= 0 {
		e.fd = fd
	}
	if sig == unix.SIGKILL {
		if e.killed {
			return SentAgain
		}
		e.killed = true
	}
	return Sent
}

// Continue sends SIGCONT to pid, which Signal has just sent SIGTERM to, so
// that a stopped process acts on it: through its pidfd, or by PID with
// nothing in between but Signal's own kill.
func (t *Targets) Continue(pid int) {
	if e := t.byPID[pid]; e != nil {
		_ = Signal(pid, e.fd, unix.SIGCONT)
	}
}

// KillPinned SIGKILLs, through its pidfd, every pinned target not killed
// yet: a pidfd names the process that passed its check even if its PID was
// reused meanwhile, so these need no new check. Targets without a pidfd
// are left to the caller's next scan, which finds them again if they are
// still theirs.
func (t *Targets) KillPinned() {
	for _, e := range t.byPID {
		if e.fd >= 0 && !e.killed {
			_ = unix.PidfdSendSignal(e.fd, unix.SIGKILL, nil, 0)
			e.killed = true
		}
	}
}

// Killed returns what to wait for once the sweep is done: the pidfds of
// every pinned target, and the PIDs of the targets SIGKILLed without one.
// The pidfds stay open until Close; with pinnedOnlyKilled, only the pidfds
// of targets that were SIGKILLed are returned.
func (t *Targets) Killed(pinnedOnlyKilled bool) (fds, bare []int) {
	for pid, e := range t.byPID {
		switch {
		case e.fd >= 0 && (e.killed || !pinnedOnlyKilled):
			fds = append(fds, e.fd)
		case e.fd < 0 && e.killed:
			bare = append(bare, pid)
		}
	}
	return fds, bare
}

// Close closes every pidfd; the Targets is empty and usable again.
func (t *Targets) Close() {
	for _, fd := range t.stale {
		Close(fd)
	}
	t.stale = nil
	for pid, e := range t.byPID {
		Close(e.fd)
		delete(t.byPID, pid)
	}
}
