//go:build unix && !aix

package agentproc

import (
	"os"
	"syscall"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// ttySupported is nil: every Unix here has pseudo-terminals.
func ttySupported() error { return nil }

// openPTY opens a pseudo-terminal of the given size. The master is the
// parent's end for both input and output; the slave becomes the child's
// stdin, stdout and stderr and its controlling terminal.
func openPTY(size TTYSize) (master, slave *os.File, err error) {
	blocking, slave, err := pty.Open()
	if err != nil {
		return nil, nil, xerrors.Errorf("agentproc: open pseudo-terminal: %w", err)
	}
	master = blocking
	if !ptyRelay {
		master, err = pollable(blocking)
		if err != nil {
			_ = blocking.Close()
			_ = slave.Close()
			return nil, nil, xerrors.Errorf("agentproc: set up pseudo-terminal: %w", err)
		}
	}
	if err := setTTYSize(master, size.withDefaults()); err != nil {
		_ = master.Close()
		_ = slave.Close()
		return nil, nil, xerrors.Errorf("agentproc: set terminal size: %w", err)
	}
	return master, slave, nil
}

// pollable returns a non-blocking duplicate of the master, registered with
// the runtime poller, and closes f. The supervisor's drain deadline and the
// stdin write bound need deadlines, and Close must end a blocked Read or
// Write. The *os.File creack/pty returns cannot do that: its own ioctls call
// Fd, which puts the descriptor into blocking mode for good, after which
// deadlines are silently ignored (the master is blocking on every platform
// once pty.Open returns). For the same reason nothing here may call Fd on
// the master, pty.Setsize included.
func pollable(f *os.File) (*os.File, error) {
	raw, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	dup := -1
	var dupErr error
	if err := raw.Control(func(fd uintptr) {
		// The fork lock keeps a concurrent exec from inheriting the
		// duplicate before it is marked close-on-exec.
		syscall.ForkLock.RLock()
		defer syscall.ForkLock.RUnlock()
		if dup, dupErr = unix.Dup(int(fd)); dupErr == nil {
			unix.CloseOnExec(dup)
		}
	}); err != nil {
		return nil, err
	}
	if dupErr != nil {
		return nil, dupErr
	}
	if err := unix.SetNonblock(dup, true); err != nil {
		_ = unix.Close(dup)
		return nil, err
	}
	_ = f.Close()
	// NewFile registers a non-blocking descriptor with the runtime poller.
	return os.NewFile(uintptr(dup), f.Name()), nil
}

// ptyOutput returns the file the output reader reads for master: master
// itself, or on platforms that keep it blocking (ptyRelay) a relay whose
// goroutine from then on owns the master's closing.
func ptyOutput(master *os.File) (*os.File, error) {
	if !ptyRelay {
		return master, nil
	}
	out, err := relayMaster(master)
	if err != nil {
		return nil, xerrors.Errorf("agentproc: relay pseudo-terminal: %w", err)
	}
	return out, nil
}

// setTTYSize sets the terminal size through the master; the kernel sends
// SIGWINCH to the terminal's foreground process group.
func setTTYSize(master *os.File, size TTYSize) error {
	ws := &unix.Winsize{Row: size.Rows, Col: size.Cols}
	return control(master, func(fd int) error {
		return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, ws)
	})
}

// veofChar returns the terminal's EOF character, ^D when it cannot be read
// or is disabled.
func veofChar(master *os.File) byte {
	var c byte
	err := control(master, func(fd int) error {
		t, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
		if err != nil {
			return err
		}
		c = t.Cc[unix.VEOF]
		return nil
	})
	// 0 (Linux) and 0xff (BSD) are _POSIX_VDISABLE.
	if err != nil || c == 0 || c == 0xff {
		return 0x04
	}
	return c
}

// control runs fn on f's descriptor without f.Fd, which would make f
// blocking.
func control(f *os.File, fn func(fd int) error) error {
	raw, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var fnErr error
	if err := raw.Control(func(fd uintptr) { fnErr = fn(int(fd)) }); err != nil {
		return err
	}
	return fnErr
}
