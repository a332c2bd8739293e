package agentproc

import (
	"golang.org/x/sys/windows"
	"golang.org/x/xerrors"
)

// isBrokenPipe reports whether a write failed because no process reads the
// other end any more.
func isBrokenPipe(err error) bool {
	return xerrors.Is(err, windows.ERROR_BROKEN_PIPE) || xerrors.Is(err, windows.ERROR_NO_DATA)
}
