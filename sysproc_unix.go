//go:build unix

package agentproc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"sync/atomic"
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

// sysProc ties a started command to its process group. The group ID is the
// leader's PID, and the kernel does not hand that number to a new process
// while any member of the group is alive, so signalling -pgid can only reach
// our tree as long as someone in it lives.
//
// Once the leader has been reaped and leftovers has killed the rest, the
// number may be handed out again (after a PID wrap), so from then on signal
// refuses to use it: closed is set before leftovers returns.
type sysProc struct {
	pgid int
	// noProc is set when /proc cannot be trusted to describe our
	// processes (see foreignProc): the group is then judged by kill alone.
	noProc bool
	closed atomic.Bool
}

func newSysProc(cfg *config) *sysProc { return &sysProc{noProc: cfg.foreignProc} }

// prepare puts the child in a new session of its own, which also makes it
// the leader of a new process group. The session is what matters: a child
// in the host's session shares the host's controlling terminal, so a
// program that opens /dev/tty (ssh or sudo asking for a password) would
// write its prompt onto the host's terminal and then be stopped by SIGTTIN
// when it reads. In a session of its own it has no controlling terminal,
// opening /dev/tty fails at once (ENXIO) and the program reports that in
// its output. A Request.TTY amends this to make the terminal the session's
// controlling terminal (prepareTTY).
func (s *sysProc) prepare(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return nil
}

// started records the group; Setsid made the leader's PID its ID.
func (s *sysProc) started(cmd *exec.Cmd) error {
	s.pgid = cmd.Process.Pid
	return nil
}

// signal sends sig to every member of the group.
func (s *sysProc) signal(sig Signal) error {
	if s.pgid <= 0 || s.closed.Load() {
		return errNoProcess
	}
	err := unix.Kill(-s.pgid, osSignal(sig))
	if errors.Is(err, unix.ESRCH) {
		return errNoProcess
	}
	return err
}

// resume sends SIGCONT to the group, right after terminate: a member
// stopped by SIGSTOP, SIGTSTP or SIGTTIN acts on SIGTERM only once it is
// continued, and would otherwise sit out the whole grace period.
func (s *sysProc) resume() {
	if s.pgid > 0 && !s.closed.Load() {
		_ = unix.Kill(-s.pgid, unix.SIGCONT)
	}
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

// leftovers kills what is left of the group after the leader exited and
// returns how many members were still running (exact where the OS lets us
// enumerate the group, else 1 when any remained). From then on the group ID
// is never signalled again.
//
// The group is killed whenever kill(-pgid, 0) says it exists, whatever
// /proc counts: a /proc of another PID namespace counts nothing, and a
// group of zombies takes no harm.
func (s *sysProc) leftovers() int {
	defer s.closed.Store(true)
	if s.pgid <= 0 || unix.Kill(-s.pgid, 0) != nil {
		return 0
	}
	n, ok := 0, false
	if !s.noProc {
		n, ok = countGroup(s.pgid)
	}
	if !ok {
		n = 1
	}
	_ = unix.Kill(-s.pgid, unix.SIGKILL)
	return n
}

// usage returns CPU time and peak RSS from the leader's rusage, which
// includes the children it waited for.
func (s *sysProc) usage(state *os.ProcessState) (time.Duration, int64) {
	cpu := state.UserTime() + state.SystemTime()
	ru, ok := state.SysUsage().(*syscall.Rusage)
	if !ok {
		return cpu, 0
	}
	return cpu, int64(ru.Maxrss) * maxRSSUnit
}

// release frees OS resources; a process group holds none.
func (s *sysProc) release() {}

// checkShellCommand rejects commands the shell would silently run only in
// part. POSIX shells run every line, so there is nothing to reject.
func checkShellCommand([]string, string) error { return nil }
