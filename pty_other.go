//go:build windows || aix

package agentproc

import (
	"os"
	"os/exec"
	"runtime"

	"golang.org/x/xerrors"
)

// openPTY fails: this platform has no pseudo-terminal support here
// (ConPTY on Windows is not implemented).
func openPTY(TTYSize) (master, slave *os.File, err error) {
	return nil, nil, xerrors.Errorf("agentproc: TTY on %s: %w", runtime.GOOS, ErrUnsupported)
}

// The functions below are never reached, since openPTY always fails.

func prepareTTY(*exec.Cmd) error { return ErrUnsupported }

func setTTYSize(*os.File, TTYSize) error { return ErrUnsupported }

func veofChar(*os.File) byte { return 0x04 }

func ptyOutput(master *os.File) (*os.File, error) { return master, nil }
