package agentproc

import (
	"errors"

	"golang.org/x/xerrors"
)

// Errors returned by the package. Check them with errors.Is; most are returned
// wrapped with the detail that caused them.
var (
	// ErrNotFound is returned for an ID that is unknown, already dropped by
	// retention, or owned by another Scope's owner. The three cases are
	// deliberately indistinguishable.
	ErrNotFound = xerrors.New("agentproc: process not found")
	// ErrNotRunning is returned when signalling a process that has exited.
	ErrNotRunning = xerrors.New("agentproc: process is not running")
	// ErrClosed is returned by Start after Close.
	ErrClosed = xerrors.New("agentproc: manager is closed")
	// ErrTooManyProcesses is returned by Start when WithMaxRunning processes
	// are already running.
	ErrTooManyProcesses = xerrors.New("agentproc: too many running processes")
	// ErrUnsupportedSignal is returned by Signal for a Signal value the
	// package does not know.
	ErrUnsupportedSignal = xerrors.New("agentproc: unsupported signal")
	// ErrInvalidRequest is returned, wrapped with the reason, for a Request
	// or argument that cannot be used. Nothing is started.
	ErrInvalidRequest = xerrors.New("agentproc: invalid request")
	// ErrNoStdin is returned by WriteStdin and CloseStdin for a process
	// started without Request.Stdin or Request.TTY.
	ErrNoStdin = xerrors.New("agentproc: process has no writable stdin")
	// ErrStdinClosed is returned by WriteStdin after CloseStdin or once the
	// process has exited (also when the child closed its end first).
	ErrStdinClosed = xerrors.New("agentproc: stdin is closed")
	// ErrNoTTY is returned by Resize for a process started without
	// Request.TTY.
	ErrNoTTY = xerrors.New("agentproc: process has no terminal")
	// ErrUnsupported is returned, wrapped with the platform's name, for a
	// feature the platform lacks (Request.TTY on Windows). It matches
	// errors.ErrUnsupported under errors.Is, so one check covers it and the
	// errors.ErrUnsupported that WithCgroup's failures wrap.
	ErrUnsupported error = unsupportedError{}
	// ErrExited is returned by Process.WaitMatch when the process exits
	// without writing a matching line.
	ErrExited = xerrors.New("agentproc: process exited")
	// ErrKeyConflict is returned by Start when the request's Key names a
	// retained process of the same owner that was started with a different
	// Command, WorkDir, Env or Background.
	ErrKeyConflict = xerrors.New("agentproc: key used by a different request")
)

// errNoProcess is what the OS layer returns when a signal finds no live
// member of the tree; the portable code maps it to ErrNotRunning.
var errNoProcess = xerrors.New("agentproc: no process in the tree")

// unsupportedError is the type of ErrUnsupported: a comparable value, so
// errors.Is finds it through any wrapping, that also claims to be
// errors.ErrUnsupported.
type unsupportedError struct{}

func (unsupportedError) Error() string { return "agentproc: unsupported on this platform" }

func (unsupportedError) Is(target error) bool { return target == errors.ErrUnsupported }
