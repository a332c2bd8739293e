//go:build !linux

package agentproc

// hideWatch watches nothing where there is no sandbox (see
// sandbox_hidewatch_linux.go): a policy is resolved once.
type hideWatch struct{}

func (*hideWatch) watch(string, string) bool { return true }
func (*hideWatch) changed() ([]string, bool) { return nil, false }
func (*hideWatch) reset()                    {}
func (*hideWatch) filled() bool              { return false }
func (*hideWatch) generation() uint64        { return 0 }
func (*hideWatch) close()                    {}
