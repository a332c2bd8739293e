package agentproc

import (
	"os"
	"os/exec"

	"golang.org/x/xerrors"
)

// The pseudo-terminal layer is not written yet: Request.TTY fails at Start.

func openPTY(TTYSize) (master, slave *os.File, err error) {
	return nil, nil, xerrors.Errorf("agentproc: pseudo-terminal: %w", ErrUnsupported)
}

func prepareTTY(*exec.Cmd) error { return ErrUnsupported }

func setTTYSize(*os.File, TTYSize) error { return ErrUnsupported }

func veofChar(*os.File) byte { return 0x04 }
