package agentproc

import (
	"errors"
	"os"

	"golang.org/x/xerrors"
)

// TTYSize is the size of a process's pseudo-terminal in character cells. A
// zero Rows or Cols means 24 rows or 80 columns.
//
// Its JSON tags are part of httpapi's wire format, which embeds it; they are
// kept stable (TestWireTags).
type TTYSize struct {
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

func (s TTYSize) withDefaults() TTYSize {
	if s.Rows == 0 {
		s.Rows = 24
	}
	if s.Cols == 0 {
		s.Cols = 80
	}
	return s
}

// Resize changes the size of the process's terminal; the foreground process
// group of the terminal gets SIGWINCH. It returns ErrNoTTY for a process
// started without Request.TTY, ErrNotRunning once the process has exited and
// ErrInvalidRequest for a zero rows or cols.
func (p *Process) Resize(rows, cols uint16) error {
	if p.in == nil || !p.in.tty {
		return ErrNoTTY
	}
	if rows == 0 || cols == 0 {
		return xerrors.Errorf("resize to %dx%d: %w", rows, cols, ErrInvalidRequest)
	}
	if p.exited() {
		return ErrNotRunning
	}
	if err := setTTYSize(p.in.f, TTYSize{Rows: rows, Cols: cols}); err != nil {
		// The supervisor closes the master once the shell has exited, before
		// Done: a resize racing that gets "use of closed file" (which is not
		// always os.ErrClosed) and reports the process as not running.
		if errors.Is(err, os.ErrClosed) || p.in.isClosed() || p.exited() {
			return ErrNotRunning
		}
		return xerrors.Errorf("agentproc: resize terminal: %w", err)
	}
	return nil
}
