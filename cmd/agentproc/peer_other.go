//go:build !linux

package main

import (
	"errors"
	"net"
)

// peerPID is unsupported here: agentproc's sandbox is enforced and
// verified on Linux only (see agentproc.MoreConfined).
func peerPID(*net.UnixConn) (int, func() bool, error) { return 0, nil, errors.ErrUnsupported }
