package agentproc

import (
	"errors"
	"golang.org/x/sys/windows"
)

// isBrokenPipe reports whether a write failed because no process reads the
// other end any more.
func isBrokenPipe(err error) bool {
	return errors.Is(err, windows.ERROR_BROKEN_PIPE) || errors.Is(err, windows.ERROR_NO_DATA)
}
