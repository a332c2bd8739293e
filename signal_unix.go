//go:build unix

package agentproc

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// signal sends sig to every member of the group, under the signal gate (see
// sysProc). sent, when not nil, runs under the signal gate just before the kill,
// once the signal gate is found open: before the signal can end anything, so the
// supervisor, woken by that end, finds what sent recorded.
func (s *sysProc) signal(sig Signal, sent func()) error {
	s.signalGate.Lock()
	defer s.signalGate.Unlock()
	if s.pgid <= 0 || s.closed {
		return errNoProcess
	}
	if s.signalHook != nil {
		s.signalHook()
	}
	if sent != nil {
		sent()
	}
	err := unix.Kill(-s.pgid, osSignal(sig))
	if errors.Is(err, unix.ESRCH) {
		return errNoProcess
	}
	return err
}

// osSignal maps a portable Signal to the Unix signal sent to the group.
func osSignal(sig Signal) syscall.Signal {
	switch sig {
	case SignalInterrupt:
		return unix.SIGINT
	case SignalTerminate:
		return unix.SIGTERM
	default:
		return unix.SIGKILL
	}
}

// exitStatus maps a wait result to the exit code and the name of the signal
// that ended the process: 128+N and "SIGxxx" when signal N ended it. The
// wait status alone names the signal, so the group has nothing to add.
func (s *sysProc) exitStatus(state *os.ProcessState) (code int, signal string) {
	ws, ok := state.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		return 128 + int(ws.Signal()), unix.SignalName(ws.Signal())
	}
	if ok && ws.Stopped() { // killed by reapTraced
		return 128 + int(unix.SIGKILL), unix.SignalName(unix.SIGKILL)
	}
	return state.ExitCode(), ""
}

// reapTraced finishes the wait for a shell that asked its parent, the host,
// to trace it (PTRACE_TRACEME, which a tree may call: gdb's children do) and
// then stopped: the wait os/exec makes reports a traced child's stops too,
// and returned at the stop with the shell alive and unreaped. Nothing of
// the host will continue it (the tracer is a thread of ours that knows
// nothing of it), so it is killed and reaped here, and exitStatus reports
// SIGKILL; left alone it was killed with the leftovers and stayed a zombie
// child of the host until the host exited, one per Start
// (TestAttackTracedShellLeftZombie). The PID is still the shell's: only a
// reap frees it, and this is the only reap.
func (s *sysProc) reapTraced(state *os.ProcessState) {
	ws, ok := state.Sys().(syscall.WaitStatus)
	if !ok || !ws.Stopped() {
		return
	}
	pid := state.Pid()
	_ = unix.Kill(pid, unix.SIGKILL)
	for {
		// Options 0: a traced child's stops are reported without
		// WUNTRACED; the shell was forked with SIGCHLD, so __WALL is not
		// needed on Linux.
		var st unix.WaitStatus
		_, err := unix.Wait4(pid, &st, 0, nil)
		if err == unix.EINTR || (err == nil && st.Stopped()) {
			continue
		}
		return
	}
}

// resume sends SIGCONT to the group, right after terminate: a member
// stopped by SIGSTOP, SIGTSTP or SIGTTIN acts on SIGTERM only once it is
// continued, and would otherwise sit out the whole grace period.
func (s *sysProc) resume() {
	s.signalGate.Lock()
	defer s.signalGate.Unlock()
	if s.pgid > 0 && !s.closed {
		_ = unix.Kill(-s.pgid, unix.SIGCONT)
	}
}

// beginStop is called before a stop's terminate. A process group needs
// nothing: SIGTERM means the same from Stop and from Signal.
func (s *sysProc) beginStop() {}

// isBrokenPipe reports whether a write failed because no process reads the
// other end any more. Go ignores SIGPIPE for descriptors other than stdout
// and stderr, so the host only ever sees EPIPE.
func isBrokenPipe(err error) bool {
	return errors.Is(err, unix.EPIPE)
}
