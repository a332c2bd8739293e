//go:build !linux

package egress

import (
	"io"
	"net"
)

// copyConnOS does not bound a stalled relay: the unread bytes are read
// through Linux's SIOCINQ (relay_linux.go).
func copyConnOS(dst, src net.Conn, _ *stallGuard) { _, _ = io.Copy(dst, src) }

// boundClientSend is Linux's only: the effect it is for was measured
// there (relay_linux.go).
func boundClientSend(net.Conn) {}

// guardedWriterOS is dst: nothing is counted (relay_linux.go).
func guardedWriterOS(dst, _ net.Conn, _ *stallGuard) io.Writer { return dst }
