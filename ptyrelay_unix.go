//go:build unix && !aix

package agentproc

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// relayMaster returns the file the output reader uses for a PTY master that
// must stay blocking (ptyRelay): one end of a socket pair, pollable
// everywhere, so the supervisor's drain deadline and Close work on it as on
// a pipe. A goroutine copies the master into the other end with plain
// blocking reads, which never touch kqueue.
//
// The goroutine owns the master's lifetime: it closes the master when the
// terminal reports EOF or EIO (no process holds the slave any more, so
// nothing could read what is written to it) or when the reader has gone
// and a write to the pair fails. A process that escaped the tree and keeps
// the slave open without writing to it keeps the goroutine in its read,
// holding the master, until that process exits; the reader itself is never
// held, since it reads the pair.
func relayMaster(master *os.File) (*os.File, error) {
	syscall.ForkLock.RLock()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err == nil {
		unix.CloseOnExec(fds[0])
		unix.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		_ = unix.Close(fds[0])
		_ = unix.Close(fds[1])
		return nil, err
	}
	// The reader only reads: shutting its write side makes the relay's
	// end see no data it would have to drain.
	_ = unix.Shutdown(fds[0], unix.SHUT_WR)
	go relayLoop(master, fds[1])
	return os.NewFile(uintptr(fds[0]), master.Name()), nil
}

// relayLoop copies master into the socket fd sock until either side ends.
func relayLoop(master *os.File, sock int) {
	defer func() { _ = unix.Close(sock) }()
	defer func() { _ = master.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := master.Read(buf)
		for b := buf[:n]; len(b) > 0; {
			k, werr := unix.Write(sock, b)
			if errors.Is(werr, unix.EINTR) {
				continue
			}
			if werr != nil {
				return // the reader is gone
			}
			b = b[k:]
		}
		if err != nil {
			return // EOF, or EIO once no process holds the slave
		}
	}
}
