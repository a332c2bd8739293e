//go:build !linux

package agentproc

import (
	"runtime"

	"golang.org/x/xerrors"
)

// portsSupported: listening ports are read from /proc on Linux only. The
// Windows TCP/UDP tables (GetExtendedTcpTable) are not implemented yet;
// macOS and the BSDs have no /proc/net.
func portsSupported() error {
	return xerrors.Errorf("listening ports on %s: %w", runtime.GOOS, ErrUnsupported)
}

// portCache holds nothing here.
type portCache struct{}

func listeningPorts(*portCache, []portTree) ([][]Port, error) { return nil, portsSupported() }

func (*containment) cgroupDir() string { return "" }
