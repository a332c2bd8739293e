//go:build unix

package agentproc

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// defaultShell is the shell used when WithShell is not given.
func defaultShell() []string { return []string{"sh", "-c"} }

// newShellCmd builds "shell... command".
func newShellCmd(ctx context.Context, shell []string, command string) *exec.Cmd {
	args := append(append([]string(nil), shell[1:]...), command)
	return exec.CommandContext(ctx, shell[0], args...)
}

// envKeyFold returns the form in which the OS compares environment names:
// Unix names are case-sensitive.
func envKeyFold(k string) string { return k }

// envHasPWD: a Unix child is told its directory in PWD, as a shell exports
// it after cd.
const envHasPWD = true

// The group-counting part of the OS contract (platform.go), which exists on
// Unix only.
var (
	_ func(int) (int, bool)  = countGroup
	_ func(int) (bool, bool) = groupLive
)

// sysProc ties a started command to its process group. The group ID is the
// leader's PID, and the kernel does not hand that number to a new process
// while any member of the group is alive, so signalling -pgid can only reach
// our tree as long as someone in it lives.
//
// Once the leader has been reaped and killLeftovers has killed the rest, the
// number may be handed out again (after a PID wrap), so from then on signal
// refuses to use it. signalGate orders the two, as os.Process orders a signal
// against the release of its handle: signal and resume hold it across their
// kill(2), and killLeftovers sets closed under it before its final kill, so
// no signal starts after that kill or is still in flight when it returns.
// The signal gate is this handle's own lock, held only across those calls; it is
// never taken with a Process lock held (the lock order in docs/architecture.md), while the
// callback signal runs under it may take one.
type sysProc struct {
	pgid int
	// noProc is set when /proc cannot be trusted to describe our
	// processes (see foreignProc): the group is then judged by kill alone.
	noProc bool
	// peak is where the tree's exit records begin (peak_linux.go);
	// peakDone is set once release has said it is no longer needed.
	peak     peakMark
	peakDone bool

	signalGate sync.Mutex
	closed     bool // guarded by signalGate: the group ID is no longer ours
	// signalHook, when set by a test, runs under the signal gate just before
	// signal's kill(2), to hold a signal in flight.
	signalHook func()
}

func newSysProc(cfg *config) *sysProc { return &sysProc{noProc: cfg.foreignProc} }

// prepare builds the child's attributes. It is the only code that sets
// cmd.SysProcAttr on Unix, so that no step undoes another.
//
// The child gets a new session of its own, which also makes it the leader
// of a new process group whose ID is its PID, so every kill of -pgid
// reaches the whole tree. The session is what matters: a child in the
// host's session shares the host's controlling terminal, so a program that
// opens /dev/tty (ssh or sudo asking for a password) would write its prompt
// onto the host's terminal and then be stopped by SIGTTIN when it reads. In
// a session of its own it has no controlling terminal, opening /dev/tty
// fails at once (ENXIO) and the program reports that in its output. With
// Request.TTY the terminal slave (its fd 0) becomes the session's
// controlling terminal. With a cgroup the kernel creates the leader inside
// it.
func (s *sysProc) prepare(cmd *exec.Cmd, a childAttrs) error {
	s.peak = a.peak // first: release ends it whatever fails below
	attr := &syscall.SysProcAttr{Setsid: true}
	if a.tty {
		attr.Setctty = true
		attr.Ctty = 0
	}
	if a.cgroupFD >= 0 {
		if err := startInCgroup(attr, a.cgroupFD, a.cgroupNS); err != nil {
			return err
		}
	}
	cmd.SysProcAttr = attr
	return nil
}

// started records the group; Setsid made the leader's PID its ID.
func (s *sysProc) started(cmd *exec.Cmd) error {
	s.pgid = cmd.Process.Pid
	s.peak.watch(cmd.Process.Pid)
	return nil
}

// alive reports whether any member of the group is still running. kill with
// signal 0 answers "no" cheaply, which is the common case; a "yes" may be
// only zombies waiting for init, so it is checked against /proc where that
// can be read and is ours: the leader first (waitid, no /proc read), then,
// once it has exited, a count of the whole group from a shared pass over
// /proc. Never call it with a lock held.
func (s *sysProc) alive() bool {
	if s.pgid <= 0 || unix.Kill(-s.pgid, 0) != nil {
		return false
	}
	if s.noProc {
		return true
	}
	live, ok := groupLive(s.pgid)
	return live || !ok
}

// killLeftovers kills what is left of the group after the leader exited and
// returns how many members were still running (exact where the OS lets us
// enumerate the group, else 1 when any remained). From then on the group ID
// is never signalled again: closed is set under the signal gate before the kill,
// so a signal either went out before it (and its callback has run) or
// finds the group closed.
//
// The group is killed whenever kill(-pgid, 0) says it exists, whatever
// /proc counts: a /proc of another PID namespace counts nothing, and a
// group of zombies takes no harm. The count reads /proc, so it runs before
// the signal gate is taken.
func (s *sysProc) killLeftovers() int {
	exists := s.pgid > 0 && unix.Kill(-s.pgid, 0) == nil
	n, ok := 0, false
	if exists && !s.noProc {
		n, ok = countGroup(s.pgid)
	}
	if exists && !ok {
		n = 1
	}
	s.signalGate.Lock()
	defer s.signalGate.Unlock()
	s.closed = true
	if exists {
		_ = unix.Kill(-s.pgid, unix.SIGKILL)
	}
	return n
}

// usage returns CPU time and the peak RSS from the leader's rusage, which
// includes the children it waited for (treePeak tells the tree's peak
// from it).
func (s *sysProc) usage(state *os.ProcessState) (time.Duration, int64) {
	cpu := state.UserTime() + state.SystemTime()
	ru, ok := state.SysUsage().(*syscall.Rusage)
	if !ok {
		return cpu, 0
	}
	// ru_maxrss is in KiB on Linux and the BSDs, in bytes on macOS and iOS.
	unit := int64(1024)
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		unit = 1
	}
	return cpu, int64(ru.Maxrss) * unit
}

// treePeak is the tree's peak memory, from the reaped leader pid and its
// ru_maxrss: on Linux from the exit records, else that ru_maxrss where it
// cannot be the host's (peakMark.of); elsewhere ru_maxrss.
func (s *sysProc) treePeak(pid int, rss int64) int64 { return s.peak.of(pid, rss) }

// release frees OS resources (a process group holds none) and ends the
// tree's hold on the exit records, once.
func (s *sysProc) release() {
	if !s.peakDone {
		s.peakDone = true
		s.peak.done()
	}
}

// checkShellCommand rejects commands the shell would silently run only in
// part. POSIX shells run every line, so there is nothing to reject.
func checkShellCommand([]string, string) error { return nil }
