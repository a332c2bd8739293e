//go:build windows || aix

package agentproc

import (
	"os"
	"runtime"

	"golang.org/x/xerrors"
)

// ttySupported fails: this platform has no pseudo-terminal support here
// (ConPTY on Windows is not implemented).
func ttySupported() error {
	return xerrors.Errorf("TTY on %s: %w", runtime.GOOS, ErrUnsupported)
}

// openPTY fails as ttySupported does. Start never calls it here, since
// validate refuses a TTY first.
func openPTY(TTYSize) (master, slave *os.File, err error) {
	return nil, nil, ttySupported()
}

// The functions below are never reached, since openPTY always fails.

func setTTYSize(*os.File, TTYSize) error { return ErrUnsupported }

func veofChar(*os.File) byte { return 0x04 }

func ptyOutput(master *os.File) (*os.File, error) { return master, nil }
