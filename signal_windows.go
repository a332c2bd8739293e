package agentproc

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
	"golang.org/x/xerrors"
)

// signal sends sig to the tree. Windows has no signals: kill terminates the
// job, and interrupt and terminate both send CTRL_BREAK_EVENT to the shell's
// process group, the only console event that can target a group
// (CTRL_C_EVENT is disabled in a new process group). Console programs
// treat it as Ctrl+Break, which most end on; cmd.exe waits for its
// child and then exits.
func (s *sysProc) signal(sig Signal) error {
	if !s.alive() {
		return errNoProcess
	}
	switch sig {
	case SignalKill:
		return s.terminate()
	case SignalInterrupt, SignalTerminate:
		s.mu.Lock()
		pid := s.pid
		s.mu.Unlock()
		if pid == 0 {
			// Group 0 means every process on our console, this one
			// included: never send that.
			return errNoProcess
		}
		// Delivery needs a console shared with the tree; a caller without
		// one (a service) gets an error here and Stop kills after the
		// grace period.
		if err := windows.GenerateConsoleCtrlEvent(windows.CTRL_BREAK_EVENT, pid); err != nil {
			return xerrors.Errorf("send CTRL_BREAK_EVENT to group %d: %w", pid, err)
		}
		return nil
	}
	return xerrors.Errorf("signal %q: %w", string(sig), ErrUnsupportedSignal)
}

// exitStatus reports the exit code. Windows processes do not die of
// signals, so the signal name is always empty; a tree ended by
// TerminateJobObject exits with 1.
func exitStatus(state *os.ProcessState) (code int, signal string) {
	return state.ExitCode(), ""
}

// isBrokenPipe reports whether a write failed because no process reads the
// other end any more.
func isBrokenPipe(err error) bool {
	return errors.Is(err, windows.ERROR_BROKEN_PIPE) || errors.Is(err, windows.ERROR_NO_DATA)
}
