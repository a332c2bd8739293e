//go:build !linux

package agentproc

import (
	"io"
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
func lockStateDir(int) (*os.File, error)                { return nil, stateSupported() }
func unlockStateDir(*os.File)                           {}
func stopOrphans(t []orphanTree, _ time.Duration) []int { return make([]int, len(t)) }

type orphanTree struct {
	id     string
	leader hostIdentity
	cgroup string
	parent string
}

// hostGuard exists only on Linux; a nil *hostGuard does nothing.
type hostGuard struct{}

func startHostGuard(func(error)) (*hostGuard, error) { return nil, nil }
func (*hostGuard) add(string, hostIdentity, string)  {}
func (*hostGuard) remove(string)                     {}
func (*hostGuard) close()                            {}

func openPrivateDir(string) (int, error)                 { return -1, stateSupported() }
func openPrivateSubdir(int, string, string) (int, error) { return -1, stateSupported() }
func openAt(int, string, int, uint32) (*os.File, error)  { return nil, stateSupported() }
func readAt(int, string, int64) ([]byte, error)          { return nil, stateSupported() }
func unlinkAt(int, string) error                         { return stateSupported() }
func renameAt(int, string, string) error                 { return stateSupported() }
func listAt(int) ([]string, error)                       { return nil, stateSupported() }
func removeAllAt(int, string) error                      { return stateSupported() }
func closeFD(int)                                        {}
func copyFileIn(string, string, io.Writer) error         { return stateSupported() }
func checkRecordPID(string, int) error                   { return stateSupported() }
