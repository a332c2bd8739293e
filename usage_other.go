//go:build !linux

package agentproc

import (
	"runtime"

	"golang.org/x/xerrors"
)

func usageSupported() error {
	return xerrors.Errorf("process usage on %s: %w", runtime.GOOS, ErrUnsupported)
}

func treeUsages([]*Process) ([]Usage, error) { return nil, usageSupported() }
