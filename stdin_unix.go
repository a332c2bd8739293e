//go:build unix

package agentproc

import (
	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// isBrokenPipe reports whether a write failed because no process reads the
// other end any more. Go ignores SIGPIPE for descriptors other than stdout
// and stderr, so the host only ever sees EPIPE.
func isBrokenPipe(err error) bool {
	return xerrors.Is(err, unix.EPIPE)
}
