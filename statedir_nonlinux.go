//go:build !linux

package agentproc

import (
	"os"
	"runtime"
	"time"

	"golang.org/x/xerrors"
)

// The state dir needs what only Linux offers here: a start time per PID
// that survives the host (/proc/PID/stat), pidfds to signal an orphan
// without racing PID reuse, and /proc to find a tree by its marker. See the
// state dir's part of the contract in platform.go.

func stateSupported() error {
	return xerrors.Errorf("needs Linux, this is %s: %w", runtime.GOOS, ErrUnsupported)
}

func selfIdentity() (hostIdentity, error)               { return hostIdentity{}, stateSupported() }
func identityOf(int) (hostIdentity, bool)               { return hostIdentity{}, false }
func statIdentity(int) (hostIdentity, bool, bool)       { return hostIdentity{}, false, false }
func lockStateDir(string) (*os.File, error)             { return nil, stateSupported() }
func unlockStateDir(*os.File)                           {}
func stopOrphans(t []orphanTree, _ time.Duration) []int { return make([]int, len(t)) }

type orphanTree struct {
	id     string
	leader hostIdentity
	cgroup string
}

// hostGuard exists only on Linux; a nil *hostGuard does nothing.
type hostGuard struct{}

func startHostGuard(func(error)) (*hostGuard, error) { return nil, nil }
func (*hostGuard) add(string, hostIdentity, string)  {}
func (*hostGuard) remove(string)                     {}
func (*hostGuard) close()                            {}
