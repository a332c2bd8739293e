//go:build !linux && !windows

package agentproc

import (
	"runtime"

	"golang.org/x/xerrors"
)

// portsSupported: listening ports are read from /proc on Linux and from
// the TCP and UDP tables on Windows; macOS and the BSDs have no /proc/net,
// and reading their socket tables (sysctl, libproc) is not implemented.
func portsSupported() error {
	return xerrors.Errorf("listening ports on %s: %w", runtime.GOOS, ErrUnsupported)
}

// portCache holds nothing here.
type portCache struct{}

func listeningPorts(*portCache, []portTree) ([][]Port, error) { return nil, portsSupported() }
