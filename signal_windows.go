package agentproc

import (
	"errors"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/windows"
	"golang.org/x/xerrors"
)

// signal sends sig to the tree. Windows has no signals: kill terminates the
// job, and interrupt and terminate both send CTRL_BREAK_EVENT to the shell's
// process group, the only console event that can target a group
// (CTRL_C_EVENT is disabled in a new process group). Console programs
// treat it as Ctrl+Break, which most end on; cmd.exe waits for its
// child and then exits, or, running a batch file, asks whether to terminate
// it (see watchBatchPromptLocked).
//
// s.mu is this handle's signal gate, as the process group's signal gate is on Unix: it is
// held through the send and release takes it to close the job and the
// shell's handle, so a signal cannot reach a reused PID. sent, when not nil,
// runs under it just before the send, when the tree is there to signal:
// before the signal can end anything, and before the exit is published.
func (s *sysProc) signal(sig Signal, sent func()) error {
	// alive takes s.mu itself and opens member processes: before the signal gate.
	alive := s.alive()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.job == 0 {
		return errNoProcess // released: the exit is being published
	}
	if sig == SignalKill {
		// The job is terminated even when the count says it is empty:
		// that is harmless on an empty job, while a count that missed a
		// member (a process whose image could not be read) would leave it
		// running, and kill is the ladder's last word.
		if alive && sent != nil {
			sent()
		}
		err := s.terminateLocked()
		if !alive {
			return errNoProcess
		}
		return err
	}
	if !alive {
		return errNoProcess
	}
	switch sig {
	case SignalInterrupt, SignalTerminate:
		if s.pid == 0 {
			// Group 0 means every process on our console, this one
			// included: never send that.
			return errNoProcess
		}
		if sent != nil {
			sent()
		}
		if err := s.sendBreakLocked(); err != nil {
			return xerrors.Errorf("send CTRL_BREAK_EVENT to group %d: %w", s.pid, err)
		}
		if s.batch && s.stopping {
			s.watchBatchPromptLocked()
		}
		return nil
	}
	return xerrors.Errorf("signal %q: %w", string(sig), ErrUnsupportedSignal)
}

var (
	procAttachConsole = kernel32.NewProc("AttachConsole")
	procFreeConsole   = kernel32.NewProc("FreeConsole")
)

// consoleMu serialises borrowing a child's console: a process has at most
// one console, so two breaks to children with consoles of their own must
// not overlap.
var consoleMu sync.Mutex

// sendBreakLocked delivers CTRL_BREAK_EVENT to the group. Only processes on
// the caller's console receive it. A child that shares the host's console
// gets it directly; a child started with a hidden console of its own (the
// host has none, see consoleFlags) gets it from inside that console: this
// process attaches to it for the duration of the call, through the shell
// or, once the shell has exited, through any live member of the job.
func (s *sysProc) sendBreakLocked() error {
	if !s.ownConsole {
		return windows.GenerateConsoleCtrlEvent(windows.CTRL_BREAK_EVENT, s.pid)
	}
	consoleMu.Lock()
	defer consoleMu.Unlock()
	targets := []uint32{s.pid}
	// memberPIDs takes s.mu, which the caller holds: read the list here.
	if pids, err := s.memberPIDsLocked(); err == nil {
		targets = append(targets, pids...)
	}
	var attachErr error
	for _, pid := range targets {
		r, _, err := procAttachConsole.Call(uintptr(pid))
		if r == 0 {
			attachErr = err
			continue
		}
		err = windows.GenerateConsoleCtrlEvent(windows.CTRL_BREAK_EVENT, s.pid)
		_, _, _ = procFreeConsole.Call()
		return err
	}
	return xerrors.Errorf("attach to the tree's console: %w", attachErr)
}

// batchPoll is how often, during a stop, the watcher looks whether only
// cmd.exe is left of a batch file's tree. There is no event for "the job
// holds only this image"; the watcher runs only from a break until the shell
// exits.
const batchPoll = 10 * time.Millisecond

// watchBatchPromptLocked starts, once, a goroutine that kills the job as
// soon as only cmd.exe (and its console host) is left in it after a break:
// cmd.exe running a batch file (npm, npx, yarn and pnpm are batch files on
// Windows) answers Ctrl+Break with "Terminate batch job (Y/N)?" and would
// wait on it for the rest of the grace period. The goroutine returns when
// the shell exits or release stops it.
//
// It runs only during a stop, whose ladder kills the job after the grace
// period anyway: after a break sent by Signal a program may handle the
// event and go on, and the batch file may legitimately run on with only
// cmd.exe builtins long after, which this must not mistake for the prompt.
func (s *sysProc) watchBatchPromptLocked() {
	if s.watchDone != nil || s.proc == 0 {
		return
	}
	done := make(chan struct{})
	s.watchDone = done
	proc := s.proc // release waits for done before closing it
	go func() {
		defer close(done)
		for !s.stopWatch.Load() {
			ev, err := windows.WaitForSingleObject(proc, uint32(batchPoll/time.Millisecond))
			if err != nil || ev != uint32(windows.WAIT_TIMEOUT) {
				return // the shell exited
			}
			images, err := s.memberImages()
			if err != nil {
				return
			}
			if onlyShellsLeft(images) {
				_ = s.terminate()
				return
			}
		}
	}()
}

// isBrokenPipe reports whether a write failed because no process reads the
// other end any more.
func isBrokenPipe(err error) bool {
	return errors.Is(err, windows.ERROR_BROKEN_PIPE) || errors.Is(err, windows.ERROR_NO_DATA)
}

// resume does nothing: Windows has no stopped state a console signal must
// first end.
func (s *sysProc) resume() {}

// beginStop marks that a stop ladder is under way (see stopping).
func (s *sysProc) beginStop() {
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
}

// reapTraced has nothing to do: a Windows process cannot stop under its
// parent's trace without the parent's debugger loop.
func (s *sysProc) reapTraced(*os.ProcessState) {}

// exitStatus reports the shell's exit code and, as Info.ExitSignal, what ended
// it where that was a console break or this package's job kill (see
// winExitSignal).
func (s *sysProc) exitStatus(state *os.ProcessState) (code int, signal string) {
	code = state.ExitCode()
	s.mu.Lock()
	killed := s.killedRunning
	s.mu.Unlock()
	return code, winExitSignal(uint32(code), killed)
}
