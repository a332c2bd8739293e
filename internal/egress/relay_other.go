//go:build !linux

package egress

import (
	"io"
	"net"
)

func copyConnOS(dst, src net.Conn) { _, _ = io.Copy(dst, src) }
