//go:build unix

package agentproc

import (
	"context"
	"os"
	"os/exec"
	"runtime"
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
// Once the leader has been reaped and killLeftovers has killed the rest, the
// number may be handed out again (after a PID wrap), so from then on signal
// refuses to use it: closed is set before killLeftovers returns.
type sysProc struct {
	pgid   int
	closed atomic.Bool
}

// prepare builds the child's attributes. It is the only code that sets
// cmd.SysProcAttr on Unix, so that no step undoes another.
//
// The child gets a new process group of its own. With a terminal it gets a
// new session instead, with the terminal slave (its fd 0) as controlling
// terminal: a new session is also a new process group whose ID is the
// leader's PID, so every kill of -pgid still reaches the whole tree, and
// Setpgid must then be off, since a process group leader cannot call
// setsid. With a cgroup the kernel creates the leader inside it.
func (s *sysProc) prepare(cmd *exec.Cmd, a childAttrs) error {
	attr := &syscall.SysProcAttr{Setpgid: true}
	if a.tty {
		attr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	}
	if a.cgroupFD >= 0 {
		if err := startInCgroup(attr, a.cgroupFD); err != nil {
			return err
		}
	}
	cmd.SysProcAttr = attr
	return nil
}

// started records the group; Setpgid made the leader's PID its ID.
func (s *sysProc) started(cmd *exec.Cmd) error {
	s.pgid = cmd.Process.Pid
	return nil
}

// alive reports whether any member of the group is still running. kill with
// signal 0 answers "no" cheaply, which is the common case; a "yes" may be
// only zombies waiting for init, so it is checked against /proc where that
// can be read.
func (s *sysProc) alive() bool {
	if s.pgid <= 0 || unix.Kill(-s.pgid, 0) != nil {
		return false
	}
	if n, ok := countGroup(s.pgid); ok {
		return n > 0
	}
	return true
}

// killLeftovers kills what is left of the group after the leader exited and
// returns how many members were still running (exact where the OS lets us
// enumerate the group, else 1 when any remained). From then on the group ID
// is never signalled again.
func (s *sysProc) killLeftovers() int {
	defer s.closed.Store(true)
	if s.pgid <= 0 || unix.Kill(-s.pgid, 0) != nil {
		return 0
	}
	n, ok := countGroup(s.pgid)
	if !ok {
		n = 1
	}
	if n > 0 {
		_ = unix.Kill(-s.pgid, unix.SIGKILL)
	}
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
	// ru_maxrss is in KiB on Linux and the BSDs, in bytes on macOS and iOS.
	unit := int64(1024)
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		unit = 1
	}
	return cpu, int64(ru.Maxrss) * unit
}

// release frees OS resources; a process group holds none.
func (s *sysProc) release() {}

// checkShellCommand rejects commands the shell would silently run only in
// part. POSIX shells run every line, so there is nothing to reject.
func checkShellCommand([]string, string) error { return nil }
