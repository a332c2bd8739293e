package agentproc

import "github.com/agentproc/agentproc/internal/pidfd"

// FailThreadPidfd has every pidfd of a forking thread, which holds an
// unprivileged tree until that thread ends (treeHold), fail with err, as a
// host out of descriptors (EMFILE) or on an old kernel (EINVAL) would see
// it, until restore. Call it before the Manager is made.
func FailThreadPidfd(err error) (restore func()) {
	openThreadPidfd = func(int) (int, error) { return -1, err }
	return func() { openThreadPidfd = pidfd.OpenThread }
}
