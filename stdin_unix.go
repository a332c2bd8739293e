//go:build unix

package agentproc

import (
	"errors"
	"golang.org/x/sys/unix"
)

// isBrokenPipe reports whether a write failed because no process reads the
// other end any more. Go ignores SIGPIPE for descriptors other than stdout
// and stderr, so the host only ever sees EPIPE.
func isBrokenPipe(err error) bool {
	return errors.Is(err, unix.EPIPE)
}
