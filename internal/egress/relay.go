package egress

import (
	"io"
	"net"
	"time"
)

// copyConn copies src to dst until src ends or either fails; it does
// not close or half-close either. pipeBack and copyRest copy every byte of
// a tunnel's two directions with it, after the proxy has read what it
// checks from the client.
//
// On Linux (relay_linux.go) it waits for src to be readable holding no
// buffer, then reads a chunk into a pooled 256 KiB buffer and writes it
// to dst: an idle tunnel holds no buffer and no pipe. io.Copy between two
// *net.TCPConn would splice(2) them instead, which saves the proxy its
// two copies but, measured on the loopback, made the client's reads of
// the spliced stream cost more CPU than a direct download's (the data
// reaches the client in more, smaller pieces), more than the proxy saved
// (the figures: docs/measurements.md, the tunnel copy's row). Elsewhere
// (relay_other.go) it is io.Copy.
//
// g, if not nil, bounds what a stalled relay holds (unread.go): on Linux
// each write to dst then carries its deadline, and a relay whose
// destination stops reading records its unread bytes in g's account and
// ends when the account passes its budget. Elsewhere g is not used.
func copyConn(dst, src net.Conn, g *stallGuard) { copyConnOS(dst, src, g) }

// guardedWriter returns what writes to dst under g, as copyConn's writes
// do, for bytes read from src by another copy than copyConn's: relayHTTP
// writes a plain-HTTP request's body to its host through it (seventeenth
// attack review: an endless body to a host that reads nothing held its
// queues uncounted). Elsewhere than Linux it is dst.
func guardedWriter(dst, src net.Conn, g *stallGuard) io.Writer { return guardedWriterOS(dst, src, g) }

// stallGuard is one relay direction's bound on what it may leave unread.
type stallGuard struct {
	share   stallShare
	timeout time.Duration
	// over is called once, when this relay finds its listener's account
	// past the budget: it reports the denial and closes the tunnel, whose
	// upstream socket's queue is then freed.
	over func()
}
