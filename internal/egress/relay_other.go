//go:build !linux

package egress

import (
	"io"
	"net"
)

func copyConnOS(dst, src net.Conn) { _, _ = io.Copy(dst, src) }

// boundClientSend is Linux's only: the effect it is for was measured
// there (relay_linux.go).
func boundClientSend(net.Conn) {}
