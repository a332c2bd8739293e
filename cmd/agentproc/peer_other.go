//go:build !linux

package main

import (
	"errors"
	"net"
)

// peerPID is unsupported here: agentproc's sandbox is enforced and
// verified on Linux only (see agentproc.MoreConfined).
func peerPID(*net.UnixConn) (int, error) { return 0, errors.ErrUnsupported }
