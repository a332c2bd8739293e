package agentproc

import (
	"slices"
	"strings"

	"golang.org/x/xerrors"

	"github.com/agentproc/agentproc/internal/errdefs"
)

// Errors returned by the package. Check them with errors.Is; most are returned
// wrapped with the detail that caused them.
var (
	// ErrNotFound is returned for an ID that is unknown, already dropped by
	// retention, or owned by another Scope's owner. The three cases are
	// deliberately indistinguishable.
	ErrNotFound = xerrors.New("agentproc: process not found")
	// ErrNotRunning is returned by an action that needs a running process
	// (Process.Signal, Process.Resize) once the process has exited: the
	// action was refused and nothing happened. Compare ErrExited.
	ErrNotRunning = xerrors.New("agentproc: process is not running")
	// ErrRunning is returned by Remove for a process that has not exited:
	// nothing was removed. Stop it first.
	ErrRunning = xerrors.New("agentproc: process is running")
	// ErrClosed is returned by Start after Close or Shutdown.
	ErrClosed = xerrors.New("agentproc: manager is closed")
	// ErrTooManyProcesses is returned by Start when WithMaxRunning processes
	// are already running.
	ErrTooManyProcesses = xerrors.New("agentproc: too many running processes")
	// ErrUnsupportedSignal is returned by Signal for a Signal value the
	// package does not know.
	ErrUnsupportedSignal = xerrors.New("agentproc: unsupported signal")
	// ErrInvalidRequest is returned, wrapped with the reason, for a Request
	// or argument that cannot be used. Nothing is started.
	ErrInvalidRequest = errdefs.ErrInvalidRequest
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
	// feature the platform lacks (Request.TTY on Windows, WithCgroup
	// without cgroup v2). It also matches errors.ErrUnsupported under
	// errors.Is, so either check finds every such failure.
	ErrUnsupported = errdefs.ErrUnsupported
	// ErrExited is returned by a wait for something the process was to
	// write (Process.WaitMatch) when the process exited without writing
	// it: the wait's condition can never be met. It differs from
	// ErrNotRunning, which refuses an action, in that the wait itself was
	// valid and the output up to the exit was examined. The two are kept
	// apart so that a caller of WaitMatch can tell "the server died before
	// it was ready" from its own mistake of signalling a finished process.
	ErrExited = xerrors.New("agentproc: process exited")
	// ErrKeyConflict is returned by Start when the request's Key names a
	// retained process of the same owner that was started with a different
	// Command, WorkDir, Env or Background.
	ErrKeyConflict = xerrors.New("agentproc: key used by a different request")
)

// pkgPrefix opens every sentinel's text, and a message names the package
// once: the rule is in CONTRIBUTING.md ("Errors").
const pkgPrefix = "agentproc: "

// prefixFor returns what a step that wraps err puts in front of its own
// name: pkgPrefix, or "" when an error in err's chain already begins with
// it (a sentinel, or a step of this package that a caller could have
// received on its own), so that a message names the package once:
// "set up containment: cgroup parent "x" is not an absolute path:
// agentproc: invalid request", never "agentproc: set up containment: ...:
// agentproc: invalid request".
func prefixFor(err error) string {
	if namesPackage(err) {
		return ""
	}
	return pkgPrefix
}

// namesPackage reports whether err or an error it wraps (through Unwrap,
// including errors.Join's) has a message that begins with pkgPrefix.
func namesPackage(err error) bool {
	for err != nil {
		if strings.HasPrefix(err.Error(), pkgPrefix) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			return slices.ContainsFunc(u.Unwrap(), namesPackage)
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		default:
			return false
		}
	}
	return false
}

// Errors the package returns to itself and never to a caller. (The Windows
// OS layer has one of its own, errJobReleased, in sysproc_windows.go.)
var (
	// errNoProcess is what the OS layer returns when a signal finds no
	// live member of the tree; the portable code maps it to ErrNotRunning.
	errNoProcess = xerrors.New("agentproc: no process in the tree")
	// errFreeSlot is readRecord's answer for a slot that holds no record:
	// an empty file, or one whose last process was dropped (see freeSlot).
	// An empty one may also be left by a host that died before writing its
	// first record, and so before starting anything.
	errFreeSlot = xerrors.New("agentproc: free record slot")
)
